"""Serving modes, input limits, budgets and session lifetimes (issue 15), in process and over HTTP.

Each regression test's docstring names the measured problem of the issue it guards against.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import multiprocessing as mp
import re
import sqlite3
from pathlib import Path

import pytest
from citecast_http import http_client
from hypothesis import given, settings
from hypothesis import strategies as st
from test_citecast_server import make_env

from rap_benchmark.citecast.client import InProcessClient
from rap_benchmark.citecast.env import (
    AlreadyScored,
    CallLimit,
    EnvError,
    Mode,
    SessionClosed,
    UnknownSession,
    UnknownTask,
)
from rap_benchmark.citecast.errors import PayloadTooLarge, Unauthorized
from rap_benchmark.citecast.records import SubCorpus, TaskSplit, WebDocument
from rap_benchmark.citecast.reward import reward
from rap_benchmark.citecast.scoring import score_results
from rap_benchmark.citecast.server import MAX_BODY_BYTES
from rap_benchmark.citecast.sessions import Outcome, SqliteStore
from rap_benchmark.citecast.tools import MAX_QUERY_CHARS, MAX_URL_CHARS, BackdatedWeb, ToolArgumentError
from rap_benchmark.citecast.webcorpus import WebCorpus, first_term

KEYS = {"secret-key-of-team-a": "team-a", "secret-key-of-team-b": "team-b"}


def invert(r: float) -> int:
    """The reward-inversion attack: r = 1/cosh(2|ln((p+1)/(t+1))|) at p = 0 gives t = e^{acosh(1/r)/2} - 1
    (the target is >= p = 0, so the sign is known)."""
    return round(math.exp(math.acosh(1.0 / r) / 2.0) - 1.0)


# -- modes -------------------------------------------------------------------------------------------
def test_inversion_attack_works_where_the_reward_is_returned() -> None:
    """The attack of the issue, as a sanity check of the test's own attack: in training mode (and
    in trusted in-process use) a submitted 0 returns a reward that inverts to the exact target."""
    env = make_env(mode=Mode.TRAINING)
    client = InProcessClient(env)
    for tid in client.task_ids():
        assert env.tasks[tid].split is TaskSplit.TRAIN
        sid = client.start(tid)["session_id"]
        out = client.call(sid, "submit_prediction", {"prediction": 0, "justification": "probe"})
        assert out["reward"] == reward(0, env.tasks[tid].target)
        assert invert(out["reward"]) == env.tasks[tid].target


def test_evaluation_mode_attack_recovers_nothing_and_one_scored_session_per_key(tmp_path: Path) -> None:
    """Issue: 'The reward gives the target away. Sessions per task are unlimited. Submitting 0 in a
    throwaway session and inverting r recovered the exact target for 20 of 20 Test tasks; a second
    session then scored 1.0.' In evaluation mode no response carries a reward, and the second
    session of the same key on the same task is refused, so there is no second try to use it in."""
    env = make_env(mode=Mode.EVALUATION, store=SqliteStore(tmp_path / "s.sqlite3"))
    attacker = http_client(env, "secret-key-of-team-a", KEYS)
    test_ids = attacker.task_ids()
    assert test_ids and all(env.tasks[t].split is TaskSplit.TEST for t in test_ids)
    assert attacker.task_ids("train") == []
    seen: list[str] = []
    for tid in test_ids:
        started = attacker.start(tid)
        seen.append(json.dumps(started))
        sid = started["session_id"]
        seen.append(json.dumps(attacker.call(sid, "web_search", {"query": "sparse routing"})))
        out = attacker.call(sid, "submit_prediction", {"prediction": 0, "justification": "probe"})
        state = attacker.state(sid)
        seen += [json.dumps(out), json.dumps(state)]
        assert out["reward"] is None and "reward" not in out["observation"] and state["reward"] is None
        assert out["done"] and state["prediction"] == 0
        with pytest.raises(AlreadyScored):  # the exploit's second session
            attacker.start(tid)
        with pytest.raises(SessionClosed):
            attacker.call(sid, "submit_prediction", {"prediction": env.tasks[tid].target, "justification": "x"})
    # nothing any response carried is a reward or a target: no number of the form 1/cosh(.) at all
    blob = "\n".join(seen)
    assert '"reward": null' in blob or '"reward":null' in blob
    for tid in test_ids:
        r0 = reward(0, env.tasks[tid].target)
        assert repr(r0) not in blob
    # another key has its own one session; a request without a key is refused
    other = http_client(env, "secret-key-of-team-b", KEYS)
    sid_b = other.start(test_ids[0])["session_id"]
    other.call(sid_b, "submit_prediction", {"prediction": env.tasks[test_ids[0]].target, "justification": "x"})
    with pytest.raises(UnknownSession):  # team a cannot read or act on team b's session
        attacker.state(sid_b)
    with pytest.raises(Unauthorized):
        http_client(env, None, KEYS).start(test_ids[0])
    with pytest.raises(Unauthorized):
        http_client(env, "wrong-secret-key", KEYS).task_ids()
    with pytest.raises(UnknownTask):  # train tasks are not served in evaluation mode
        attacker.start(next(t for t, task in env.tasks.items() if task.split is TaskSplit.TRAIN))
    # the results come from the scoring step, after the run
    report = score_results(env.tasks, env.store.results())
    a, b = report.summary["team-a"], report.summary["team-b"]
    assert a["n_started"] == a["n_submitted"] == len(test_ids) == a["n_tasks"]
    expected_a = [reward(0, env.tasks[t].target) for t in test_ids]
    assert a["mean_reward"] == pytest.approx(sum(expected_a) / len(test_ids))
    assert b["n_submitted"] == 1 and b["mean_reward"] == pytest.approx(1.0 / len(test_ids))  # missing tasks score 0


def test_claim_survives_delete_and_expiry(tmp_path: Path) -> None:
    """Deleting or abandoning a scored session does not give the key a second session."""
    clock = [1000.0]
    store = SqliteStore(tmp_path / "s.sqlite3", ttl_s=60, clock=lambda: clock[0])
    env = make_env(mode=Mode.EVALUATION, store=store)
    client = InProcessClient(env, key="team-a")
    tid = client.task_ids()[0]
    client.close(client.start(tid)["session_id"])
    with pytest.raises(AlreadyScored):
        client.start(tid)
    tid2 = client.task_ids()[1]
    client.start(tid2)
    clock[0] += 61
    assert store.expire() == 1
    with pytest.raises(AlreadyScored):
        client.start(tid2)
    assert [(r.task_id, r.prediction) for r in store.results()] == [(tid, None), (tid2, None)]


# -- input limits ------------------------------------------------------------------------------------------
def test_huge_prediction_is_422_and_leaves_the_session_whole() -> None:
    """Issue: 'A prediction of 10^400 returns HTTP 500 (an OverflowError in the reward) and leaves
    the session half-done. A later submit was then accepted.'"""
    env = make_env(mode=Mode.TRAINING)
    http = http_client(env)
    tid = http.task_ids()[0]
    sid = http.start(tid)["session_id"]
    for bad in ("1" + "0" * 400, "1e400", "-1", "2.5", "1" + "0" * 5000):
        resp = http._http.post(
            f"/sessions/{sid}/tools/submit_prediction", content=f'{{"prediction": {bad}, "justification": "x"}}'
        )
        assert resp.status_code == 422, (bad[:10], resp.status_code, resp.text[:200])
        assert len(resp.content) < 1000
        assert http.state(sid)["done"] is False and http.state(sid)["prediction"] is None
    with pytest.raises(ToolArgumentError, match="at most"):
        InProcessClient(env).call(sid, "submit_prediction", {"prediction": 10**400, "justification": "x"})
    out = http.call(sid, "submit_prediction", {"prediction": 7, "justification": "x"})
    assert out["done"] and out["reward"] == reward(7, env.tasks[tid].target)
    with pytest.raises(SessionClosed):
        http.call(sid, "submit_prediction", {"prediction": 8, "justification": "x"})
    assert http.state(sid)["prediction"] == 7


def test_long_query_is_cut_for_search_and_snippets_alike() -> None:
    """Issue: 'a 1 MB query takes 5.2 s of server time: only the search is cut to 500 characters,
    while the snippet code uses the whole query'. In process a long query answers exactly like its
    first 500 characters; over HTTP a body above the limit is refused with 413 before it is read."""
    head = "sparse " * (MAX_QUERY_CHARS // 7) + "x" * (MAX_QUERY_CHARS - 7 * (MAX_QUERY_CHARS // 7))
    assert len(head) == MAX_QUERY_CHARS
    tail = " routing" * 130_000  # ~1 MB; "routing" opens the page, "sparse" comes 700 words later
    text = "Routing notes. " + "filler words " * 350 + "Sparse experts are discussed here."
    doc = WebDocument("https://example.org/long", dt.date(2026, 1, 10), SubCorpus.WEB, "Long page", text)
    web = BackdatedWeb(WebCorpus([doc]).view(dt.date(2026, 1, 31)))
    [cut] = web.search(head + tail)
    assert [cut] == web.search(head) and cut["snippet"].startswith("...") and "Sparse experts" in cut["snippet"]
    assert web.search("routing sparse")[0]["snippet"].startswith("Routing notes.")  # what the tail would do
    env = make_env()
    assert env.web.search(head + tail) == env.web.search(head)
    http = http_client(env)
    sid = http.start(http.task_ids()[0])["session_id"]
    with pytest.raises(PayloadTooLarge):
        http.call(sid, "web_search", {"query": head + tail})
    ok = http.call(sid, "web_search", {"query": "x" * (MAX_BODY_BYTES - 100)})
    assert ok["done"] is False


def test_long_url_is_refused_and_never_echoed() -> None:
    """Issue: 'a 24 MB URL is echoed back in full'. Above the body limit it is a 413; a url over
    MAX_URL_CHARS inside the limit is a 422 whose answer does not repeat it."""
    env = make_env()
    http = http_client(env)
    sid = http.start(http.task_ids()[0])["session_id"]
    huge = "https://example.org/" + "a" * 24_000_000
    resp = http._http.post(f"/sessions/{sid}/tools/web_fetch", json={"url": huge})
    assert resp.status_code == 413 and len(resp.content) < 300
    long = "https://example.org/" + "b" * (MAX_URL_CHARS * 10)
    resp = http._http.post(f"/sessions/{sid}/tools/web_fetch", json={"url": long})
    assert resp.status_code == 422 and "bbbb" not in resp.text and len(resp.content) < 300
    fine = http.call(sid, "web_fetch", {"url": "https://example.org/" + "c" * (MAX_URL_CHARS - 40)})
    assert fine["observation"]["crawl_date"] is None


def test_rejected_calls_do_not_consume_the_budget() -> None:
    """Issue: 'rejected calls (e.g. an unknown tool, 422) count toward the call limit'."""
    env = make_env(max_tool_calls=2)
    http = http_client(env)
    sid = http.start(http.task_ids()[0])["session_id"]
    rejected = [
        ("delete_everything", {}),
        ("web_search", {"query": ""}),
        ("web_search", {"query": 3}),
        ("web_search", {"q": "x"}),
        ("web_fetch", {"url": "u" * (MAX_URL_CHARS + 1)}),
        ("submit_prediction", {"prediction": -1, "justification": "x"}),
    ]
    for name, args in rejected * 3:
        with pytest.raises(ToolArgumentError):
            http.call(sid, name, args)
    for _ in range(3):
        with pytest.raises(PayloadTooLarge):
            http.call(sid, "web_search", {"query": "y" * (MAX_BODY_BYTES + 1)})
    resp = http._http.post(f"/sessions/{sid}/tools/web_search", content=b"{not json")
    assert resp.status_code == 422
    assert http.state(sid)["n_calls"] == 0
    http.call(sid, "web_search", {"query": "sparse"})
    http.call(sid, "web_fetch", {"url": "https://arxiv.org/abs/2601.01234"})
    with pytest.raises(CallLimit):
        http.call(sid, "web_search", {"query": "more"})
    assert http.state(sid)["n_calls"] == 2
    assert http.call(sid, "submit_prediction", {"prediction": 1, "justification": "x"})["done"]


def test_sessions_expire_and_delete_frees_their_row(tmp_path: Path) -> None:
    """Issue: 'sessions never expire, and DELETE does not free their memory'."""
    clock = [0.0]
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path, ttl_s=100, clock=lambda: clock[0])
    env = make_env(store=store)
    client = InProcessClient(env)
    tid = client.task_ids()[0]
    idle, busy, gone = (client.start(tid)["session_id"] for _ in range(3))

    def rows() -> int:
        with sqlite3.connect(path) as db:
            return db.execute("SELECT count(*) FROM sessions").fetchone()[0]

    client.close(gone)
    assert rows() == 2 and len(env) == 2
    with pytest.raises(UnknownSession):
        client.state(gone)
    with pytest.raises(UnknownSession):
        client.close(gone)
    for _ in range(3):  # activity keeps a session alive past the TTL of its start
        clock[0] += 60
        client.call(busy, "web_search", {"query": "sparse"})
    with pytest.raises(UnknownSession, match="expired"):
        client.call(idle, "web_search", {"query": "sparse"})
    assert client.state(busy)["n_calls"] == 3
    client.start(tid)  # a start sweeps expired sessions out of the store
    assert rows() == 2  # busy and the new one; idle is gone
    clock[0] += 101
    assert store.expire() == 2 and rows() == 0


# -- the store under concurrency -------------------------------------------------------------------------
def _race_submit(path: str, sid: str, p: int, out) -> None:  # noqa: ANN001
    store = SqliteStore(path)
    out.put((p, store.submit(sid, "", p, "race")[0].value))


def test_one_submission_wins_across_processes(tmp_path: Path) -> None:
    """Workers are processes: the one-shot submission must hold across them, not only threads."""
    path = tmp_path / "s.sqlite3"
    store = SqliteStore(path)
    assert store.create("sid1", "cc_task", "", scored=False)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_race_submit, args=(str(path), "sid1", p, out)) for p in range(8)]
    for proc in procs:
        proc.start()
    results = [out.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join()
    winners = [p for p, outcome in results if outcome == Outcome.OK.value]
    assert len(winners) == 1 and sorted(o for _, o in results).count(Outcome.DONE.value) == 7
    assert store.get("sid1", "").prediction == winners[0]


# -- snippets ----------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet=st.sampled_from(list("ab c_1-.É\u0130éZ\n")), max_size=60),
    st.lists(st.sampled_from(["a", "ab", "b", "c1", "ba", "z"]), min_size=1, max_size=4, unique=True),
)
def test_first_term_matches_the_regex_it_replaced(text: str, terms: list[str]) -> None:
    """``first_term`` (str.find) gives the position of the per-query regex it replaced."""
    m = re.search(r"\b(?:" + "|".join(map(re.escape, terms)) + r")\b", text, re.I)
    assert first_term(text, terms) == (m.start() if m else None)


def test_env_errors_keep_their_http_status() -> None:
    assert {c.status for c in (UnknownTask, UnknownSession, SessionClosed, AlreadyScored, CallLimit)} == {
        404,
        409,
        429,
    }
    assert issubclass(PayloadTooLarge, EnvError) and PayloadTooLarge.status == 413


def test_index_of_a_read_only_instance_goes_to_the_temp_folder(tmp_path: Path, monkeypatch) -> None:
    """An instance folder the user cannot write (a shared read-only copy) still serves: its mapped
    index is built once under the temporary folder instead of the instance's .cache/."""
    import shutil
    import tempfile

    from rap_benchmark.citecast import webindex
    from rap_benchmark.citecast.embedded import EmbeddedConfig, build_embedded
    from rap_benchmark.citecast.instance import load_instance

    out = build_embedded(tmp_path / "inst", EmbeddedConfig(n_tasks=40))
    shutil.rmtree(out / ".cache")
    real_write = webindex.write_index

    def write_index(view, folder: Path):  # noqa: ANN001, ANN202 - the instance folder refuses writes
        if out in folder.parents:
            raise PermissionError(13, "Permission denied", str(folder))
        return real_write(view, folder)

    monkeypatch.setattr(webindex, "write_index", write_index)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    view = load_instance(out).web_index()
    assert (tmp_path / "tmp") in view.folder.parents and view.search_results("language models", 3)
    assert not (out / ".cache").exists()
    with pytest.raises(PermissionError):  # an explicit cache folder is never replaced silently
        load_instance(out).web_index(cache_dir=out / ".cache")
