"""A model endpoint that dies in the middle of a run (issue 36).

Regression: the stand-in server was killed 3 s into a 60-unit ``rap run --backend openai``; the
run printed nothing and kept retrying (after 10.5 min it was at 12 of 60 units, each unit about
70 s and 7 attempts). Ctrl-C said only ``rap run: interrupted``: no count, no resume hint, no
predictions.jsonl for the finished units.

Now, while requests are retried, the progress line names the endpoint, the last error and the
next try; once the endpoints stopped answering (``--give-up-after-units`` units in a row, or
``--give-up-after-s`` seconds) the run stops with one line naming the endpoint and the last
error, exit 75, its finished units kept in predictions.jsonl, and the command that resumes; the
same command, once the endpoint is back, runs only what was left. The same for ``rap citecast
run``; Ctrl-C says what was kept and how to resume. Each run here is a real ``rap`` process
against the package's scripted server (a real process where it is killed).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fake_openai import FakeOpenAIClient, completion

from rap_benchmark.agents.store import RunStore
from rap_benchmark.llmclient.endpoints import EndpointPool, call_with_failover, classify
from rap_benchmark.llmclient.failures import BackendFailure
from rap_benchmark.llmclient.health import EndpointDown, GiveUp, Health

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
STOP_WITHIN_S = 120  # the bound: a dead endpoint stops the run within 2 minutes

# (command words before the instance, the instance fixture, selection flags, units selected, unit word)
CASES = {
    "rap run": (["run"], "mini_dir", ["--conditions", "A0"], 60, "units"),
    "rap citecast run": (["citecast", "run"], "citecast_embedded_dir", ["--split", "test"], 30, "tasks"),
}


# -- the client: retry notes and the give-up rule -------------------------------------------------


def _refused() -> openai.APIConnectionError:
    exc = openai.APIConnectionError(request=httpx.Request("POST", "http://a/v1/chat/completions"))
    exc.__cause__ = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")
    return exc


def test_a_refused_connection_is_named_so_even_when_the_sdk_calls_it_a_timeout() -> None:
    """Regression: the SDK's aiohttp transport reports a refused connection as "Request timed
    out.", which the run then repeated as the last error of a server that was simply down."""
    timeout = openai.APITimeoutError(request=httpx.Request("POST", "http://a/v1/chat/completions"))
    timeout.__cause__ = ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 9)")
    assert classify(timeout) == (True, None, "connection refused: Connect call failed ('127.0.0.1', 9)")
    assert classify(_refused())[2] == "connection refused: Connect call failed ('127.0.0.1', 9)"
    plain = openai.APITimeoutError(request=httpx.Request("POST", "http://a/v1/chat/completions"))
    assert classify(plain) == (True, None, "timeout: Request timed out.")


def test_the_pool_gives_up_after_requests_in_a_row_fail_and_an_answer_resets_the_count() -> None:
    outcomes = iter([_refused(), completion(content="ok"), _refused(), _refused(), _refused()])
    pool = EndpointPool(
        "http://a/v1", client_factory=lambda url: FakeOpenAIClient(lambda kw: next(outcomes)), give_up=GiveUp(2, 1e9)
    )
    kwargs: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "x"}]}

    async def call() -> str:
        try:
            await call_with_failover(pool, kwargs, max_attempts=1, backoff=lambda n: 0.0)
        except BackendFailure as exc:
            return f"{type(exc).__name__}: {exc}"
        return "answered"

    async def go() -> list[str]:
        return [await call() for _ in range(5)]

    got = asyncio.run(go())
    refused = "connection refused: Connect call failed ('127.0.0.1', 9)"
    down = (
        f"EndpointDown: http://a/v1 stopped answering (2 requests in a row failed every attempt; last error: {refused})"
    )
    assert got == [f"BackendFailure: {refused}", "answered", f"BackendFailure: {refused}", down, down]
    assert pool.retrying() == f"retrying http://a/v1 ({refused})"


def test_the_retry_note_counts_down_and_the_time_limit_gives_up_before_a_try_that_would_pass_it() -> None:
    now = [100.0]
    health = Health(GiveUp(requests=99, seconds=10), clock=lambda: now[0])
    assert health.note() is None
    health.attempt_failed("http://a/v1", "HTTP 503: busy", next_try=102.0)
    assert health.note() == "retrying http://a/v1 (HTTP 503: busy); next try in 2 s"
    assert health.note(not_before=104.5) == "retrying http://a/v1 (HTTP 503: busy); next try in 5 s"  # it rests
    now[0] = 103.0
    assert health.note() == "retrying http://a/v1 (HTTP 503: busy); trying again"
    health.answered()
    assert health.note() is None and health.down is None
    health.attempt_failed("http://a/v1", "timeout: Request timed out.", next_try=106.0)
    now[0] = 106.0
    health.attempt_failed("http://b/v1", "connection refused: x", next_try=114.0)  # 11 s after the first failure
    assert health.down == (
        "http://a/v1, http://b/v1 stopped answering (no answer for 3 s, and the next try comes after the 10 s "
        "limit; last error: connection refused: x)"
    )
    with pytest.raises(EndpointDown, match="stopped answering") as caught:
        health.check()
    assert caught.value.exit_status == 75
    health.answered()  # a late answer does not take the verdict back: the callers are stopping
    assert health.down is not None


def test_the_llm_instrument_says_it_is_retrying_then_stops_naming_the_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: ``rap build --instrument llm`` against a dead endpoint sat at 0 units for 3
    minutes, then said ``no endpoint answered after 9 tries (last: timeout: Request timed out.);
    rerun the same command to resume`` (exit 2), naming neither the endpoint nor the refusal."""
    from rap_benchmark.llmclient.pricing import load_prices
    from rap_benchmark.pipeline.instrument.llm.client import EndpointsFailed, LLMClient, run_all
    from rap_benchmark.pipeline.instrument.llm.store import RequestStore

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"

    async def go(store: RequestStore) -> None:
        async with LLMClient([url], store, load_prices(), max_transport_retries=3) as client:
            ask = [lambda: client.complete("field_name", "m", [{"role": "user", "content": "x"}], 10)]
            await run_all(client, ask, 1, desc="llm field_name")

    with RequestStore(tmp_path / "store") as store, pytest.raises(EndpointsFailed) as caught:
        asyncio.run(go(store))
    refused = f"connection refused: Connect call failed ('127.0.0.1', {port})"
    assert str(caught.value) == (
        f"no answer from {url} after 4 tries (last error: {refused}); the 0 answers so far are kept in {tmp_path / 'store'}"
    )
    assert caught.value.exit_status == 75  # the CLI adds the command that resumes
    assert f"retrying {url} ({refused})" in capsys.readouterr().err  # shown while the endpoint rests


# -- the stock CLI against a real server process --------------------------------------------------


def start_server(log: Path, port: int = 0) -> tuple[subprocess.Popen[str], str]:
    """The scripted server as a process on ``port`` (0: any free one); (process, its /v1 URL)."""
    cmd = [sys.executable, "-m", "rap_benchmark.testing.scripted_server", "--port", str(port), "--log", str(log)]
    proc = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()  # type: ignore[union-attr]
    assert url.startswith("http://127.0.0.1:"), f"the scripted server did not start on port {port}"
    return proc, url


def wait_until_done(store: RunStore, n: int, proc: subprocess.Popen[Any], timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while sum(e["event"] == "done" for e in store.events()) < n:
        assert proc.poll() is None, "the run ended before it could be stopped; slow it down"
        assert time.monotonic() < deadline, f"fewer than {n} units done in {timeout_s} s"
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be stopped; slow it down"


def message_lines(stderr: str) -> list[str]:
    """stderr without its progress-bar frames (``units: ...``, redrawn after carriage returns)."""
    return [s for s in re.split(r"[\r\n]+", stderr) if s.strip() and not s.startswith("units:")]


def done_units(store: RunStore) -> set[str]:
    return {r["unit_id"] for r in store.iter_units() if r["valid"]}


def predictions(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]


def rap_argv(kind: str, instance: Path, url: str, *extra: str) -> list[str]:
    words, _, select, _, _ = CASES[kind]
    return [*words, str(instance), *select, "--backend", "openai", "--model", "scripted", "--base-url", url,
            "--concurrency", "2", "--request-delay", "0.05", "--out", "run", *extra]  # fmt: skip


@pytest.mark.parametrize("kind", list(CASES))
def test_a_killed_endpoint_stops_the_run_in_one_line_and_the_same_command_finishes_what_was_left(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    _, fixture, _, n_units, what = CASES[kind]
    instance = request.getfixturevalue(fixture)
    server, url = start_server(tmp_path / "served-1.log")
    argv = rap_argv(kind, instance, url, "--backoff", "0.1", "--give-up-after-s", "3")
    store = RunStore(tmp_path / "run")
    with (tmp_path / "err-1.txt").open("w+") as err:
        try:
            run = subprocess.Popen(
                [sys.executable, "-m", "rap_benchmark", *argv],
                cwd=tmp_path,
                env=ENV,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            wait_until_done(store, 5, run)
            server.kill()  # the endpoint dies mid-run
            server.wait()
            assert run.wait(timeout=STOP_WITHIN_S) == 75
        finally:
            server.kill()
        err.seek(0)
        stderr = err.read()
    kept = done_units(store)
    assert 5 <= len(kept) < n_units
    # the progress line said it was retrying, naming the endpoint; then one line said why it stopped
    assert re.search(rf"retrying {re.escape(url)} \(connection (refused|reset|error)", stderr), stderr[-3000:]
    lines = message_lines(stderr)
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rf"{kind}: {re.escape(url)} stopped answering \(.+; last error: connection (refused|reset|error).*\); "
        rf"{len(kept)} of {n_units} {what} done, kept in run/predictions\.jsonl; "
        rf"the same command resumes: {re.escape(shlex.join(['rap', *argv]))}",
        lines[0],
    ), lines[0]
    assert {r["valid"] for r in predictions(tmp_path / "run")} <= {True, False}
    assert sum(r["valid"] for r in predictions(tmp_path / "run")) == len(kept)  # the finished units, scorable

    n_events = len(store.events())
    server, _ = start_server(tmp_path / "served-2.log", port=int(url.rsplit(":", 1)[1].split("/")[0]))
    try:  # the endpoint is back: the same command finishes what was left, and only that
        proc = subprocess.run(
            [sys.executable, "-m", "rap_benchmark", *argv], cwd=tmp_path, env=ENV, capture_output=True, text=True,
            timeout=STOP_WITHIN_S,
        )  # fmt: skip
    finally:
        server.kill()
        server.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    started_again = {e["unit_id"] for e in store.events()[n_events:] if e["event"] == "start"}
    assert not started_again & kept, "a unit finished before the stop was run again"
    assert started_again | kept == done_units(store) and len(done_units(store)) == n_units
    assert len(predictions(tmp_path / "run")) == n_units and all(r["valid"] for r in predictions(tmp_path / "run"))


@pytest.mark.parametrize("kind", list(CASES))
def test_ctrl_c_says_what_was_kept_and_the_command_that_resumes(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Regression: Ctrl-C printed ``rap run: interrupted``, no count, no resume command, and no
    predictions.jsonl for the units it had finished."""
    from rap_benchmark.testing.scripted_server import ScriptedApp, ServerThread

    _, fixture, _, n_units, what = CASES[kind]
    instance = request.getfixturevalue(fixture)
    store = RunStore(tmp_path / "run")
    with ServerThread(ScriptedApp()) as srv:
        argv = rap_argv(kind, instance, srv.url, "--no-progress")
        run = subprocess.Popen(
            [sys.executable, "-m", "rap_benchmark", *argv], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )  # fmt: skip
        wait_until_done(store, 5, run)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    kept = done_units(store)
    assert 5 <= len(kept) < n_units
    assert err.splitlines() == [
        f"{kind}: interrupted; {len(kept)} of {n_units} {what} done, kept in run/predictions.jsonl; "
        f"the same command resumes: {shlex.join(['rap', *argv])}"
    ]
    assert out == ""
    rows = predictions(tmp_path / "run")
    assert sum(r["valid"] for r in rows) == len(kept)
