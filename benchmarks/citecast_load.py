"""Load test of the CiteCast server on loopback: many concurrent task sessions over HTTP.

Starts ``rap citecast serve``'s app (uvicorn, 127.0.0.1 only) in a background thread, then runs
``--sessions`` task sessions concurrently (asyncio + httpx): start, two web_search calls, one
web_fetch, one submit_prediction with a session-specific prediction, a second submission that
must be refused (409), and a state read. Checks that no session is lost or mixed up (every
session's reward equals the reward of *its own* prediction against *its own* task's target,
computed here from the server-side task file) and prints latency percentiles per call type.
Bounded: at most 2,000 sessions and ``--timeout-s`` seconds overall.

    .venv/bin/python benchmarks/citecast_load.py                      # builds the embedded instance
    .venv/bin/python benchmarks/citecast_load.py --instance build/citecast --sessions 200
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rap_benchmark.citecast.env import CiteCastEnv  # noqa: E402
from rap_benchmark.citecast.reward import reward  # noqa: E402
from rap_benchmark.citecast.server import create_app  # noqa: E402

MAX_SESSIONS = 2000


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(env: CiteCastEnv, port: int):
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_app(env), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.05)
    return server, thread


async def one_session(http, i: int, task_id: str, title: str, lat: dict[str, list[float]]) -> dict:
    async def timed(kind: str, method: str, path: str, **kw):
        t0 = time.perf_counter()
        resp = await http.request(method, path, **kw)
        lat[kind].append(time.perf_counter() - t0)
        return resp

    r = await timed("start", "POST", f"/tasks/{task_id}/start")
    r.raise_for_status()
    sid = r.json()["session_id"]
    hits = (await timed("web_search", "POST", f"/sessions/{sid}/tools/web_search", json={"query": title})).json()
    await timed("web_search", "POST", f"/sessions/{sid}/tools/web_search", json={"query": f"{title} citations"})
    if hits["observation"]:
        await timed(
            "web_fetch", "POST", f"/sessions/{sid}/tools/web_fetch", json={"url": hits["observation"][0]["url"]}
        )
    prediction = i % 97  # session-specific, so a mixed-up session shows as a wrong reward
    sub = await timed(
        "submit",
        "POST",
        f"/sessions/{sid}/tools/submit_prediction",
        json={"prediction": prediction, "justification": f"s{i}"},
    )
    again = await timed(
        "submit_again",
        "POST",
        f"/sessions/{sid}/tools/submit_prediction",
        json={"prediction": prediction + 1, "justification": "x"},
    )
    state = (await timed("state", "GET", f"/sessions/{sid}")).json()
    return {
        "i": i,
        "task_id": task_id,
        "session_id": sid,
        "prediction": prediction,
        "reward": sub.json()["reward"],
        "second_status": again.status_code,
        "state": state,
    }


async def run_load(
    base_url: str, env: CiteCastEnv, n: int, timeout_s: float
) -> tuple[list[dict], dict[str, list[float]], float]:
    import httpx

    ids = env.task_ids()
    lat: dict[str, list[float]] = defaultdict(list)
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout_s) as http:
        t0 = time.perf_counter()
        jobs = [
            one_session(http, i, ids[i % len(ids)], env.tasks[ids[i % len(ids)]].paper.title, lat) for i in range(n)
        ]
        results = await asyncio.wait_for(asyncio.gather(*jobs), timeout=timeout_s)
        wall = time.perf_counter() - t0
    return list(results), lat, wall


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instance", type=Path, default=None, help="built instance (default: build the embedded one)")
    ap.add_argument("--sessions", type=int, default=64, help="concurrent task sessions (>= 50 recommended)")
    ap.add_argument("--timeout-s", type=float, default=300.0, help="overall bound on the load run")
    args = ap.parse_args(argv)
    n = min(args.sessions, MAX_SESSIONS)
    if args.instance is None:
        from rap_benchmark.citecast.embedded import build_embedded

        tmp = tempfile.mkdtemp(prefix="citecast_load_")
        print(f"building the embedded instance in {tmp} ...", file=sys.stderr)
        args.instance = build_embedded(Path(tmp) / "embedded")
    env = CiteCastEnv.from_instance(args.instance)
    env.warm()
    port = free_port()
    server, thread = start_server(env, port)
    try:
        results, lat, wall = asyncio.run(run_load(f"http://127.0.0.1:{port}", env, n, args.timeout_s))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    sids = {r["session_id"] for r in results}
    wrong = [
        r
        for r in results
        if r["reward"] != reward(r["prediction"], env.tasks[r["task_id"]].target)
        or r["state"]["session_id"] != r["session_id"]
        or r["state"]["task_id"] != r["task_id"]
        or r["state"]["prediction"] != r["prediction"]
        or r["state"]["reward"] != r["reward"]
    ]
    refused = sum(r["second_status"] == 409 for r in results)
    print(f"sessions: {len(results)} concurrent on 127.0.0.1:{port}; distinct session ids {len(sids)}")
    print(
        f"lost: {n - len(results)}  mixed-up: {len(wrong)}  second submissions refused (409): {refused}/{len(results)}"
    )
    total_calls = sum(len(v) for v in lat.values())
    print(f"wall {wall:.2f} s, {total_calls} requests, {total_calls / wall:.1f} req/s")
    print(f"{'call':<14}{'n':>6}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for kind in ("start", "web_search", "web_fetch", "submit", "submit_again", "state"):
        v = np.array(lat.get(kind, []), dtype=np.float64) * 1000
        if v.size:
            p50, p95, p99 = np.percentile(v, [50, 95, 99])
            print(f"{kind:<14}{v.size:>6}{p50:>10.1f}{p95:>10.1f}{p99:>10.1f}{v.max():>10.1f}")
    ok = len(results) == n and not wrong and refused == n and len(sids) == n
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
