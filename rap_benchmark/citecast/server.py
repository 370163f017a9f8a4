"""The environment over HTTP (FastAPI). Tasks, bands and targets never leave the server.

    GET  /health                              {"ok": true, "n_tasks": ..., "n_sessions": ...}
    GET  /tasks?split=test                    {"tasks": [{"task_id": ...}, ...]}  (ids only)
    GET  /tools                               the tools' function-calling schemas
    POST /tasks/{task_id}/start               {"session_id", "task_id", "system", "prompt", "tools"}
    POST /sessions/{sid}/tools/{name}         body: the tool's JSON arguments
                                              -> {"observation", "done", "reward"}
    GET  /sessions/{sid}                      {"done", "n_calls", "prediction", "reward", ...}
    DELETE /sessions/{sid}                    forget a session

Errors: 404 unknown task/session, 409 the session already submitted (nothing changes), 422
invalid tool name or arguments (e.g. a negative or fractional prediction), 429 call limit.
Every route calls :class:`~rap_benchmark.citecast.env.CiteCastEnv`, which applies the cutoff on
every search and fetch; the cutoff is not a request parameter. Serve on loopback by default.
"""

from __future__ import annotations

from typing import Any

from rap_benchmark.citecast.env import CiteCastEnv, EnvError
from rap_benchmark.citecast.tools import ToolArgumentError, tool_schemas


def create_app(env: CiteCastEnv):  # -> fastapi.FastAPI
    from fastapi import Body, FastAPI, HTTPException
    from fastapi.responses import JSONResponse

    app = FastAPI(title="CiteCast environment", version="1.0.0")

    @app.exception_handler(EnvError)
    async def _env_error(_request, exc: EnvError):  # noqa: ANN001
        return JSONResponse(status_code=exc.status, content={"detail": str(exc), "error": type(exc).__name__})

    @app.exception_handler(ToolArgumentError)
    async def _arg_error(_request, exc: ToolArgumentError):  # noqa: ANN001
        return JSONResponse(status_code=422, content={"detail": str(exc), "error": "ToolArgumentError"})

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"ok": True, "n_tasks": len(env.tasks), "n_sessions": len(env)}

    @app.get("/tasks")
    def tasks(split: str | None = None) -> dict[str, Any]:
        if split not in (None, "train", "test"):
            raise HTTPException(422, f"split must be train or test, got {split!r}")
        return {"tasks": [{"task_id": t} for t in env.task_ids(split)]}

    @app.get("/tools")
    def tools() -> list[dict[str, Any]]:
        return tool_schemas()

    # Plain `def` routes run in the threadpool: BM25 search is CPU work and must not block the loop.
    @app.post("/tasks/{task_id}/start")
    def start(task_id: str) -> dict[str, Any]:
        return env.start(task_id).to_dict()

    @app.post("/sessions/{session_id}/tools/{name}")
    def call(session_id: str, name: str, arguments: Any = Body(default=None)) -> dict[str, Any]:  # noqa: B008
        return env.call(session_id, name, {} if arguments is None else arguments).to_dict()

    @app.get("/sessions/{session_id}")
    def state(session_id: str) -> dict[str, Any]:
        return env.state(session_id)

    @app.delete("/sessions/{session_id}")
    def close(session_id: str) -> dict[str, Any]:
        env.close(session_id)
        return {"closed": session_id}

    return app


def serve(env: CiteCastEnv, host: str = "127.0.0.1", port: int = 8765, log_level: str = "warning") -> None:
    """Run the app with uvicorn (blocking)."""
    import uvicorn

    env.warm()
    uvicorn.run(create_app(env), host=host, port=port, log_level=log_level)
