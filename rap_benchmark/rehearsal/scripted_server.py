"""A scripted OpenAI-compatible server for the LLM instrument (loopback, uvicorn, no model).

``POST /v1/chat/completions`` answers every prompt of the pipeline with a deterministic,
plausible, valid reply (:func:`rap_benchmark.pipeline.instrument.llm.standin.respond`) and
reports usage with the package's token counter; ``GET /v1/models`` lists the model. Faults,
drawn per delivery from a seeded generator (they change no answer, only whether one arrives):
``error_rate`` (HTTP 503), ``timeout_rate`` (the reply comes after ``hang_s`` seconds, past the
client's timeout), ``malformed_rate`` (a torn JSON body). ``invalid_rate`` replaces the answer
by one that fails validation, decided by the request's hash (so a retry, which quotes the
invalid reply, is a different request). ``log`` appends the key (sha256 of the body) of every
request answered, for resume audits.

Run: ``python -m rap_benchmark.rehearsal.scripted_server --port 0 --workers 2`` prints
``http://127.0.0.1:PORT/v1`` and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from rap_benchmark.pipeline.instrument.llm.standin import invalid_reply, respond
from rap_benchmark.pipeline.instrument.llm.tokens import count_prompt_tokens, count_tokens

Script = Callable[[list[dict[str, str]]], str]


@dataclass
class Faults:
    error_rate: float = 0.0
    timeout_rate: float = 0.0
    malformed_rate: float = 0.0
    invalid_rate: float = 0.0
    hang_s: float = 5.0
    seed: int = 0


class ScriptedApp:
    """The ASGI app (see the module docstring); ``script`` overrides the replies (tests)."""

    def __init__(self, faults: Faults | None = None, *, script: Script | None = None, log: str | None = None) -> None:
        self.faults = faults or Faults()
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

    def reply_for(self, body: bytes) -> tuple[int, bytes, bool]:
        """(status, body, hang) for one request body."""
        f = self.faults
        r = self._rng.random()
        if r < f.error_rate:
            return 503, b'{"error": {"message": "scripted: service unavailable"}}', False
        r -= f.error_rate
        hang = r < f.timeout_rate
        try:
            req = orjson.loads(body)
            messages = req["messages"]
            model = req["model"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            return 400, b'{"error": {"message": "scripted: bad request"}}', False
        key = hashlib.sha256(body).hexdigest()
        if self.script is not None:
            content = self.script(messages)
        elif int(key[:15], 16) / 16**15 < f.invalid_rate:
            content = invalid_reply(messages)
        else:
            content = respond(messages, typical=False)
        prompt = count_prompt_tokens(messages)
        completion = count_tokens(content)
        out = orjson.dumps(
            {
                "id": "chatcmpl-" + key[:24],
                "object": "chat.completion",
                "created": 0,
                "model": model,
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {
                    "prompt_tokens": prompt,
                    "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                },
            }
        )
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
            status, data, hang = 200, b'{"object": "list", "data": [{"id": "scripted", "object": "model"}]}', False
        elif scope["method"] == "POST" and path.endswith("/chat/completions"):
            status, data, hang = self.reply_for(b"".join(chunks))
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
    p.add_argument("--error-rate", type=float, default=0.0)
    p.add_argument("--timeout-rate", type=float, default=0.0)
    p.add_argument("--malformed-rate", type=float, default=0.0)
    p.add_argument("--invalid-rate", type=float, default=0.0)
    p.add_argument("--hang-s", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log", help="append the key of every answered request to this file")
    args = p.parse_args(argv)
    sock = bind(args.port)
    children = []
    for w in range(args.workers):
        faults = Faults(
            args.error_rate, args.timeout_rate, args.malformed_rate, args.invalid_rate, args.hang_s, args.seed + w
        )
        if w == args.workers - 1:
            break
        pid = os.fork()
        if pid == 0:
            _die_with_parent()
            _server(ScriptedApp(faults, log=args.log)).run(sockets=[sock])
            os._exit(0)
        children.append(pid)

    def stop(*_: Any) -> None:
        for pid in children:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)  # until uvicorn installs its own (and after it restores this one)
    print(f"http://127.0.0.1:{sock.getsockname()[1]}/v1", flush=True)
    _server(ScriptedApp(faults, log=args.log)).run(sockets=[sock])  # returns on SIGTERM or SIGINT
    stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
