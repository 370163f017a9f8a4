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
# Thinking is OFF by default. Qwen3 (and other hybrid-reasoning models) think before every
# answer unless told not to: the reasoning eats the small budgets of the short stages (200
# tokens to name a field, about 40 per paper to label) and the replies come back cut at
# max_tokens. So every request carries chat_template_kwargs {"enable_thinking": false} (a chat
# template that does not know the switch ignores it). THINKING=on serves the models with vLLM's
# reasoning parser instead (the reasoning arrives as reasoning_content, kept in the store for
# review and never in the artifacts) and gives every request REASONING_TOKENS more budget. Either
# way, a reply still cut at the budget is asked again once with twice the budget, and a stage
# that loses more than 5% of its units stops the build with one line saying so.
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
#   THINKING        off (default) or on: see above
#   REASONING_PARSER  vLLM reasoning parser with THINKING=on (default qwen3; deepseek_r1 for R1 distills)
#   REASONING_TOKENS  budget added to every request with THINKING=on (default 4096)
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
THINKING=${THINKING:-off}
case "$THINKING" in
  off) VLLM_THINK_ARGS=(); RAP_THINK_ARGS=(--chat-template-kwargs '{"enable_thinking": false}') ;;
  on) VLLM_THINK_ARGS=(--reasoning-parser "${REASONING_PARSER:-qwen3}")
      RAP_THINK_ARGS=(--reasoning-tokens "${REASONING_TOKENS:-4096}") ;;
  *) echo "THINKING must be on or off, got '$THINKING'" >&2; exit 2 ;;
esac
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
    --tensor-parallel-size "$TP" --max-model-len "$MAX_MODEL_LEN" "${VLLM_THINK_ARGS[@]}" ${EXTRA_VLLM_ARGS:-} \
    >"$log" 2>&1 &
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
  --model "$MODEL" --draft-models "$MODEL,$DRAFT_B" --max-in-flight "$IN_FLIGHT" "${RAP_THINK_ARGS[@]}")
if [[ -n "${MAX_SPEND_USD:-}" ]]; then ARGS+=(--max-spend-usd "$MAX_SPEND_USD"); fi
if [[ -n "${PRICES:-}" ]]; then ARGS+=(--prices "$PRICES"); fi

OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY} "$RAP" "${ARGS[@]}" --dry-run --tokenizer "${TOKENIZER:-$MODEL}"
OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY} "$RAP" "${ARGS[@]}"
echo "review the codebook construction: ${OUT%/}.llm-store/review.md" >&2
