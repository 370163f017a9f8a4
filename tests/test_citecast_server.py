"""Sessions, the one-shot submission and the HTTP server (same code path as in process)."""

from __future__ import annotations

import datetime as dt
import json
import threading
from pathlib import Path

import pytest
from citecast_http import http_client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rap_benchmark.citecast.client import HttpClient, InProcessClient
from rap_benchmark.citecast.env import CallLimit, CiteCastEnv, SessionClosed, UnknownSession, UnknownTask
from rap_benchmark.citecast.records import CiteTask, PaperMeta, TaskSplit
from rap_benchmark.citecast.reward import reward
from rap_benchmark.citecast.tasks import task_id_for
from rap_benchmark.citecast.tools import ToolArgumentError
from rap_benchmark.citecast.webcorpus import WebCorpus

FIX = Path(__file__).parent / "fixtures" / "citecast"


def make_env(**kw) -> CiteCastEnv:
    tasks = {}
    for i, target in enumerate([0, 3, 17, 150]):
        aid = f"2601.{1234 + i:05d}"
        p = PaperMeta(
            aid, f"Sparse routing study {i}", "We study sparse routing.", ("Jane Doe",), "cs.CL", dt.date(2026, 1, 5)
        )
        tasks[task_id_for(aid)] = CiteTask(
            task_id_for(aid),
            p,
            target,
            "x",
            TaskSplit.TEST if i % 2 else TaskSplit.TRAIN,
            f"s2-{i}",
            dt.date(2026, 8, 23),
        )
    return CiteCastEnv(tasks, WebCorpus.from_jsonl(FIX / "corpus.jsonl"), **kw)


@pytest.fixture(scope="module")
def env() -> CiteCastEnv:
    return make_env()


@pytest.fixture(scope="module")
def http(env: CiteCastEnv) -> HttpClient:
    return http_client(env)


def clients(env: CiteCastEnv, http: HttpClient):
    return [InProcessClient(env), http]


def test_start_prompt_has_metadata_but_never_target(env: CiteCastEnv, http: HttpClient) -> None:
    for client in clients(env, http):
        tid = client.task_ids("test")[0]
        started = client.start(tid)
        task = env.tasks[tid]
        assert task.paper.title in started["prompt"] and "Jane Doe" in started["prompt"]
        assert "s2-" not in json.dumps(started) and '"band"' not in json.dumps(started)
        assert [t["function"]["name"] for t in started["tools"]] == ["web_search", "web_fetch", "submit_prediction"]
        assert client.state(started["session_id"])["done"] is False


def test_http_lists_only_ids(http: HttpClient, env: CiteCastEnv) -> None:
    assert http.task_ids() == env.task_ids()
    assert http.task_ids("train") == env.task_ids("train")
    resp = http._http.get("/tasks")
    assert all(set(t) == {"task_id"} for t in resp.json()["tasks"])


def test_errors_map_to_the_same_exceptions(env: CiteCastEnv, http: HttpClient) -> None:
    for client in clients(env, http):
        with pytest.raises(UnknownTask):
            client.start("cc_nope")
        with pytest.raises(UnknownSession):
            client.call("nope", "web_search", {"query": "x"})
        sid = client.start(env.task_ids()[0])["session_id"]
        with pytest.raises(ToolArgumentError):
            client.call(sid, "submit_prediction", {"prediction": 2.5, "justification": "x"})
        with pytest.raises(ToolArgumentError):
            client.call(sid, "delete_everything", {})
        assert client.state(sid)["done"] is False  # refused calls change nothing
        out = client.call(sid, "web_fetch", {"url": "https://citations.example.org/arxiv/2601.01234"})
        assert out["observation"]["crawl_date"] is None and out["done"] is False


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000), st.integers(0, 10_000), st.sampled_from(["inproc", "http"]), st.integers(0, 3))
def test_second_submission_refused_and_reward_unchanged(env, http, p1: int, p2: int, via: str, k: int) -> None:
    client = InProcessClient(env) if via == "inproc" else http
    tid = env.task_ids()[k]
    sid = client.start(tid)["session_id"]
    first = client.call(sid, "submit_prediction", {"prediction": p1, "justification": "first"})
    assert first["done"] and first["reward"] == reward(p1, env.tasks[tid].target)
    for name, args in (
        ("submit_prediction", {"prediction": p2, "justification": "second"}),
        ("web_search", {"query": "sparse"}),
    ):
        with pytest.raises(SessionClosed):
            client.call(sid, name, args)
    state = client.state(sid)
    assert state["reward"] == first["reward"] and state["prediction"] == p1


def test_concurrent_submissions_only_one_wins() -> None:
    env = make_env()
    tid = env.task_ids()[2]
    sid = env.start(tid).session_id
    wins, refused = [], []

    def submit(p: int) -> None:
        try:
            wins.append(env.call(sid, "submit_prediction", {"prediction": p, "justification": ""}).reward)
        except SessionClosed:
            refused.append(p)

    threads = [threading.Thread(target=submit, args=(p,)) for p in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(refused) == 15
    assert env.state(sid)["reward"] == wins[0]


def test_call_limit() -> None:
    env = make_env(max_tool_calls=2)
    sid = env.start(env.task_ids()[0]).session_id
    env.call(sid, "web_search", {"query": "sparse"})
    env.call(sid, "web_search", {"query": "routing"})
    with pytest.raises(CallLimit):
        env.call(sid, "web_search", {"query": "more"})
    assert env.call(sid, "submit_prediction", {"prediction": 0, "justification": ""}).done
