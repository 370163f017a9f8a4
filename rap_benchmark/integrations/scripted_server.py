"""A scripted OpenAI-compatible server: deterministic search calls, then an answer.

It stands in for a model server when the harness integrations are tested end to end (lm-eval's
``local-completions`` and ``local-chat-completions``, Inspect's ``openai-api`` provider): it
speaks ``/v1/chat/completions`` (native tool calls when ``tools`` are offered, the text tool
protocol otherwise) and ``/v1/completions``, and honours ``stop`` sequences as vLLM does (the
stop string is not returned). Every reply depends only on the conversation, so two runs over
the same episodes send the same answers.

Policy, per episode:

* RAP (a ``search`` tool, or a conversation that explains the ``<search>`` tag): ``n_searches``
  searches with keywords from the field's name, then the final JSON answer whose weights are
  hashed from the first user message (``{"D0": 7, ..., "D7": 31}``); when search is closed
  (``tool_choice="none"``, no ``</search>`` stop) it answers at once;
* CiteCast (a ``web_search`` tool, or the ``<web_search>`` tag): ``n_searches`` searches for the
  paper's title, then a submission of an integer hashed from the prompt.

``python -m rap_benchmark.integrations.scripted_server --port 8000`` serves it; tests use
:func:`serve` (a free loopback port, a background thread, stopped on exit).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request

from rap_benchmark.core.records import DIRECTION_KEYS

MODEL_ID = "scripted"
OBSERVATION = "<observation>\n"


@dataclass(frozen=True)
class Reply:
    """One scripted turn: text, or one tool call (name, arguments)."""

    text: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def rap_answer(first_user: str) -> str:
    """The final RAP answer of an episode: integer weights hashed from its first user message."""
    digest = _digest(first_user)
    return json.dumps({k: 1 + digest[i] % 40 for i, k in enumerate(DIRECTION_KEYS)})


def citecast_prediction(first_user: str) -> int:
    return int.from_bytes(_digest(first_user)[:2], "big") % 60


def _field_query(first_user: str) -> str:
    m = re.search(r"^Field: (.+)$", first_user, re.MULTILINE)
    words = re.findall(r"[A-Za-z]{4,}", m.group(1) if m else first_user)
    return " ".join(words[:3]).lower() or "methods"


def _title_query(first_user: str) -> str:
    m = re.search(r"^Title: (.+)$", first_user, re.MULTILINE)
    return (m.group(1) if m else first_user[:80]).strip()


def decide(
    first_user: str, transcript: str, n_results: int, tools: set[str], search_open: bool, n_searches: int
) -> Reply:
    """The scripted turn for a conversation state.

    ``transcript`` is the whole conversation as text (the protocol's tags show which benchmark it
    is), ``n_results`` the number of tool results so far, ``tools`` the native tools on offer
    (empty for the text protocol) and ``search_open`` whether a search may still be made.
    """
    citecast = "web_search" in tools or "<web_search>" in transcript
    if citecast:
        if search_open and n_results < n_searches:
            query = _title_query(first_user)
            if "web_search" in tools:
                return Reply(tool="web_search", arguments={"query": query})
            return Reply(text=f"Searching. <web_search>{query}</web_search>")
        value = citecast_prediction(first_user)
        if "submit_prediction" in tools:
            return Reply(tool="submit_prediction", arguments={"prediction": value, "justification": "scripted"})
        return Reply(text=f"Scripted forecast. <submit>{value}</submit>")
    if search_open and n_results < n_searches:
        query = _field_query(first_user) + (f" {n_results}" if n_results else "")
        if "search" in tools:
            return Reply(tool="search", arguments={"query": query})
        if "<search>" in transcript:
            return Reply(text=f"<search>{query}</search>")
    return Reply(text=rap_answer(first_user))


def apply_stop(text: str, stop: Any) -> tuple[str, str]:
    """``text`` cut before the first stop sequence (not included, as vLLM does) and the finish reason."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text, "stop") if cut < 0 else (text[:cut], "stop")


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def chat_reply(body: dict[str, Any], n_searches: int) -> dict[str, Any]:
    messages = body.get("messages") or []
    texts = [_content_text(m.get("content")) for m in messages]
    first_user = next((t for m, t in zip(messages, texts, strict=True) if m.get("role") == "user"), "")
    transcript = "\n".join(texts)
    tools = {t["function"]["name"] for t in body.get("tools") or [] if t.get("type") == "function"}
    if tools:
        n_results = sum(1 for m in messages if m.get("role") == "tool")
        search_open = body.get("tool_choice", "auto") != "none"
    else:
        n_results = transcript.count(OBSERVATION)
        stops = body.get("stop") or []
        search_open = "</search>" in stops or "</web_search>" in stops
    reply = decide(
        first_user,
        transcript,
        n_results,
        tools if body.get("tool_choice") != "none" else set(),
        search_open,
        n_searches,
    )
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if reply.tool is not None:
        call_id = "call_" + _digest(transcript + reply.tool).hex()[:12]
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": reply.tool, "arguments": json.dumps(reply.arguments)},
            }
        ]
        finish = "tool_calls"
    else:
        message["content"], finish = apply_stop(reply.text or "", body.get("stop"))
    return _envelope("chat.completion", body, [{"index": 0, "message": message, "finish_reason": finish}])


def completion_reply(body: dict[str, Any], n_searches: int) -> dict[str, Any]:
    prompts = body.get("prompt")
    prompts = [prompts] if isinstance(prompts, str) else list(prompts or [])
    stops = body.get("stop") or []
    stops = [stops] if isinstance(stops, str) else stops
    choices = []
    for i, prompt in enumerate(prompts):
        m = re.search(r"User:\n(.*?)(?:\n\n(?:Assistant|User):\n|\Z)", prompt, re.DOTALL)
        first_user = m.group(1) if m else prompt
        search_open = "</search>" in stops or "</web_search>" in stops
        reply = decide(first_user, prompt, prompt.count(OBSERVATION), set(), search_open, n_searches)
        text, finish = apply_stop(reply.text or "", stops)
        choices.append({"index": i, "text": text, "finish_reason": finish, "logprobs": None})
    return _envelope("text_completion", body, choices)


def _envelope(kind: str, body: dict[str, Any], choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": "scripted-" + _digest(json.dumps(body, sort_keys=True, default=str)).hex()[:16],
        "object": kind,
        "created": 0,
        "model": body.get("model") or MODEL_ID,
        "choices": choices,
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def make_app(n_searches: int = 2) -> FastAPI:
    """The FastAPI app (``/v1/models``, ``/v1/chat/completions``, ``/v1/completions``)."""
    app = FastAPI(title="rap scripted model")

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "rap_benchmark"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> dict[str, Any]:
        return chat_reply(await request.json(), n_searches)

    @app.post("/v1/completions")
    async def completions(request: Request) -> dict[str, Any]:
        return completion_reply(await request.json(), n_searches)

    return app


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(n_searches: int = 2, port: int | None = None) -> Iterator[str]:
    """Serve the scripted model on loopback in a background thread; yields its ``/v1`` base URL."""
    import uvicorn

    port = port or free_port()
    config = uvicorn.Config(make_app(n_searches), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the scripted server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--searches", type=int, default=2, help="searches per episode before the answer")
    args = parser.parse_args(argv)
    uvicorn.run(make_app(args.searches), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
