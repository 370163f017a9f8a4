#!/usr/bin/env bash
# Serve a model with vLLM and benchmark it on RAP with the package's agent runner.
#
#   MODEL=Qwen/Qwen3-4B TOOL_PARSER=hermes bash examples/vllm_recipe.sh build/mini runs/qwen3-4b
#
# Environment (all optional except MODEL):
#   MODEL            model id or local path served by vLLM (required)
#   TOOL_PARSER      vLLM --tool-call-parser (hermes for Qwen/Hermes; llama3_json, mistral, openai, ...)
#   PORT             server port (default 8000)
#   TP               tensor-parallel size (default: number of visible GPUs, at least 1)
#   MAX_MODEL_LEN    vLLM --max-model-len (default 32768)
#   CONDITIONS       conditions to run (default A0,A1,A2,A3,A4)
#   CONCURRENCY      units in flight (default 64)
#   MAX_TOKENS       completion cap per request (default: the spec's caps)
#   EXTRA_VLLM_ARGS  extra arguments passed to `vllm serve`
#   RAP              the rap command (default: rap)
# Arguments: INSTANCE_DIR (a built instance, e.g. `rap build --instance mini --out build/mini`)
#            RUN_DIR      (run directory; rerunning the script resumes it)
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: MODEL=... [TOOL_PARSER=hermes] $0 INSTANCE_DIR RUN_DIR" >&2
  exit 2
fi
INSTANCE_DIR=$1
RUN_DIR=$2
: "${MODEL:?set MODEL to the model to serve}"
TOOL_PARSER=${TOOL_PARSER:-hermes}
PORT=${PORT:-8000}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-32768}
CONDITIONS=${CONDITIONS:-A0,A1,A2,A3,A4}
CONCURRENCY=${CONCURRENCY:-64}
RAP=${RAP:-rap}
if [[ -z "${TP:-}" ]]; then
  TP=$(nvidia-smi -L 2>/dev/null | wc -l || true)
  [[ "${TP:-0}" -ge 1 ]] || TP=1
fi
BASE_URL="http://127.0.0.1:${PORT}/v1"
LOG="${RUN_DIR%/}.vllm.log"
mkdir -p "$(dirname "$LOG")"

# shellcheck disable=SC2086  # EXTRA_VLLM_ARGS is meant to split into words
vllm serve "$MODEL" \
  --host 127.0.0.1 --port "$PORT" \
  --tensor-parallel-size "$TP" \
  --max-model-len "$MAX_MODEL_LEN" \
  --enable-auto-tool-choice --tool-call-parser "$TOOL_PARSER" \
  ${EXTRA_VLLM_ARGS:-} >"$LOG" 2>&1 &
SERVER_PID=$!
cleanup() { kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; }
trap cleanup EXIT INT TERM

echo "waiting for vLLM at $BASE_URL (log: $LOG)" >&2
for _ in $(seq 1 600); do
  if curl -fsS "$BASE_URL/models" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    echo "vLLM exited; last log lines:" >&2
    tail -n 50 "$LOG" >&2
    exit 1
  fi
  sleep 2
done
curl -fsS "$BASE_URL/models" >/dev/null

RUN_ARGS=(run "$INSTANCE_DIR" --backend openai --model "$MODEL" --base-url "$BASE_URL"
  --conditions "$CONDITIONS" --concurrency "$CONCURRENCY" --out "$RUN_DIR")
if [[ -n "${MAX_TOKENS:-}" ]]; then RUN_ARGS+=(--max-tokens "$MAX_TOKENS"); fi
OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY} "$RAP" "${RUN_ARGS[@]}"

"$RAP" score "$INSTANCE_DIR" "$RUN_DIR/predictions.jsonl"
