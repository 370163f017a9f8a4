"""The scripted server as a batch runner: an OpenAI Batch input file in, output files out, in the
line shapes of the three producers the LLM instrument reads (no model, no network).

Each input line's ``body`` is answered by :meth:`ScriptedApp.reply_for
<rap_benchmark.testing.scripted_server.ScriptedApp.reply_for>` (reply styles and faults as the
server's: ``--mode``, ``--error-rate``, ...), exactly as the server would answer it over HTTP,
then written as

``vllm``       ``vllm run-batch`` does: one file, input order, a failed request inline
               (``status_code`` >= 400, ``body`` null, ``error`` a plain string);
``openai``     OpenAI's Batch API does: the output file in a shuffled order (seeded), failed
               requests in a separate error file ``<output stem>_error.jsonl``
               (``error: {code, message}``);
``anthropic``  Anthropic Message Batches results do: shuffled, ``result.type`` ``succeeded``
               (the reply as a Messages ``message``: text and thinking blocks, ``stop_reason``,
               ``usage``) or ``errored``.

    python -m rap_benchmark.testing.batch_runner -i round-001.input.jsonl -o round-001.output.jsonl --format vllm
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
from pathlib import Path
from typing import Any

import orjson

from rap_benchmark.testing.scripted_server import MODES, Faults, ScriptedApp

FORMATS = ("vllm", "openai", "anthropic")


def _uid(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _error_message(payload: bytes) -> str:
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload.decode(errors="replace")
    err = obj.get("error", obj) if isinstance(obj, dict) else obj
    return str(err.get("message", err)) if isinstance(err, dict) else str(err)


def _as_anthropic(reply: dict[str, Any]) -> dict[str, Any]:
    """A chat.completion as Anthropic's Messages API would have sent the same answer."""
    choice = reply["choices"][0]
    message = choice["message"]
    blocks = []
    if message.get("reasoning_content"):
        blocks.append({"type": "thinking", "thinking": message["reasoning_content"], "signature": "scripted"})
    if message.get("content") is not None:
        blocks.append({"type": "text", "text": message["content"]})
    usage = reply.get("usage") or {}
    return {
        "id": "msg_" + reply["id"].removeprefix("chatcmpl-"),
        "type": "message",
        "role": "assistant",
        "model": reply["model"],
        "content": blocks,
        "stop_reason": "max_tokens" if choice.get("finish_reason") == "length" else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("prompt_tokens", 0), "output_tokens": usage.get("completion_tokens", 0)},
    }


def run_batch(app: ScriptedApp, input_path: Path, output_path: Path, fmt: str, *, seed: int = 0) -> list[Path]:
    """Answer every line of ``input_path`` and write the output file(s) of ``fmt``; their paths."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    ok: list[bytes] = []
    failed: list[bytes] = []
    for raw in input_path.read_bytes().splitlines():
        if not raw.strip():
            continue
        line = orjson.loads(raw)
        key = line["custom_id"]
        body = orjson.dumps(line["body"], option=orjson.OPT_SORT_KEYS)
        status, payload, _ = app.reply_for(body, line.get("url", "/v1/chat/completions"))
        reply = orjson.loads(payload) if status == 200 else None
        if fmt == "anthropic":
            result = (
                {"type": "succeeded", "message": _as_anthropic(reply)}
                if reply is not None
                else {
                    "type": "errored",
                    "error": {
                        "type": "error",
                        "error": {
                            "type": "invalid_request_error" if 400 <= status < 500 else "api_error",
                            "message": _error_message(payload),
                        },
                    },
                }
            )
            ok.append(orjson.dumps({"custom_id": key, "result": result}))
            continue
        rid = _uid(key, fmt, str(status))
        if fmt == "vllm":
            out = {
                "id": f"vllm-{rid[:32]}",
                "custom_id": key,
                "response": {"status_code": status, "request_id": f"vllm-batch-{rid[32:]}", "body": reply},
                "error": None if reply is not None else _error_message(payload),
            }
            ok.append(orjson.dumps(out))
            continue
        if reply is not None:
            response = {"status_code": 200, "request_id": rid[:32], "body": reply}
            ok.append(
                orjson.dumps({"id": f"batch_req_{rid[32:56]}", "custom_id": key, "response": response, "error": None})
            )
        else:
            error = {"code": "server_error" if status >= 500 else "invalid_request", "message": _error_message(payload)}
            failed.append(
                orjson.dumps({"id": f"batch_req_{rid[32:56]}", "custom_id": key, "response": None, "error": error})
            )
    if fmt != "vllm":
        random.Random(seed).shuffle(ok)
        random.Random(seed + 1).shuffle(failed)
    paths = [output_path]
    output_path.write_bytes(b"".join(x + b"\n" for x in ok))
    if failed:
        error_path = output_path.with_name(output_path.name.removesuffix(".jsonl") + "_error.jsonl")
        error_path.write_bytes(b"".join(x + b"\n" for x in failed))
        paths.append(error_path)
    return paths


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-i", "--input-file", required=True)
    p.add_argument("-o", "--output-file", required=True)
    p.add_argument("--format", choices=FORMATS, default="vllm")
    p.add_argument("--mode", choices=MODES, default="plain")
    for f in ("error_rate", "invalid_rate", "seed"):
        default = getattr(Faults(), f)
        p.add_argument("--" + f.replace("_", "-"), type=type(default), default=default)
    args = p.parse_args(argv)
    faults = Faults(error_rate=args.error_rate, invalid_rate=args.invalid_rate, seed=args.seed)
    paths = run_batch(ScriptedApp(faults, mode=args.mode), Path(args.input_file), Path(args.output_file), args.format)
    print(" ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    sys.exit(main())
