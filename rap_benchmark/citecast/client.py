"""Clients of the environment with one interface, in process and over HTTP; both raise the same
exceptions, so an agent loop written against one runs unchanged against the other.
"""

from __future__ import annotations

from typing import Any, Protocol

from rap_benchmark.citecast import errors
from rap_benchmark.citecast.env import CiteCastEnv
from rap_benchmark.citecast.errors import EnvError
from rap_benchmark.citecast.tools import ToolArgumentError

_ERRORS: dict[str, type[Exception]] = {
    **{c.__name__: c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, EnvError)},
    "ToolArgumentError": ToolArgumentError,
}


class EnvClient(Protocol):
    def task_ids(self, split: str | None = None) -> list[str]: ...
    def start(self, task_id: str) -> dict[str, Any]: ...
    def call(self, session_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]: ...
    def state(self, session_id: str) -> dict[str, Any]: ...
    def close(self, session_id: str) -> None: ...


class InProcessClient:
    """Calls :class:`CiteCastEnv` directly (for the runner, lm-eval and tests); ``key`` is the API
    key name the sessions belong to (what the server resolves a secret to)."""

    def __init__(self, env: CiteCastEnv, key: str = "") -> None:
        self.env = env
        self.key = key

    def task_ids(self, split: str | None = None) -> list[str]:
        return self.env.task_ids(split)

    def start(self, task_id: str) -> dict[str, Any]:
        return self.env.start(task_id, self.key).to_dict()

    def call(self, session_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.env.call(session_id, name, arguments, self.key).to_dict()

    def state(self, session_id: str) -> dict[str, Any]:
        return self.env.state(session_id, self.key)

    def close(self, session_id: str) -> None:
        self.env.close(session_id, self.key)


class HttpClient:
    """Talks to ``rap citecast serve`` over HTTP (httpx)."""

    def __init__(self, base_url: str, timeout_s: float = 60.0, http: Any = None, api_key: str | None = None) -> None:
        """``http``: an httpx.Client-like object to use instead; ``api_key``: the Bearer secret."""
        import httpx

        self._http = http if http is not None else httpx.Client(base_url=base_url.rstrip("/"), timeout=timeout_s)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _do(self, method: str, path: str, **kw: Any) -> Any:
        resp = self._http.request(method, path, headers=self._headers, **kw)
        if resp.status_code >= 400:
            try:
                body = resp.json()
            except ValueError:
                body = None
            if not isinstance(body, dict):  # not JSON, or JSON that is not the server's error object
                body = {"detail": resp.text}
            exc_type = _ERRORS.get(body.get("error", ""), EnvError)
            raise exc_type(body.get("detail", f"HTTP {resp.status_code}"))
        return resp.json()

    def task_ids(self, split: str | None = None) -> list[str]:
        params = {"split": split} if split else {}
        return [t["task_id"] for t in self._do("GET", "/tasks", params=params)["tasks"]]

    def start(self, task_id: str) -> dict[str, Any]:
        return self._do("POST", f"/tasks/{task_id}/start")

    def call(self, session_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._do("POST", f"/sessions/{session_id}/tools/{name}", json=arguments)

    def state(self, session_id: str) -> dict[str, Any]:
        return self._do("GET", f"/sessions/{session_id}")

    def close(self, session_id: str) -> None:
        self._do("DELETE", f"/sessions/{session_id}")

    def __enter__(self) -> HttpClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()
