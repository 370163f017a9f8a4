"""Batch files: a transport for the LLM instrument that needs no endpoint up during the build.

A build with ``--batch DIR`` runs the construction as far as the answers at hand allow. Every
request it needs next and has no reply for is written, in pipeline order, to the round's OpenAI
Batch input file ``DIR/round-NNN.input.jsonl`` (one JSON line per request: ``custom_id`` = the
request's store key, ``method`` ``POST``, ``url`` ``/v1/chat/completions``, ``body`` = exactly the
body the HTTP transport sends), split into ``round-NNN.part-K.input.jsonl`` files above 50,000
requests or 190 MB (OpenAI's limits). The build then stops with exit status
:data:`WAITING_EXIT`. Run the file with ``vllm run-batch`` or a provider's Batch API, put the
output file(s) in ``DIR`` (any name ending in ``.jsonl``) and rerun the same command: every
output file is read, in each format that exists:

* OpenAI's: any order, failed requests in a separate error file (``error: {code, message}``);
* ``vllm run-batch``'s: input order, failed requests inline (``status_code`` >= 400, ``error``
  a plain string or a vLLM error object);
* Anthropic Message Batches results (``custom_id`` and ``result.type`` ``succeeded`` /
  ``errored`` / ``canceled`` / ``expired``; the text in ``message.content``).

A reply enters the request store when the construction asks for it, through the same record
(:func:`~.client.response_record`), lenient extraction and strict validation as an HTTP reply; a
retry, a cut reply or a failed line becomes a request of the next round, and nothing answered is
asked again. A failed line with a 4xx status (other than 408, 409, 425 and 429) or Anthropic's
``invalid_request_error`` is a refusal, as over HTTP; a request that failed in more output lines
than the transport retries allows stops the build.

Bad output stops the build in one line before anything is stored: a line that is not JSON (a
torn last line included), a line of no known shape, a ``custom_id`` no request of this build has
(an output file of another build when none of its ids is known), a request answered twice, and
a reply from another model than the request asked for (a dated snapshot of it is the same model).
``DIR/batch.json`` records the build the folder belongs to and the rounds written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from rap_benchmark.core.errors import FileFormatError, InputError, StoppedEarly
from rap_benchmark.llmclient.endpoints import retryable_status

WAITING_EXIT = StoppedEarly.exit_status  # 75, sysexits' EX_TEMPFAIL: not done, rerun later
STATE_FILE = "batch.json"
INPUT_SUFFIX = ".input.jsonl"
URL = "/v1/chat/completions"
MAX_LINES = 50_000
MAX_BYTES = 190_000_000
_SNAPSHOT = re.compile(r"^-(?:\d{4}-?\d{2}-?\d{2}|\d{4}|latest|\d{3,})$")


class WaitingForReplies(Exception):
    """The build wrote (or is still waiting for) a round of batch requests: not an error, not
    done. The CLI prints the message and exits :data:`WAITING_EXIT`."""

    exit_code = WAITING_EXIT


class AwaitingReply(Exception):
    """A request of the current round has no reply yet: its unit waits for the next run."""


@dataclass(frozen=True)
class Failure:
    """A failed output line: where it is, its status (None: no HTTP status), why, and whether it
    is a refusal (no retry can help)."""

    where: str
    status: int | None
    message: str
    refused: bool


@dataclass
class BatchFolder:
    """What a batch folder holds: the requests written (key -> (input file, model)), the replies
    read back (key -> chat.completion body) and the failed lines."""

    root: Path
    fingerprint: str
    rounds: list[dict[str, Any]] = field(default_factory=list)
    requests: dict[str, tuple[str, str]] = field(default_factory=dict)
    replies: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, list[Failure]] = field(default_factory=dict)

    # -- reading -------------------------------------------------------------------------------
    @classmethod
    def open(cls, root: str | Path, fingerprint: str) -> BatchFolder:
        """Read ``root`` (which need not exist yet): its state, every input file and every output
        file. Raises InputError or FileFormatError on anything it cannot trust, storing nothing."""
        folder = cls(Path(root), fingerprint)
        state_path = folder.root / STATE_FILE
        if state_path.is_file():
            try:
                state = orjson.loads(state_path.read_bytes())
                theirs, folder.rounds = state["fingerprint"], list(state["rounds"])
            except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
                raise FileFormatError(state_path, f"not this package's batch state ({exc})") from None
            if theirs != fingerprint:
                raise InputError(
                    f"{folder.root} holds the batch files of another build (other corpus, spec, models or "
                    "construction): give this build its own --batch folder"
                )
        if folder.root.is_dir():
            for path in sorted(folder.root.glob(f"*{INPUT_SUFFIX}")):
                folder._read_input(path)
            for path in sorted(folder.root.glob("*.jsonl")):
                if not path.name.endswith(INPUT_SUFFIX):
                    folder._read_output(path)
        return folder

    def _read_input(self, path: Path) -> None:
        for n, obj in _json_lines(path):
            try:
                key, model = obj["custom_id"], obj["body"]["model"]
            except (KeyError, TypeError):
                raise FileFormatError(path, "not a batch input line (custom_id, body.model)", line=n) from None
            self.requests.setdefault(key, (path.name, model))

    def _read_output(self, path: Path) -> None:
        lines = list(_json_lines(path))
        ids = [(n, _custom_id(path, n, obj)) for n, obj in lines]
        unknown = [(n, key) for n, key in ids if key not in self.requests]
        if lines and len(unknown) == len(lines):
            raise InputError(
                f"{path} is the output of another build: none of its {len(lines)} custom_ids is a request "
                f"written to {self.root} (move it away)"
            )
        if unknown:
            n, key = unknown[0]
            raise FileFormatError(path, f"custom_id {key!r} is no request written to {self.root}", line=n)
        for n, obj in lines:
            key = obj["custom_id"]
            where = f"{path.name}:{n}"
            body, failure = _outcome(path, n, obj)
            if failure is not None:
                self.failures.setdefault(key, []).append(failure)
                continue
            asked = self.requests[key][1]
            got = str(body.get("model") or "")
            if not same_model(asked, got):
                raise FileFormatError(
                    path,
                    f"the reply comes from model {got!r}, but the request asked for {asked!r} "
                    "(the output of a run with another model?)",
                    line=n,
                )
            if key in self.replies:
                raise FileFormatError(
                    path, f"custom_id {key} is answered twice (also in {self.replies[key]['_where']})", line=n
                )
            self.replies[key] = {**body, "_where": where}

    # -- writing a round -----------------------------------------------------------------------
    def outstanding(self, keys: list[str]) -> list[str]:
        """Of ``keys`` (requests still without a reply), those written in an input file and in no
        output line yet (neither a reply nor a failure): the provider is still on them."""
        return [k for k in keys if k in self.requests and k not in self.failures and k not in self.replies]

    def write_round(self, pending: dict[str, tuple[str, bytes]]) -> list[Path]:
        """Write ``pending`` (key -> (model, canonical body)) as the next round's input file(s)
        and record the round; the paths written."""
        from rap_benchmark.core.fsio import atomic_write_bytes

        self.root.mkdir(parents=True, exist_ok=True)
        number = len(self.rounds) + 1
        chunks: list[list[bytes]] = [[]]
        size = 0
        for key, (_, body) in pending.items():
            line = b'{"custom_id":"%s","method":"POST","url":"%s","body":%s}\n' % (key.encode(), URL.encode(), body)
            if chunks[-1] and (len(chunks[-1]) >= MAX_LINES or size + len(line) > MAX_BYTES):
                chunks.append([])
                size = 0
            chunks[-1].append(line)
            size += len(line)
        names = (
            [f"round-{number:03d}{INPUT_SUFFIX}"]
            if len(chunks) == 1
            else [f"round-{number:03d}.part-{i + 1}{INPUT_SUFFIX}" for i in range(len(chunks))]
        )
        paths = []
        for name, chunk in zip(names, chunks, strict=True):
            atomic_write_bytes(self.root / name, b"".join(chunk))
            paths.append(self.root / name)
        for key, (model, _) in pending.items():
            self.requests[key] = (names[0], model)
        self.rounds.append({"round": number, "files": names, "requests": len(pending)})
        state = {"fingerprint": self.fingerprint, "rounds": self.rounds}
        atomic_write_bytes(self.root / STATE_FILE, orjson.dumps(state, option=orjson.OPT_INDENT_2))
        return paths


def same_model(asked: str, got: str) -> bool:
    """Whether a reply from model ``got`` answers a request for ``asked``: the same name, or a
    dated snapshot of it (OpenAI's ``gpt-4o-2024-08-06`` for ``gpt-4o``, Anthropic's
    ``claude-...-20250929``)."""
    return got == asked or (got.startswith(asked) and _SNAPSHOT.match(got[len(asked) :]) is not None)


def _json_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(line number, object) of every non-blank line; a line that is not a JSON object (a torn
    last line included) is a FileFormatError naming it."""
    data = path.read_bytes()
    out = []
    lines = data.split(b"\n")
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            last = n == len(lines) or (n == len(lines) - 1 and not lines[-1])
            why = (
                "the last line is cut short (a torn write or download): fetch or write the file again"
                if last
                else "not a JSON line"
            )
            raise FileFormatError(path, why, line=n) from None
        if not isinstance(obj, dict):
            raise FileFormatError(path, f"a JSON {type(obj).__name__}, not a batch line object", line=n)
        out.append((n, obj))
    return out


def _custom_id(path: Path, n: int, obj: dict[str, Any]) -> str:
    key = obj.get("custom_id")
    if not isinstance(key, str):
        raise FileFormatError(path, "no custom_id: not a batch output line", line=n)
    return key


def _outcome(path: Path, n: int, obj: dict[str, Any]) -> tuple[dict[str, Any], None] | tuple[None, Failure]:
    """(chat.completion body, None) for a reply, (None, failure) for a failed line, in any of the
    three formats of the module docstring."""
    where = f"{path.name}:{n}"
    if "result" in obj:
        return _anthropic(path, n, obj["result"])
    if "response" not in obj:
        raise FileFormatError(path, "neither an OpenAI/vLLM output line nor an Anthropic result", line=n)
    response, error = obj.get("response"), obj.get("error")
    status = response.get("status_code") if isinstance(response, dict) else None
    body = response.get("body") if isinstance(response, dict) else None
    if error is None and status == 200 and isinstance(body, dict) and isinstance(body.get("choices"), list):
        return body, None
    message = _error_text(error) or _error_text(body) or f"status {status}"
    refused = isinstance(status, int) and 400 <= status < 500 and not retryable_status(status)
    return None, Failure(where, status if isinstance(status, int) else None, message, refused)


def _error_text(error: Any) -> str | None:
    """The message of an error value: a string (vLLM), ``{code, message}`` (OpenAI) or a nested
    ``{"error": {...}}`` (vLLM's error object)."""
    if isinstance(error, str):
        return error
    if isinstance(error, dict):
        inner = error.get("error")
        if isinstance(inner, dict | str):
            return _error_text(inner)
        msg = error.get("message")
        code = error.get("code") or error.get("type")
        if msg is not None:
            return f"{code}: {msg}" if code else str(msg)
    return None


def _anthropic(path: Path, n: int, result: Any) -> tuple[dict[str, Any], None] | tuple[None, Failure]:
    where = f"{path.name}:{n}"
    kind = result.get("type") if isinstance(result, dict) else None
    if kind == "succeeded" and isinstance(result.get("message"), dict):
        return anthropic_as_chat(result["message"]), None
    if kind == "errored":
        error = result.get("error") or {}
        inner = error.get("error", error) if isinstance(error, dict) else {}
        etype = inner.get("type") if isinstance(inner, dict) else None
        text = _error_text(error) or "errored"
        return None, Failure(where, None, text, etype == "invalid_request_error")
    if kind in ("canceled", "expired"):
        return None, Failure(where, None, f"the request was {kind} before it ran", False)
    raise FileFormatError(path, f"an Anthropic result of unknown type {kind!r}", line=n)


def anthropic_as_chat(message: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic Messages reply as the chat.completion the HTTP transport reads: text blocks
    joined as the content, thinking blocks as ``reasoning_content``, ``max_tokens`` as
    ``finish_reason`` ``length``, input and output tokens as usage."""
    blocks = message.get("content") or []
    texts = [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
    text = "".join(texts) if texts else None  # no text block (cut while thinking): no content, as vLLM's null
    thinking = "\n".join(b.get("thinking", "") for b in blocks if isinstance(b, dict) and b.get("type") == "thinking")
    usage = message.get("usage") or {}
    prompt = sum(
        int(usage.get(k) or 0) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    )
    completion = int(usage.get("output_tokens") or 0)
    finish = "length" if message.get("stop_reason") == "max_tokens" else "stop"
    return {
        "id": str(message.get("id") or ""),
        "object": "chat.completion",
        "created": 0,
        "model": str(message.get("model") or ""),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "reasoning_content": thinking or None},
                "finish_reason": finish,
            }
        ],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
    }
