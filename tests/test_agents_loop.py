"""The episode loop and the OpenAI-compatible backend against a scripted client and a real HTTP
server: tool calls, malformed arguments, plain text, over-length answers, HTTP 500, timeouts and
the Search cap. Every case must end as a recorded valid or invalid unit."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import socket
import threading
import time
from typing import Any

import httpx
import openai
import pytest
from fake_openai import FakeOpenAIClient, completion
from fastapi import Request

from rap_benchmark.agents.backends import OpenAIBackend
from rap_benchmark.agents.runner import native_units, predictions_frame, run_units
from rap_benchmark.agents.store import RunStore, UnitKey
from rap_benchmark.core.records import DIRECTION_KEYS, Codebook, Condition, Direction, Regime
from rap_benchmark.core.spec import mini_spec

SPEC = mini_spec()
ANSWER = json.dumps(dict(zip(DIRECTION_KEYS, [30, 20, 10, 10, 10, 10, 5, 5], strict=True)))
WEIGHTS = [0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05]


def tiny_codebook(field_id: str = "fX") -> Codebook:
    words = ["graphs", "vision", "speech", "robots", "proteins", "agents", "privacy", "compilers"]
    return Codebook(
        field_id=field_id,
        name="Test field",
        definition="A field used only in tests.",
        directions=tuple(
            Direction(k, w, f"Papers about {w}.", f"Include {w}.", f"Exclude non-{w}.", ())
            for k, w in zip(DIRECTION_KEYS, words, strict=True)
        ),
    )


def fake_search(query: str, start_date: str | None = None, end_date: str | None = None) -> dict:
    """Search the test corpus.

    Args:
        query: Keywords.
        start_date: Optional earliest date, YYYY-MM-DD.
        end_date: Optional latest date, YYYY-MM-DD.
    """
    if not query.strip():
        raise ValueError("query must be a non-empty string")  # like the real tool
    if start_date is not None:
        dt.date.fromisoformat(start_date)  # ValueError on a bad date, like the real tool
    n = len(query.split())
    results = [{"arxiv_id": f"2301.{i:05d}", "title": query, "date": "2023-06-01", "abstract": "x"} for i in range(n)]
    return {"total_hits": n, "results": results}


class FakeTools:
    def bind(self, field_id: str, origin: str, regime: Regime):
        from rap_benchmark.tools import tool_schema

        return fake_search, tool_schema(fake_search)


def n_tools(kwargs: dict[str, Any]) -> int:
    return sum(1 for m in kwargs["messages"] if m["role"] == "tool")


def run_one(script, condition: Condition = Condition.A1, **backend_kw) -> tuple[dict[str, Any], FakeOpenAIClient, Any]:
    """Run a single unit with a scripted client; return (stored record, client, stats)."""
    import tempfile

    fake = FakeOpenAIClient(script)

    async def nosleep(_s: float) -> None:
        return None

    backend = OpenAIBackend("http://fake/v1", "m", client_factory=lambda url: fake, sleep=nosleep, **backend_kw)
    units = native_units("m", {"fX": tiny_codebook()}, [("fX", "2024-01-01")], [condition], SPEC)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore(tmp)
        stats = asyncio.run(run_units(units, backend, store, FakeTools(), progress=False))
        rec = store.load(units[0].key)
        frame = predictions_frame(store, "h")
    assert rec is not None, "every unit must be recorded"
    assert len(frame) == 1 and bool(frame.loc[0, "valid"]) == rec["valid"]
    return rec, fake, stats


def test_tool_call_then_answer_is_recorded_with_observation():
    def script(kw):
        if n_tools(kw) == 0:
            return completion(tool_calls=[("search", json.dumps({"query": "graph neural nets"}))])
        return completion(content=ANSWER)

    rec, fake, _ = run_one(script)
    assert rec["valid"] and rec["weights"] == pytest.approx(WEIGHTS)
    assert rec["n_search_calls"] == 1
    call = rec["search_calls"][0]
    assert call["query"] == "graph neural nets" and call["total_hits"] == 3 and len(call["result_ids"]) == 3
    tool_msg = [m for m in rec["messages"] if m["role"] == "tool"][0]
    assert json.loads(tool_msg["content"])["total_hits"] == 3
    first = fake.completions.requests[0]
    assert first["tool_choice"] == "auto" and first["parallel_tool_calls"] is False and first["temperature"] == 0.0
    assert first["max_tokens"] == SPEC.max_tokens_search
    assert rec["response_model"] == "served-model" and rec["attempts"] == 2
    assert rec["prompt_tokens"] == 200 and rec["completion_tokens"] == 20


def test_closed_book_offers_no_tools():
    rec, fake, _ = run_one(lambda kw: completion(content=ANSWER), Condition.A0)
    assert rec["valid"]
    req = fake.completions.requests[0]
    assert "tools" not in req and "tool_choice" not in req and req["max_tokens"] == SPEC.max_tokens_closed


@pytest.mark.parametrize(
    "arguments, fragment",
    [
        ("{not json", "not JSON"),
        ('["q"]', "expected a JSON object"),
        ('{"query": "x", "color": "red"}', "unknown argument"),
        ('{"query": ""}', "non-empty string"),
        ('{"query": "x", "start_date": "yesterday"}', "invalid arguments"),
    ],
)
def test_malformed_tool_arguments_get_error_observation(arguments, fragment):
    def script(kw):
        if n_tools(kw) == 0:
            return completion(tool_calls=[("search", arguments)])
        return completion(content=ANSWER)

    rec, fake, _ = run_one(script)
    assert rec["valid"] and rec["n_search_calls"] == 1
    assert fragment in rec["search_calls"][0]["error"]
    obs = json.loads(fake.completions.requests[1]["messages"][-1]["content"])
    assert fragment in obs["error"]


def test_unknown_tool_and_parallel_calls():
    def script(kw):
        if n_tools(kw) == 0:
            return completion(tool_calls=[("search", '{"query": "a b"}'), ("search", '{"query": "c"}')])
        if n_tools(kw) == 2:
            return completion(tool_calls=[("browse", '{"url": "x"}')])
        return completion(content=ANSWER)

    rec, _, _ = run_one(script)
    assert rec["valid"]
    assert [c["error"] is None for c in rec["search_calls"]] == [True, False]
    assert "unknown tool" in rec["search_calls"][1]["error"]
    assert any(e.startswith("parallel_tool_calls_dropped") for e in rec["events"])


def test_plain_text_is_nudged_once_then_accepted():
    def script(kw):
        if kw["messages"][-1]["role"] == "user" and "neither" in kw["messages"][-1]["content"]:
            return completion(content=ANSWER)
        return completion(content="I think graphs will grow.")

    rec, fake, _ = run_one(script)
    assert rec["valid"] and any(e.startswith("nudged") for e in rec["events"])
    assert len(fake.completions.requests) == 2


def test_plain_text_twice_is_invalid():
    rec, fake, stats = run_one(lambda kw: completion(content="no idea"))
    assert not rec["valid"] and rec["invalid_reason"] == "invalid_answer" and rec["invalid_detail"]
    assert len(fake.completions.requests) == 2 and stats.invalid == 1
    assert rec["answer_text"] == "no idea"


def test_plain_text_that_parses_is_accepted_without_nudge():
    rec, fake, _ = run_one(lambda kw: completion(content=f"My forecast: {ANSWER}"))
    assert rec["valid"] and len(fake.completions.requests) == 1 and rec["events"] == []


def test_over_length_answer_is_invalid_and_recorded():
    rec, fake, _ = run_one(lambda kw: completion(content='{"D0": 12, "D1": 1', finish="length"))
    assert not rec["valid"] and rec["invalid_reason"] == "over_length" and "token cap" in rec["invalid_detail"]
    assert len(fake.completions.requests) == 1
    assert rec["turns"][0]["finish_reason"] == "length"


def test_search_cap_forces_an_answer():
    cap = SPEC.max_search_calls

    def script(kw):
        if kw["tool_choice"] == "none":
            return completion(content=ANSWER)
        return completion(tool_calls=[("search", json.dumps({"query": f"q{n_tools(kw)}"}))])

    rec, fake, _ = run_one(script)
    assert rec["valid"] and rec["n_search_calls"] == cap
    reqs = fake.completions.requests
    assert len(reqs) == cap + 1
    assert all(r["tool_choice"] == "auto" for r in reqs[:cap]) and reqs[cap]["tool_choice"] == "none"
    assert "used all" in reqs[cap]["messages"][-1]["content"]


def test_tool_call_after_cap_is_nudged_then_invalid():
    rec, fake, _ = run_one(lambda kw: completion(tool_calls=[("search", '{"query": "again"}')]))
    assert not rec["valid"] and rec["invalid_reason"] == "tool_call_when_no_tools_available"
    assert rec["n_search_calls"] == SPEC.max_search_calls
    assert len(fake.completions.requests) == SPEC.max_search_calls + 2


def _request() -> httpx.Request:
    return httpx.Request("POST", "http://fake/v1/chat/completions")


def test_http_500_and_timeouts_are_retried_and_recorded():
    failures = [
        openai.InternalServerError("boom", response=httpx.Response(500, request=_request()), body=None),
        openai.APITimeoutError(request=_request()),
        openai.APIConnectionError(request=_request()),
    ]

    def script(kw):
        return failures.pop(0) if failures else completion(content=ANSWER)

    rec, _, stats = run_one(script)
    assert rec["valid"] and rec["attempts"] == 4 and rec["retries"] == 3 and stats.retries == 3
    attempts = rec["turns"][0]["attempts"]
    assert [a["ok"] for a in attempts] == [False, False, False, True]
    assert attempts[0]["status"] == 500 and "timeout" in attempts[1]["error"]


def test_exhausted_retries_make_an_invalid_unit():
    def script(kw):
        return openai.InternalServerError("down", response=httpx.Response(503, request=_request()), body=None)

    rec, _, _ = run_one(script, max_attempts=3)
    assert (
        not rec["valid"] and rec["invalid_reason"] == "backend_error" and rec["invalid_detail"].startswith("HTTP 503")
    )
    assert rec["attempts"] == 3 and rec["retries"] == 3


def test_non_retryable_error_is_not_retried():
    def script(kw):
        return openai.BadRequestError("bad", response=httpx.Response(400, request=_request()), body=None)

    rec, _, _ = run_one(script)
    assert not rec["valid"] and rec["attempts"] == 1 and "HTTP 400" in rec["invalid_detail"]


def test_backoff_is_exponential_and_capped():
    b = OpenAIBackend("http://a/v1", "m", client_factory=lambda u: None, backoff_s=0.5, backoff_max_s=3.0)
    assert [b.backoff(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_endpoints_round_robin():
    seen: list[str] = []

    def factory(url):
        return FakeOpenAIClient(lambda kw: seen.append(url) or completion(content=ANSWER))

    backend = OpenAIBackend("http://a/v1,http://b/v1", "m", client_factory=factory)
    units = native_units(
        "m", {"fX": tiny_codebook()}, [("fX", "2024-01-01"), ("fX", "2024-07-01")], [Condition.A0], SPEC
    )
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run_units(units, backend, RunStore(tmp), None, progress=False, concurrency=1))
    assert seen == ["http://a/v1", "http://b/v1"]


# -- a real HTTP server: FastAPI + uvicorn in a thread ------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def flaky_server():
    """An OpenAI-compatible server: request 1 -> HTTP 500, request 2 -> too slow (timeout),
    request 3 -> a tool call, then the answer."""
    import uvicorn
    from fastapi import FastAPI
    from fastapi.responses import JSONResponse

    app = FastAPI()
    state = {"n": 0}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        state["n"] += 1
        if state["n"] == 1:
            return JSONResponse({"error": {"message": "internal"}}, status_code=500)
        if state["n"] == 2:
            await asyncio.sleep(3.0)
        if not any(m["role"] == "tool" for m in body["messages"]):
            return completion(tool_calls=[("search", '{"query": "speech robots"}')], model="real-server")
        return completion(content=ANSWER, model="real-server")

    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/v1", state
    server.should_exit = True
    thread.join(timeout=5)


def test_real_http_500_and_timeout_paths(flaky_server, tmp_path):
    url, state = flaky_server
    # the slow request sleeps 3 s; a 1.5 s timeout leaves a loaded machine time to answer the others
    backend = OpenAIBackend(url, "m", api_key="x", timeout_s=1.5, backoff_s=0.01)
    units = native_units("m", {"fX": tiny_codebook()}, [("fX", "2024-01-01")], [Condition.A1], SPEC)
    store = RunStore(tmp_path)
    stats = asyncio.run(run_units(units, backend, store, FakeTools(), progress=False))
    rec = store.load(UnitKey("m", "fX", "2024-01-01", Condition.A1))
    assert rec["valid"] and rec["response_model"] == "real-server"
    first = rec["turns"][0]["attempts"]
    assert [a["ok"] for a in first] == [False, False, True]
    assert first[0]["status"] == 500 and "timeout" in first[1]["error"]
    assert rec["attempts"] == 4 and stats.retries == 2 and rec["n_search_calls"] == 1


# -- the transformers backend's text protocols (pure functions, no model needed) ------------------


def test_text_and_hermes_tool_call_parsing_and_rendering():
    from rap_benchmark.agents.protocol import Request
    from rap_benchmark.agents.toolset import search_text_protocol
    from rap_benchmark.agents.transformers_backend import parse_hermes_tool_call

    protocol = search_text_protocol()
    three = tuple({"role": "assistant", "content": "", "tool_calls": [{}]} for _ in range(3))
    req3 = Request(messages=three, tools=({},), tool_choice="auto", max_tokens=10, text_protocol=protocol)
    call = req3.text_call('ok <search start_date="2023-07-01" end_date="2023-12-31">graph nets</search> x')
    assert call.id == "call_3" and json.loads(call.arguments) == {
        "query": "graph nets",
        "start_date": "2023-07-01",
        "end_date": "2023-12-31",
    }
    assert req3.text_call("no tag here") is None
    h = parse_hermes_tool_call('<tool_call>\n{"name": "search", "arguments": {"query": "asr"}}\n</tool_call>', 0)
    assert h.name == "search" and json.loads(h.arguments) == {"query": "asr"}
    bad = parse_hermes_tool_call("<tool_call>{oops</tool_call>", 1)
    assert bad.name == "search" and bad.arguments == "{oops"
    req = Request(
        messages=(
            {"role": "system", "content": "S"},
            {"role": "user", "content": "U"},
            {"role": "assistant", "content": None, "tool_calls": [call.to_message()]},
            {"role": "tool", "tool_call_id": "call_3", "content": '{"total_hits": 1}'},
        ),
        tools=({"type": "function"},),
        tool_choice="auto",
        max_tokens=10,
        text_protocol=protocol,
    )
    msgs = req.text_messages()
    assert msgs[0]["content"].startswith("S\n\n") and "<search>" in msgs[0]["content"]
    assert msgs[2] == {
        "role": "assistant",
        "content": '<search start_date="2023-07-01" end_date="2023-12-31">graph nets</search>',
    }
    assert msgs[3]["role"] == "user" and msgs[3]["content"].startswith("<observation>")


class _RecordingApp:
    """The scripted server's app, keeping every chat request body it received."""

    def __new__(cls) -> Any:
        from rap_benchmark.testing.scripted_server import ScriptedApp

        class Recording(ScriptedApp):
            bodies: list[dict[str, Any]] = []

            def reply_for(self, body: bytes, path: str = "/v1/chat/completions") -> tuple[int, bytes, bool]:
                self.bodies.append(json.loads(body))
                return super().reply_for(body, path)

        return Recording()


def test_rap_run_sends_extra_body_and_chat_template_kwargs_with_every_request(mini_dir, tmp_path, capsys):
    """Issue 22's leftover: ``rap run`` passes --extra-body and --chat-template-kwargs (Qwen3's
    ``enable_thinking``) to an OpenAI-compatible server with every request, as ``rap build`` does."""
    from rap_benchmark.cli import main
    from rap_benchmark.testing.scripted_server import ServerThread

    app = _RecordingApp()
    with ServerThread(app) as srv:
        argv = ["run", str(mini_dir), "--backend", "openai", "--base-url", srv.url, "--model", "scripted"]
        argv += ["--conditions", "A0,A1", "--limit", "2", "--no-progress", "--out", str(tmp_path / "r")]
        argv += ["--chat-template-kwargs", '{"enable_thinking": false}', "--extra-body", '{"top_k": 20}']
        assert main(argv) == 0
    assert "2 valid" in capsys.readouterr().out
    assert len(app.bodies) >= 2
    for body in app.bodies:
        assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["top_k"] == 20
        assert body["model"] == "scripted"


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--extra-body", '{"max_tokens": 5}'], "--extra-body may not set max_tokens (rap sets them)"),
        (["--extra-body", "[1]"], "--extra-body: expected a JSON object, got list"),
        (["--chat-template-kwargs", "{"], "--chat-template-kwargs: not JSON"),
        (
            ["--backend", "reference", "--extra-body", "{}", "--chat-template-kwargs", '{"a": 1}'],
            "need --backend openai",
        ),
    ],
)
def test_rap_run_refuses_a_bad_extra_body_in_one_line(mini_dir, tmp_path, capsys, flags, needle):
    from rap_benchmark.cli import main

    argv = ["run", str(mini_dir), "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main([*argv, "--out", str(tmp_path / "r"), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("rap run: ") and needle in err[0], err
    assert not (tmp_path / "r").exists()
