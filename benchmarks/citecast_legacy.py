"""The CiteCast server as it was before issue 15 (commit 1151504), frozen as the load benchmark's peer.

One process: a FastAPI app whose sync routes run in uvicorn's thread pool, sessions in a dict of
the process (with every tool call's observation kept in memory), the tool arguments checked by
resolving the tool's type hints on every call, and snippets cut from each hit's whole text with a
regular expression compiled per query. It is kept here only so that
``benchmarks/citecast_load.py`` measures the old single-process layout side by side with the
new one on the same machine in the same run; nothing in the package imports it.

    python benchmarks/citecast_legacy.py INSTANCE_DIR PORT
"""

from __future__ import annotations

import inspect
import re
import secrets
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rap_benchmark.citecast.prompt import SYSTEM_PROMPT, render_prompt  # noqa: E402
from rap_benchmark.citecast.reward import reward as reward_fn  # noqa: E402
from rap_benchmark.citecast.reward import validate_prediction  # noqa: E402
from rap_benchmark.citecast.tools import NOT_FOUND, SessionTools, ToolArgumentError, tool_schemas  # noqa: E402
from rap_benchmark.core.text import query_terms  # noqa: E402

_SPACE = re.compile(r"\s+")
TOOL_NAMES = ("web_search", "web_fetch", "submit_prediction")


def old_snippet(text: str, query: str, width: int = 280) -> str:
    flat = _SPACE.sub(" ", text).strip()
    terms = query_terms(query)
    best = None
    if terms:
        m = re.search(r"\b(?:" + "|".join(map(re.escape, terms)) + r")\b", flat, re.I)
        best = m.start() if m else None
    start = 0 if best is None else max(0, best - width // 4)
    if start > 0:
        space = flat.find(" ", start, best)
        start = space + 1 if space >= 0 else start
    piece = flat[start : start + width]
    return ("..." if start > 0 else "") + piece + ("..." if start + width < len(flat) else "")


def old_check_arguments(name: str, arguments: Any) -> dict[str, Any]:
    if name not in TOOL_NAMES:
        raise ToolArgumentError(f"unknown tool {name!r}")
    if not isinstance(arguments, dict):
        raise ToolArgumentError(f"{name}: arguments must be a JSON object")
    fn = getattr(SessionTools, name)
    hints = get_type_hints(fn)
    params = list(inspect.signature(fn).parameters)[1:]
    if set(arguments) != set(params):
        raise ToolArgumentError(f"{name}: expected arguments {', '.join(params)}")
    out = {}
    for p in params:
        if hints[p] is int:
            try:
                out[p] = validate_prediction(arguments[p])
            except ValueError as exc:
                raise ToolArgumentError(f"{name}: {exc}") from exc
        else:
            if not isinstance(arguments[p], str):
                raise ToolArgumentError(f"{name}: {p} must be a string")
            out[p] = arguments[p]
    return out


@dataclass
class Session:
    session_id: str
    task: Any
    calls: list[tuple[str, dict, Any]] = field(default_factory=list)
    prediction: int | None = None
    reward: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


class LegacyEnv:
    def __init__(self, instance_dir: Path) -> None:
        from rap_benchmark.citecast.instance import load_instance

        inst = load_instance(instance_dir)
        self.tasks = inst.tasks
        self.view = inst.corpus.view(inst.cutoff)  # in-memory view and BM25 index, built in this process
        self.view.build_index()
        self.by_key = dict(zip(self.view.keys, self.view.documents, strict=True))
        self.sessions: dict[str, Session] = {}
        self.lock = threading.Lock()

    def start(self, task_id: str) -> dict[str, Any]:
        task = self.tasks[task_id]
        s = Session(secrets.token_hex(16), task)
        with self.lock:
            self.sessions[s.session_id] = s
        return {
            "session_id": s.session_id,
            "task_id": task_id,
            "system": SYSTEM_PROMPT,
            "prompt": render_prompt(task.paper),
            "tools": tool_schemas(),
        }

    def hits(self, query: str) -> list[Any]:
        """The top 8 documents of the in-memory view by BM25 (ties by url order)."""
        if not query_terms(query):
            return []
        return [self.by_key[key] for key in self.view.bm25_index().search(query, k=8).ids]

    def call(self, sid: str, name: str, arguments: Any) -> tuple[int, dict[str, Any]]:
        with self.lock:
            s = self.sessions[sid]
        with s.lock:
            if s.reward is not None:
                return 409, {"detail": "finished", "error": "SessionClosed"}
            n_web = sum(1 for c in s.calls if c[0] != "submit_prediction")
            if name != "submit_prediction" and n_web >= 100:
                return 429, {"detail": "limit", "error": "CallLimit"}
            try:
                args = old_check_arguments(name, arguments)
            except ToolArgumentError as exc:
                s.calls.append((name, {}, str(exc)))
                return 422, {"detail": str(exc), "error": "ToolArgumentError"}
            if name == "web_search":
                obs: Any = [
                    {"title": d.title or d.url, "url": d.url, "snippet": old_snippet(d.text, args["query"])}
                    for d in self.hits(args["query"][:500])
                ]
            elif name == "web_fetch":
                doc = self.view.fetch(args["url"])
                if doc is None:
                    obs = {"url": args["url"], "crawl_date": None, "text": "", "error": NOT_FOUND}
                else:
                    text = doc.text if not doc.title else f"{doc.title}\n\n{doc.text}"
                    obs = {"url": doc.url, "crawl_date": doc.crawl_date.isoformat(), "text": text[:24_000]}
            else:
                s.prediction = args["prediction"]
                s.reward = reward_fn(args["prediction"], s.task.target)
                obs = {"accepted": True, "prediction": s.prediction, "reward": s.reward}
            s.calls.append((name, args, obs))
            return 200, {"observation": obs, "done": s.reward is not None, "reward": s.reward}

    def state(self, sid: str) -> dict[str, Any]:
        with self.lock:
            s = self.sessions[sid]
        with s.lock:
            return {
                "session_id": sid,
                "task_id": s.task.task_id,
                "done": s.reward is not None,
                "n_calls": len(s.calls),
                "prediction": s.prediction,
                "reward": s.reward,
            }


def create_app(env: LegacyEnv):
    from fastapi import Body, FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"ok": True}

    @app.post("/tasks/{task_id}/start")
    def start(task_id: str) -> dict[str, Any]:
        return env.start(task_id)

    @app.post("/sessions/{sid}/tools/{name}")
    def call(sid: str, name: str, arguments: Any = Body(default=None)):  # noqa: ANN202, B008
        status, payload = env.call(sid, name, {} if arguments is None else arguments)
        return payload if status == 200 else JSONResponse(status_code=status, content=payload)

    @app.get("/sessions/{sid}")
    def state(sid: str) -> dict[str, Any]:
        return env.state(sid)

    return app


def main() -> None:
    import uvicorn

    instance_dir, port = Path(sys.argv[1]), int(sys.argv[2])
    uvicorn.run(create_app(LegacyEnv(instance_dir)), host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
