"""The environment over HTTP: the routes. Tasks, bands and targets never leave the server.

    GET  /health                              {"ok", "mode", "n_tasks", "pid"}
    GET  /tasks?split=test                    {"tasks": [{"task_id": ...}, ...]}  (ids only)
    GET  /tools                               the tools' function-calling schemas
    POST /tasks/{task_id}/start               {"session_id", "task_id", "system", "prompt", "tools"}
    POST /sessions/{sid}/tools/{name}         body: the tool's JSON arguments
                                              -> {"observation", "done", "reward"}
    GET  /sessions/{sid}                      {"done", "n_calls", "prediction", "reward", ...}
    DELETE /sessions/{sid}                    delete the session's state

Errors are JSON ``{"detail", "error"}``: 401 missing or unknown API key, 404 unknown task or
session, 405 method, 409 the session already submitted / the key's scored session on the task
exists, 413 body above ``max_body_bytes`` (not read), 422 invalid JSON, tool name or arguments,
429 call limit. API keys: ``Authorization: Bearer <secret>``; when the server has keys every route
but ``/health`` requires one (evaluation mode always has keys).

Every call goes to :class:`~rap_benchmark.citecast.env.CiteCastEnv` (which applies the cutoff).
No framework: a request costs a route match, a ``json.loads`` and an ``orjson`` encoding.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import orjson

from rap_benchmark.citecast.env import CiteCastEnv
from rap_benchmark.citecast.errors import EnvError, PayloadTooLarge, Unauthorized
from rap_benchmark.citecast.tools import ToolArgumentError, tool_schemas

MAX_BODY_BYTES = 64 * 1024  # a tool call's arguments: a query, a url or a justification, all capped far below


class HttpError(EnvError):
    """A refusal that is about the request itself (method, route, JSON) rather than the environment."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


def _response(status: int, payload: Any) -> tuple[int, bytes]:
    return status, orjson.dumps(payload)


class CiteCastApp:
    """The routes; :meth:`respond` (one request -> status and JSON bytes) is all a transport needs.
    ``api_keys`` maps secret -> key name (empty: no key required)."""

    def __init__(
        self, env: CiteCastEnv, api_keys: Mapping[str, str] | None = None, *, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self.env = env
        self.api_keys = dict(api_keys or {})
        self.max_body_bytes = max_body_bytes
        self._tools = orjson.dumps(tool_schemas())

    def respond(
        self, method: str, path: str, query: bytes, authorization: bytes | None, body: bytes
    ) -> tuple[int, bytes]:
        """One request (its body already read, within ``max_body_bytes``) -> status and JSON bytes."""
        try:
            return self._route(method, path, query, authorization, body)
        except (EnvError, ToolArgumentError) as exc:
            return error_response(exc)

    def too_large(self, size: int | None) -> tuple[int, bytes]:
        """The 413 answer to a body above the limit (``size`` when the request announced it)."""
        what = f"request body of {size:,} bytes" if size is not None else "request body"
        return error_response(PayloadTooLarge(f"{what} above the limit of {self.max_body_bytes:,} bytes"))

    def _key(self, authorization: bytes | None) -> str:
        if not self.api_keys:
            return ""
        if authorization is not None:
            scheme, _, secret = authorization.decode("latin-1").partition(" ")
            key = self.api_keys.get(secret.strip()) if scheme.lower() == "bearer" else None
            if key is not None:
                return key
        raise Unauthorized("a valid API key is required: send the header 'Authorization: Bearer <key>'")

    @staticmethod
    def _json(raw: bytes) -> Any:
        if not raw.strip():
            return {}
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as exc:  # also integers above Python's digit limit
            raise HttpError(422, f"the body is not valid JSON: {str(exc)[:200]}") from None

    def _route(
        self, method: str, path: str, query: bytes, authorization: bytes | None, body: bytes
    ) -> tuple[int, bytes]:
        env = self.env
        parts = path.strip("/").split("/")
        if parts == ["health"] and method == "GET":
            mode = env.mode.value if env.mode else "in-process"
            return _response(200, {"ok": True, "mode": mode, "n_tasks": len(env.task_ids()), "pid": os.getpid()})
        key = self._key(authorization)
        n = len(parts)
        if n == 4 and parts[0] == "sessions" and parts[2] == "tools":
            _method(method, "POST")
            return _response(200, env.call(parts[1], parts[3], self._json(body), key).to_dict())
        if n == 3 and parts[0] == "tasks" and parts[2] == "start":
            _method(method, "POST")
            return _response(200, env.start(parts[1], key).to_dict())
        if n == 2 and parts[0] == "sessions":
            if method == "GET":
                return _response(200, env.state(parts[1], key))
            _method(method, "DELETE")
            env.close(parts[1], key)
            return _response(200, {"closed": parts[1]})
        if parts == ["tasks"]:
            _method(method, "GET")
            split = _query_param(query, "split")
            if split not in (None, "train", "test"):
                raise HttpError(422, f"split must be train or test, got {split[:32]!r}")
            return _response(200, {"tasks": [{"task_id": t} for t in env.task_ids(split)]})
        if parts == ["tools"]:
            _method(method, "GET")
            return 200, self._tools
        raise HttpError(404, f"no route {method} {path[:100]!r}")


def error_response(exc: Exception) -> tuple[int, bytes]:
    status = exc.status if isinstance(exc, EnvError) else 422
    name = "ToolArgumentError" if isinstance(exc, ToolArgumentError) else type(exc).__name__
    return _response(status, {"detail": str(exc), "error": name})


def _method(method: str, allowed: str) -> None:
    if method != allowed:
        raise HttpError(405, f"method {method[:16]} not allowed here (use {allowed})")


def _query_param(query: bytes, name: str) -> str | None:
    from urllib.parse import parse_qs

    values = parse_qs(query.decode("latin-1")).get(name)
    return values[0] if values else None
