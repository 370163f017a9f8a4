#!/usr/bin/env bash
# Build the `full` instance with the paper's LLM construction, the models served by vLLM.
#
#   MODEL=Qwen/Qwen3-32B DRAFT_B=meta-llama/Llama-3.3-70B-Instruct \
#     bash examples/vllm_llm_instrument.sh SPEC.json arxiv-metadata-oai-snapshot.json build/full
#
# Serves MODEL (naming, programs, consolidation, assignment, and the first draft) and DRAFT_B
# (the second, independent draft) with vLLM, one server per model, prints the dry-run estimate,
# then runs `rap build --instrument llm` against both. Requests are keyed and stored in
# OUT.llm-store: rerunning the script resumes and never pays for an answered request again.
#
# Environment (all optional except MODEL):
#   MODEL           model id or path for every stage but the second draft (required)
#   DRAFT_B         second drafting model (default: MODEL; then both drafts share one server)
#   PORT            first server port (default 8000; DRAFT_B's server uses PORT+1)
#   TP              tensor-parallel size per server (default: visible GPUs / number of servers)
#   MAX_MODEL_LEN   vLLM --max-model-len (default 32768)
#   IN_FLIGHT       open requests per endpoint (default 128; vLLM batches them)
#   MAX_SPEND_USD   stop cleanly before this spend (needs prices for the models: PRICES=FILE)
#   TOKENIZER       tokenizer for the dry run's token counts (default: MODEL, exact for it)
#   EXTRA_VLLM_ARGS extra arguments for `vllm serve`
#   RAP             the rap command (default: rap)
# More endpoints for the same model (data parallel on several nodes): start them yourself and
# pass them all, comma-separated, to --base-url; requests go to the least busy one and fail
# over when one stops answering.
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: MODEL=... [DRAFT_B=...] $0 SPEC.json SNAPSHOT OUT" >&2
  exit 2
fi
SPEC=$1
SNAPSHOT=$2
OUT=$3
: "${MODEL:?set MODEL to the model to serve}"
DRAFT_B=${DRAFT_B:-$MODEL}
PORT=${PORT:-8000}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
IN_FLIGHT=${IN_FLIGHT:-128}
RAP=${RAP:-rap}
N_SERVERS=1
[[ "$DRAFT_B" != "$MODEL" ]] && N_SERVERS=2
if [[ -z "${TP:-}" ]]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l || true)
  TP=$(( ${GPUS:-1} / N_SERVERS ))
  [[ "$TP" -ge 1 ]] || TP=1
fi

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT INT TERM

serve() {  # serve MODEL PORT FIRST_GPU
  local log="${OUT%/}.vllm-$2.log"
  mkdir -p "$(dirname "$log")"
  # shellcheck disable=SC2086  # EXTRA_VLLM_ARGS is meant to split into words
  CUDA_VISIBLE_DEVICES=$(seq -s, "$3" $(( $3 + TP - 1 ))) vllm serve "$1" --host 127.0.0.1 --port "$2" \
    --tensor-parallel-size "$TP" --max-model-len "$MAX_MODEL_LEN" ${EXTRA_VLLM_ARGS:-} >"$log" 2>&1 &
  PIDS+=($!)
  echo "waiting for $1 on port $2 (log: $log)" >&2
  for _ in $(seq 1 900); do
    curl -fsS "http://127.0.0.1:$2/v1/models" >/dev/null 2>&1 && return 0
    kill -0 "${PIDS[-1]}" 2>/dev/null || { tail -n 50 "$log" >&2; exit 1; }
    sleep 2
  done
  echo "vLLM on port $2 did not come up" >&2
  exit 1
}

serve "$MODEL" "$PORT" 0
URLS="http://127.0.0.1:${PORT}/v1"
if [[ "$N_SERVERS" == 2 ]]; then
  serve "$DRAFT_B" $(( PORT + 1 )) "$TP"
  # a vLLM server answers only for its own model: bind each endpoint to its model
  URLS="$MODEL=http://127.0.0.1:${PORT}/v1,$DRAFT_B=http://127.0.0.1:$(( PORT + 1 ))/v1"
fi
ARGS=(build --spec "$SPEC" --source "$SNAPSHOT" --out "$OUT" --instrument llm --base-url "$URLS"
  --model "$MODEL" --draft-models "$MODEL,$DRAFT_B" --max-in-flight "$IN_FLIGHT")
if [[ -n "${MAX_SPEND_USD:-}" ]]; then ARGS+=(--max-spend-usd "$MAX_SPEND_USD"); fi
if [[ -n "${PRICES:-}" ]]; then ARGS+=(--prices "$PRICES"); fi

OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY} "$RAP" "${ARGS[@]}" --dry-run --tokenizer "${TOKENIZER:-$MODEL}"
OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY} "$RAP" "${ARGS[@]}"
echo "review the codebook construction: ${OUT%/}.llm-store/review.md" >&2
