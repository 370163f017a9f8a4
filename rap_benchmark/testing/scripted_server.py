"""The scripted OpenAI-compatible server (loopback, raw ASGI on uvicorn, no model).

One server for every test double of a model endpoint:

* **the LLM instrument**: a prompt that is one of the pipeline's tasks gets a deterministic, valid
  reply (:func:`rap_benchmark.pipeline.instrument.llm.standin.respond`) in the reply style of the
  server's ``mode`` (below), with usage counted by the package's token counter;
* **agents** (``rap run``, lm-eval's ``local-completions``/``local-chat-completions``, Inspect's
  ``openai-api``): ``n_searches`` searches (native tool calls when ``tools`` are offered, the text
  tool protocol otherwise), then an answer hashed from the first user message; CiteCast episodes
  search for the paper's title and submit an integer. ``/v1/completions`` too; ``stop``
  sequences are honoured as vLLM does (the stop string is not returned).

Reply styles (``mode``), imitating what a vLLM server sends for the instrument's prompts:

``plain``         bare JSON;
``chatty``        a reply-hash-chosen mix of ```` ```json ```` / ```` ```JSON ```` / one-line fences,
                  a preamble ("Here are the labels ...") and a trailing note;
``think``         Qwen3 with thinking on and no reasoning parser: ``<think>...</think>`` (about
                  ``THINK_TOKENS`` tokens) before the answer, all in ``content``, cut at
                  ``max_tokens`` with ``finish_reason: length``;
``think-parser``  the same behind vLLM's reasoning parser: the reasoning in
                  ``reasoning_content``, ``content`` the answer (None when cut while reasoning);
``truncated``     every reply cut at ``max_tokens``: a model that never stops reasoning;
``renamed-keys``  a first reply renames one key (``id`` -> ``arxiv_id``, ``name`` -> ``title``...);
                  a retry is answered correctly only when it names the wrong key;
``refuse``        HTTP 400 with vLLM's context-length message, for every chat request.

In ``think`` modes a request with ``chat_template_kwargs: {"enable_thinking": false}`` is answered
without reasoning, as Qwen3's chat template does.

Faults, drawn per delivery from a seeded generator (they change whether an answer arrives, not
which): ``error_rate`` (HTTP 503), ``timeout_rate`` (the reply comes after ``hang_s`` seconds),
``malformed_rate`` (a torn JSON body). ``invalid_rate`` replaces an instrument answer by an
invalid one, decided by the request's hash (a retry quotes the reply, so it is another request).
``log`` appends the key of every request answered (the sha256 of its body as canonical JSON: compact,
sorted keys, the instrument's store key), for resume audits; reply styles are chosen by it too, so
a request is answered alike over HTTP and in a batch file.

Run: ``python -m rap_benchmark.testing.scripted_server --port 0 --workers 2 [--mode think]``
prints ``http://127.0.0.1:PORT/v1`` and serves until SIGTERM; tests use :class:`ServerThread`
or :func:`serve`. It needs uvicorn: ``pip install 'rap_benchmark[serve]'`` (or the ``test`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any

import orjson

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.pipeline.instrument.llm.prompts import task_of
from rap_benchmark.pipeline.instrument.llm.standin import invalid_reply, respond
from rap_benchmark.pipeline.instrument.llm.tokens import _PIECE, count_prompt_tokens, count_tokens

MODEL_ID = "scripted"
OBSERVATION = "<observation>\n"
MODES = ("plain", "chatty", "think", "think-parser", "truncated", "renamed-keys", "refuse")
THINK_TOKENS = 260  # reasoning before every answer in the think modes: over the smallest budgets
REFUSAL = (
    "This model's maximum context length is 4096 tokens. However, you requested 4221 tokens "
    "(3821 in the messages, 400 in the completion). Please reduce the length of the messages or completion."
)
Script = Callable[[list[dict[str, str]]], str]
BAD_REQUEST = b'{"error": {"message": "scripted: bad request"}}'


# -- agents: searches, then an answer -------------------------------------------------------------


@dataclass(frozen=True)
class Turn:
    """One scripted agent turn: text, or one tool call (name, arguments)."""

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
) -> Turn:
    """The scripted agent turn for a conversation state.

    ``transcript`` is the whole conversation as text (the protocol's tags show which benchmark it
    is), ``n_results`` the number of tool results so far, ``tools`` the native tools on offer
    (empty for the text protocol) and ``search_open`` whether a search may still be made.
    """
    citecast = "web_search" in tools or "<web_search>" in transcript
    if citecast:
        if search_open and n_results < n_searches:
            query = _title_query(first_user)
            if "web_search" in tools:
                return Turn(tool="web_search", arguments={"query": query})
            return Turn(text=f"Searching. <web_search>{query}</web_search>")
        value = citecast_prediction(first_user)
        if "submit_prediction" in tools:
            return Turn(tool="submit_prediction", arguments={"prediction": value, "justification": "scripted"})
        return Turn(text=f"Scripted forecast. <submit>{value}</submit>")
    if search_open and n_results < n_searches:
        query = _field_query(first_user) + (f" {n_results}" if n_results else "")
        if "search" in tools:
            return Turn(tool="search", arguments={"query": query})
        if "<search>" in transcript:
            return Turn(text=f"<search>{query}</search>")
    return Turn(text=rap_answer(first_user))


def apply_stop(text: str, stop: Any) -> tuple[str, str]:
    """``text`` cut before the first stop sequence (not included, as vLLM does) and the finish reason."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=len(text))
    return text[:cut], "stop"


def _content_text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def agent_chat_reply(body: dict[str, Any], n_searches: int) -> dict[str, Any]:
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
    offered = tools if body.get("tool_choice") != "none" else set()
    turn = decide(first_user, transcript, n_results, offered, search_open, n_searches)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if turn.tool is not None:
        call_id = "call_" + _digest(transcript + turn.tool).hex()[:12]
        function = {"name": turn.tool, "arguments": json.dumps(turn.arguments)}
        message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
        finish = "tool_calls"
    else:
        message["content"], finish = apply_stop(turn.text or "", body.get("stop"))
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
        turn = decide(first_user, prompt, prompt.count(OBSERVATION), set(), search_open, n_searches)
        text, finish = apply_stop(turn.text or "", stops)
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


# -- the LLM instrument: reply styles -------------------------------------------------------------

_RENAMES = (("labels", "id", "arxiv_id"), ("papers", "id", "paper_id"), ("programs", "name", "title"))


def _styled(answer: str, key: str) -> str:
    """``answer`` as a chatty model writes it (the style chosen by the request's hash)."""
    h = int(key[:8], 16)
    return [
        f"```json\n{answer}\n```",
        f"```JSON\n{answer}\n```",
        f"```json {answer}```",
        f"Here are the labels for the papers, following the requested format:\n\n```json\n{answer}\n```",
        f"{answer}\n\nNote: a few papers sit between two directions; I chose the closer one.",
        f"Both candidates describe the same research area (see the titles), so:\n{answer}\nLet me know if needed.",
    ][h % 6]


def _renamed(answer: str, messages: list[dict[str, str]]) -> str:
    """A first reply with one key renamed; a retry fixes it only when told which key is wrong."""
    obj = orjson.loads(answer)
    told = len(messages) > 1 and "unexpected key" in messages[-1]["content"]
    if told:
        return answer
    for outer, key, wrong in _RENAMES:
        items = obj.get(outer)
        if isinstance(items, list) and items and all(isinstance(i, dict) and key in i for i in items):
            obj[outer] = [{(wrong if k == key else k): v for k, v in i.items()} for i in items]
            return orjson.dumps(obj).decode()
    if "name" in obj and "definition" in obj:  # field naming
        obj = {"field_name" if k == "name" else k: v for k, v in obj.items()}
    return orjson.dumps(obj).decode()


def _reasoning(key: str, n_tokens: int) -> str:
    words = "Okay, let me look at the papers one by one and check which direction fits each best".split()
    h = int(key[:8], 16)
    return " ".join(words[(h + i) % len(words)] for i in range(n_tokens))


def _cut(text: str, n_tokens: int) -> str:
    """The first ``n_tokens`` tokens of ``text`` (the package's token counter)."""
    pieces = _PIECE.findall(text)
    return "".join(pieces[: max(0, n_tokens)])


def _thinks(req: dict[str, Any]) -> bool:
    kwargs = req.get("chat_template_kwargs") or {}
    return kwargs.get("enable_thinking", True) is not False


def instrument_message(mode: str, req: dict[str, Any], answer: str, key: str) -> tuple[dict[str, Any], str, int]:
    """(message, finish_reason, completion tokens) of an instrument reply in ``mode``."""
    budget = int(req.get("max_tokens") or 1 << 30)
    messages = req["messages"]
    reasoning = None
    content = answer
    if mode == "chatty":
        content = _styled(answer, key)
    elif mode == "renamed-keys":
        content = _renamed(answer, messages)
    elif mode in ("think", "think-parser") and _thinks(req):
        reasoning = _reasoning(key, THINK_TOKENS)
    elif mode == "truncated":
        reasoning = _reasoning(key, budget + 1)  # never stops reasoning
    if reasoning is not None and mode != "think-parser":
        content, reasoning = f"<think>\n{reasoning}\n</think>\n\n{content}", None
    used = count_tokens(reasoning or "") + count_tokens(content)
    if used <= budget:
        return {"role": "assistant", "content": content, "reasoning_content": reasoning}, "stop", used
    if reasoning is not None and count_tokens(reasoning) >= budget:  # cut while reasoning
        return {"role": "assistant", "content": None, "reasoning_content": _cut(reasoning, budget)}, "length", budget
    left = budget - count_tokens(reasoning or "")
    message = {"role": "assistant", "content": _cut(content, left), "reasoning_content": reasoning}
    return message, "length", budget


@dataclass
class Faults:
    error_rate: float = 0.0
    timeout_rate: float = 0.0
    malformed_rate: float = 0.0
    invalid_rate: float = 0.0
    hang_s: float = 5.0
    seed: int = 0


class ScriptedApp:
    """The ASGI app (see the module docstring); ``script`` overrides the instrument's answers."""

    def __init__(
        self,
        faults: Faults | None = None,
        *,
        mode: str = "plain",
        n_searches: int = 2,
        script: Script | None = None,
        log: str | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r} (one of: {', '.join(MODES)})")
        self.faults = faults or Faults()
        self.mode = mode
        self.n_searches = n_searches
        self.script = script
        self.log_path = log
        self._log: Any = None
        self._rng = random.Random(self.faults.seed)
        self.answered = 0

    def _write_log(self, key: str) -> None:
        if self.log_path is None:
            return
        if self._log is None:
            self._log = open(self.log_path, "a", buffering=1, encoding="ascii")  # noqa: SIM115 - lives with the app
        self._log.write(key + "\n")

    def _instrument_reply(self, req: dict[str, Any], key: str) -> tuple[int, dict[str, Any]]:
        messages = req["messages"]
        if self.mode == "refuse":
            return 400, {"object": "error", "message": REFUSAL, "type": "BadRequestError", "code": 400}
        if self.script is not None:
            answer = self.script(messages)
        elif int(key[:15], 16) / 16**15 < self.faults.invalid_rate:
            answer = invalid_reply(messages)
        else:
            answer = respond(messages, typical=False)
        if self.script is None or self.mode != "plain":
            message, finish, completion = instrument_message(self.mode, req, answer, key)
        else:
            message, finish, completion = {"role": "assistant", "content": answer}, "stop", count_tokens(answer)
        prompt = count_prompt_tokens(messages)
        return 200, {
            "id": "chatcmpl-" + key[:24],
            "object": "chat.completion",
            "created": 0,
            "model": req["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        }

    def reply_for(self, body: bytes, path: str = "/v1/chat/completions") -> tuple[int, bytes, bool]:
        """(status, body, hang) for one request body."""
        f = self.faults
        r = self._rng.random()
        if r < f.error_rate:
            return 503, b'{"error": {"message": "scripted: service unavailable"}}', False
        r -= f.error_rate
        hang = r < f.timeout_rate
        try:
            req = orjson.loads(body)
            if not isinstance(req, dict):
                raise TypeError
        except (orjson.JSONDecodeError, TypeError):
            return 400, BAD_REQUEST, False
        key = hashlib.sha256(orjson.dumps(req, option=orjson.OPT_SORT_KEYS)).hexdigest()  # the client's store key
        if path.endswith("/completions") and not path.endswith("/chat/completions"):
            status, obj = 200, completion_reply(req, self.n_searches)
        else:
            messages = req.get("messages")
            if not isinstance(messages, list) or not messages or "model" not in req:
                return 400, BAD_REQUEST, False
            first = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), {})
            if task_of(_content_text(first.get("content"))) is not None:
                status, obj = self._instrument_reply(req, key)
            else:
                status, obj = 200, agent_chat_reply(req, self.n_searches)
        out = orjson.dumps(obj)
        if status != 200:
            return status, out, False
        if not hang and r - f.timeout_rate < f.malformed_rate:
            return 200, out[: len(out) // 2], False
        if not hang:
            self.answered += 1
            self._write_log(key)
        return 200, out, hang

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        path = scope["path"]
        if scope["method"] == "GET" and path.endswith("/models"):
            data = b'{"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "rap_benchmark"}]}'
            status, hang = 200, False
        elif scope["method"] == "POST" and path.endswith("/completions"):
            status, data, hang = self.reply_for(b"".join(chunks), path)
        else:
            status, data, hang = 404, b'{"error": {"message": "not found"}}', False
        if hang:
            await asyncio.sleep(self.faults.hang_s)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": data})


def bind(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _server(app: ScriptedApp, keep_alive_s: float = 5.0) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app,
        lifespan="off",
        log_level="warning",
        access_log=False,
        backlog=2048,
        timeout_graceful_shutdown=1,
        timeout_keep_alive=keep_alive_s,
    )
    return uvicorn.Server(config)


class ServerThread:
    """The app served on a free loopback port in a background thread (tests): ``with`` it."""

    def __init__(self, app: ScriptedApp, *, keep_alive_s: float = 5.0) -> None:
        self.app = app
        self.sock = bind(0)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.server = _server(app, keep_alive_s)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> ServerThread:
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the scripted server did not start")
            threading.Event().wait(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@contextlib.contextmanager
def serve(n_searches: int = 2, **kwargs: Any) -> Iterator[str]:
    """Serve a :class:`ScriptedApp` on loopback in a background thread; yields its ``/v1`` URL."""
    with ServerThread(ScriptedApp(n_searches=n_searches, **kwargs)) as srv:
        yield srv.url


def _die_with_parent() -> None:
    """Linux: SIGTERM this process when its parent dies (a killed benchmark leaves no server)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--workers", type=int, default=1, help="server processes sharing the port")
    p.add_argument("--mode", choices=MODES, default="plain", help="reply style of the instrument's answers")
    p.add_argument("--searches", type=int, default=2, help="agent searches per episode before the answer")
    for f in fields(Faults):  # --error-rate ... --seed
        p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
    p.add_argument("--log", help="append the key of every answered request to this file")
    args = p.parse_args(argv)
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        print("scripted_server: needs uvicorn: pip install 'rap_benchmark[serve]'", file=sys.stderr)
        return 2
    try:
        sock = bind(args.port)
    except OSError as exc:  # most often the port is taken: say so in one line, never serve nothing quietly
        print(
            f"scripted_server: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}"
            " (another server on that port? --port 0 picks a free one)",
            file=sys.stderr,
        )
        return 2
    children = []

    def app(w: int) -> ScriptedApp:
        faults = Faults(**{f.name: getattr(args, f.name) for f in fields(Faults)})
        faults.seed += w
        return ScriptedApp(faults, mode=args.mode, n_searches=args.searches, log=args.log)

    for w in range(args.workers - 1):
        pid = os.fork()
        if pid == 0:
            _die_with_parent()
            _server(app(w)).run(sockets=[sock])
            os._exit(0)
        children.append(pid)

    def stop(*_: Any) -> None:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)  # until uvicorn installs its own (and after it restores this one)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    _server(app(args.workers - 1)).run(sockets=[sock])  # returns on SIGTERM or SIGINT
    stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
