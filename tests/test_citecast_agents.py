"""CiteCast through the shared agent runner: the same episode loop, store, retries, resume and
shards as RAP, with the environment running every tool call; and a SIGKILL-and-resume test of
``rap citecast run`` (the twin of the RAP one in test_agents_store.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from citecast_http import http_client
from fake_openai import FakeOpenAIClient, completion
from runkill import kill_after_done
from scripted_backend import ScriptedBackend

from rap_benchmark.agents.backends import OpenAIBackend
from rap_benchmark.agents.citecast import (
    ConstantBackend,
    citecast_units,
    predictions_rows,
    run_citecast,
)
from rap_benchmark.agents.protocol import ModelTurn, tool_call_turn
from rap_benchmark.agents.runner import run_units
from rap_benchmark.agents.store import RunStore, TaskKey, merge_stores
from rap_benchmark.citecast.client import InProcessClient
from rap_benchmark.citecast.env import CiteCastEnv
from rap_benchmark.citecast.reward import reward

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_citecast_server import make_env  # noqa: E402


@pytest.fixture()
def env() -> CiteCastEnv:
    return make_env()


def run(units, backend, store):
    return asyncio.run(run_units(units, backend, store, progress=False))


@pytest.mark.parametrize("via", ["in-process", "http"])
def test_scripted_agent_is_nudged_refused_and_scored_by_the_environment(env, tmp_path, via) -> None:
    """A text reply is nudged once; a refused (negative) submission comes back as an error
    observation; the accepted one is the answer, and its reward is the environment's."""
    client = InProcessClient(env) if via == "in-process" else http_client(env)

    def script(req, ctx):
        n_tool = sum(m["role"] == "tool" for m in req.messages)
        if n_tool == 0 and not any(m.get("rap_note") == "nudge" for m in req.messages):
            return ModelTurn(content="thinking")
        if n_tool == 0:
            return tool_call_turn(0, "web_search", {"query": "sparse routing"}, "scripted")
        if n_tool == 1:
            return tool_call_turn(1, "submit_prediction", {"prediction": -4, "justification": "x"}, "scripted")
        return tool_call_turn(2, "submit_prediction", {"prediction": 16, "justification": "because"}, "scripted")

    units = citecast_units(client, "scripted", "test")
    store = RunStore(tmp_path)
    stats = run(units, ScriptedBackend(script), store)
    assert stats.executed == len(units) == 2 and stats.invalid_reasons == {"invalid_answer": 2}  # nudge + refusal
    rec = store.load(units[0].key)
    assert rec["prediction"] is None and "nonnegative" in rec["invalid_detail"]
    assert env.state(rec["session_id"])["done"] is False
    stats = run(
        units,
        ScriptedBackend(
            lambda req, ctx: tool_call_turn(0, "submit_prediction", {"prediction": 16, "justification": ""}, "scripted")
        ),
        store,
    )
    assert (stats.skipped, stats.executed, stats.valid) == (0, 2, 2)

    def script_ok(req, ctx):
        n_tool = sum(m["role"] == "tool" for m in req.messages)
        if n_tool == 0:
            return tool_call_turn(0, "web_search", {"query": "sparse routing"}, "scripted")
        if n_tool == 1:
            return tool_call_turn(1, "submit_prediction", {"prediction": -4, "justification": "x"}, "scripted")
        return tool_call_turn(2, "submit_prediction", {"prediction": 16, "justification": "because"}, "scripted")

    store2 = RunStore(tmp_path / "b")
    assert run(units, ScriptedBackend(script_ok), store2).valid == 2
    for u in units:
        rec = store2.load(u.key)
        target = env.tasks[u.key.task_id].target
        assert rec["valid"] and rec["prediction"] == 16 and rec["reward"] == reward(16, target)
        assert rec["response_model"] == "scripted"  # the model that answered, as the turns named it
        assert rec["n_tool_calls"] == 1 and [c["name"] for c in rec["tool_calls"]][0] == "web_search"
        refused = rec["tool_calls"][1]
        assert "nonnegative" in refused["error"] and rec["events"][-1].startswith("nudged: the answer was refused")
        assert env.state(rec["session_id"])["prediction"] == 16


def test_budget_offers_only_the_submission_then_forces_it(env, tmp_path) -> None:
    seen = []

    def greedy(req, ctx):
        seen.append((req.tool_choice, [t["function"]["name"] for t in req.tools]))
        if req.tool_choice == "auto" and len(req.tools) == 3:
            return tool_call_turn(0, "web_search", {"query": "more"}, "g")
        return tool_call_turn(1, "submit_prediction", {"prediction": 5, "justification": "done"}, "g")

    units = citecast_units(InProcessClient(env), "g", "train", max_tool_calls=2, limit=1)
    store = RunStore(tmp_path)
    run(units, ScriptedBackend(greedy), store)
    rec = store.load(units[0].key)
    assert rec["valid"] and rec["n_tool_calls"] == 2 and rec["events"] == ["forced_answer after 2 calls"]
    assert seen[-1] == ("auto", ["submit_prediction"])


def test_openai_backend_retries_and_accounting(env, tmp_path) -> None:
    """The OpenAI-compatible backend's retries, attempts and tokens are recorded for CiteCast units;
    a unit whose every attempt failed is invalid (backend_error with its detail) and rerun."""
    req = httpx.Request("POST", "http://x/v1/chat/completions")
    state = {"n": 0, "down": True}

    def script(kw):
        state["n"] += 1
        if state["down"]:
            return openai.InternalServerError("down", response=httpx.Response(503, request=req), body=None)
        if state["n"] % 2:
            return openai.InternalServerError("blip", response=httpx.Response(500, request=req), body=None)
        tools = {t["function"]["name"] for t in kw["tools"]}
        assert kw["tool_choice"] == "auto" and kw["parallel_tool_calls"] is False and "web_fetch" in tools
        return completion(tool_calls=[("submit_prediction", '{"prediction": 7, "justification": "j"}')])

    def backend():
        return OpenAIBackend(
            "http://x/v1", "m", client_factory=lambda u: FakeOpenAIClient(script), max_attempts=2, sleep=_no_sleep
        )

    units = citecast_units(InProcessClient(env), "m", "test", limit=1)
    store = RunStore(tmp_path)
    s1 = run(units, backend(), store)
    rec = store.load(units[0].key)
    assert s1.invalid == 1 and rec["invalid_reason"] == "backend_error" and rec["invalid_detail"].startswith("HTTP 503")
    assert s1.invalid_reasons == {"backend_error": 1}
    state.update(n=0, down=False)
    s2 = run(units, backend(), store)
    rec = store.load(units[0].key)
    assert s2.executed == 1 and rec["valid"] and rec["prediction"] == 7
    assert (
        rec["attempts"] == 2 and rec["retries"] == 1 and rec["prompt_tokens"] == 100 and rec["completion_tokens"] == 10
    )
    (row,) = predictions_rows(store)
    assert (
        row["invalid_reason"] is None
        and row["attempts"] == 2
        and row["reward"] == reward(7, env.tasks[row["task_id"]].target)
    )


async def _no_sleep(_s: float) -> None:
    return None


def test_shards_merge_to_the_full_run(tmp_path) -> None:
    def client():
        return InProcessClient(make_env())

    kw = dict(model="constant/2", split="train", instance="fixture", progress=False)
    _, full = run_citecast(client(), ConstantBackend(2), tmp_path / "full", **kw)
    for i in range(2):
        run_citecast(client(), ConstantBackend(2), tmp_path / f"s{i}", shard=(i, 2), **kw)
    merge_stores([tmp_path / "s0", tmp_path / "s1"], tmp_path / "merged")
    assert predictions_rows(RunStore(tmp_path / "merged")) == predictions_rows(RunStore(tmp_path / "full"))
    assert {TaskKey("constant/2", t).shard(2) for t in make_env().task_ids("train")} <= {0, 1}


def _rap(*args: str) -> list[str]:
    return [sys.executable, "-m", "rap_benchmark", *args]


@pytest.fixture(scope="module")
def citecast_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rap_benchmark.citecast.embedded import EmbeddedConfig, build_embedded

    return Path(build_embedded(tmp_path_factory.mktemp("cc") / "inst", EmbeddedConfig(n_tasks=60), progress=False))


def test_sigkill_mid_run_then_resume_matches_uninterrupted_run(citecast_dir, tmp_path) -> None:
    """Regression for the CiteCast runner having no resume: a `rap citecast run` killed with SIGKILL
    and restarted never reruns a completed task and ends with the same predictions.jsonl, byte for
    byte, as an uninterrupted run."""
    common = ["--backend", "constant", "--constant", "4", "--split", "train", "--concurrency", "1", "--no-progress"]
    run_dir = tmp_path / "crashy"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    store = RunStore(run_dir)
    done_before = kill_after_done(
        _rap("citecast", "run", str(citecast_dir), "--out", str(run_dir), "--request-delay", "0.05", *common), run_dir
    )
    n_tasks = len((citecast_dir / "specs" / "train.jsonl").read_text(encoding="utf-8").splitlines())
    assert 5 <= len(done_before) < n_tasks
    assert not (run_dir / "predictions.jsonl").exists()

    subprocess.run(
        _rap("citecast", "run", str(citecast_dir), "--out", str(run_dir), *common),
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    clean = tmp_path / "clean"
    subprocess.run(
        _rap("citecast", "run", str(citecast_dir), "--out", str(clean), *common),
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    got, want = (run_dir / "predictions.jsonl").read_bytes(), (clean / "predictions.jsonl").read_bytes()
    assert got == want and len(got.splitlines()) == n_tasks
    first_done: dict[str, int] = {}
    for i, e in enumerate(store.events()):
        if e["event"] == "done":
            first_done.setdefault(e["unit_id"], i)
        else:
            assert e["unit_id"] not in first_done, f"{e['unit_id']} ran again after completing"
    assert len(first_done) == n_tasks
    assert all(json.loads(line)["valid"] for line in got.splitlines())


@pytest.mark.parametrize("value", [-1, 3.5, True, 10**12])
def test_the_constant_backend_refuses_what_the_server_would(value: object) -> None:
    """Regression: it checked only ``value < 0``, so 3.5 became 3 and a value over the server's
    maximum was accepted and then refused on every task, after its searches."""
    from rap_benchmark.citecast.reward import PredictionError

    with pytest.raises(PredictionError):
        ConstantBackend(value)
    assert ConstantBackend(12).value == 12 and ConstantBackend(12.0).value == 12
