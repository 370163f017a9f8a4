"""Full-size build rehearsal with no GPU: synthetic snapshot -> offline build -> LLM instrument.

Steps (each heavy step in its own process, through the stock ``rap build`` CLI):

1. write a synthetic arXiv metadata snapshot in the real JSON-lines format
   (``tests/arxiv_snapshot.py``; ``--scale 1`` = 2.4M records, 356,357 in frame);
2. ``read_s``: read and filter it (``read_corpus``);
3. the offline full build (``rap build --spec ... --source ...``): ``offline_build_s`` and its
   peak RSS (``offline_peak_rss_gib``);
4. a scripted OpenAI-compatible server on loopback (several uvicorn processes, 5xx and torn
   JSON bodies and invalid replies injected); ``rap build --instrument llm`` against it:
   ``llm_requests`` sent and ``llm_requests_per_s`` over the LLM pipeline's wall time (client and
   server share the cores), the whole instrument's CPU per request (prompts, validation, store:
   ``llm_pipeline_cpu_ms_per_request``) and ``truncated_replies``; then the one OpenAI-compatible
   client alone (llmclient/endpoints.py: the openai SDK) sends ``CLIENT_REQUESTS`` instrument requests
   to the same server, 64 in flight: ``llm_client_cpu_ms_per_request`` is its CPU per request (a
   real endpoint answers in seconds, so this is what the client adds to each);
5. ``rap build --instrument llm --dry-run`` on a fresh store: ``dry_run_token_error`` =
   |estimated - actual tokens| / actual;
6. the same LLM build into a new store, SIGKILLed when half of the requests are answered (the
   server also injects timeouts now), then resumed: ``resume_lost_requests`` = answered
   requests durable in the store at the kill that the server received again after the resume;
   ``resume_identical`` = the resumed instance's SHA256SUMS (and review file) equal the
   uninterrupted one's.

Ends with ONE JSON line (``phases_s``: each phase's wall seconds, also printed to stderr as it
ends; ``phases_cpu_s``: the CPU seconds its child processes used, which the load does not
inflate). Targets (2 cores): offline build <= 30 min at <= 8 GiB; client CPU <= 2 ms per request;
0 lost; identical; dry-run error <= 5%.

    python benchmarks/full_build.py --scale 0.02     # a few minutes
    python benchmarks/full_build.py                  # the paper's scale
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # this checkout's package, not an installed one
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
RAP = [sys.executable, "-m", "rap_benchmark"]
CLIENT_REQUESTS = 2000
PHASES: dict[str, float] = {}  # phase -> wall seconds, in the order run (the JSON line's phases_s)
PHASES_CPU: dict[str, float] = {}  # phase -> CPU seconds of the child processes that ended in it


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


class _phase:
    """Time one phase: its wall seconds go to PHASES, the CPU seconds of the child processes that
    ended in it to PHASES_CPU (on shared cores the wall time says more about the load than about
    the code), and a line to stderr (so a long run shows progress)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self) -> None:
        self.t, self.cpu = time.perf_counter(), _children_cpu()
        print(f"{time.strftime('%H:%M:%S')} {self.name} ...", file=sys.stderr, flush=True)

    def __exit__(self, *exc: object) -> None:
        PHASES[self.name] = round(time.perf_counter() - self.t, 1)
        PHASES_CPU[self.name] = round(_children_cpu() - self.cpu, 1)
        print(
            f"{time.strftime('%H:%M:%S')} {self.name} {PHASES[self.name]} s (CPU {PHASES_CPU[self.name]} s)",
            file=sys.stderr,
            flush=True,
        )


def _spec(scale: float, path: Path) -> None:
    from rap_benchmark.core.spec import BenchmarkSpec

    spec = BenchmarkSpec().replace(
        name="full-rehearsal",
        n_fields=max(6, round(278 * scale)),
        min_field_papers=max(40, round(200 * min(1.0, scale * 5))),
        n_dev_seed_fields=max(1, round(38 * scale)),
    )
    data = spec.to_dict()
    data["_why"] = f"The paper's spec scaled to a {scale}x synthetic snapshot (benchmarks/full_build.py)."
    path.write_text(json.dumps(data, indent=1, sort_keys=True))


def _run(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(cmd, env=ENV, text=True, capture_output=True, **kw)  # type: ignore[call-overload]
    if res.returncode != 0:
        sys.stderr.write(res.stdout[-3000:] + res.stderr[-3000:])
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}")
    return res


_READ = """
import json, resource, sys, time
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.corpus import read_corpus
spec = BenchmarkSpec.from_json(sys.argv[1])
t = time.perf_counter()
papers, report = read_corpus(sys.argv[2], spec)
print(json.dumps({"read_s": time.perf_counter() - t, "n_read": report.n_read, "in_frame": len(papers)}))
"""

_TIMED = """
import resource, runpy, sys, time
sys.argv = ["rap", *sys.argv[1:]]
t = time.perf_counter()
try:
    runpy.run_module("rap_benchmark", run_name="__main__")
except SystemExit as exc:
    if exc.code:
        raise
print("TIMED", time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, flush=True)
"""


def _timed(args: list[str]) -> tuple[float, float]:
    out = _run([sys.executable, "-c", _TIMED, *args]).stdout
    line = next(x for x in out.splitlines() if x.startswith("TIMED"))
    _, secs, rss_kib = line.split()
    return float(secs), int(rss_kib) / 2**20


def _server(args: list[str], log: Path) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "rap_benchmark.testing.scripted_server", "--log", str(log), *args]
    proc = subprocess.Popen(cmd, env=ENV, text=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit("the scripted server did not start")
    return proc, url


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _llm_args(spec: Path, snap: Path, out: Path, store: Path, url: str, timeout_s: float) -> list[str]:
    return [
        "build", "--spec", str(spec), "--source", str(snap), "--out", str(out), "--quiet",
        "--instrument", "llm", "--base-url", url, "--model", "scripted-main",
        "--draft-models", "scripted-a,scripted-b", "--llm-store", str(store), "--timeout-s", str(timeout_s),
    ]  # fmt: skip


_CLIENT = """
import asyncio, json, sys, time
from rap_benchmark.llmclient.endpoints import EndpointPool, call_with_failover
url, n = sys.argv[1], int(sys.argv[2])
prompt = "# Task: label papers against a frozen codebook\\n" + "\\n".join(
    f"[2401.{i:05d}] A study of streaming speech recognition, part {i} -- " + "We study it. " * 30 for i in range(8))

async def main():
    pool = EndpointPool(url, timeout_s=60.0, max_in_flight=64)
    sem = asyncio.Semaphore(64)
    async def one(i):
        kwargs = {"model": "m", "messages": [{"role": "user", "content": prompt}], "temperature": 0.0,
                  "max_tokens": 420 + i}
        async with sem:
            return await call_with_failover(pool, kwargs, max_attempts=3, backoff=lambda a: 0.01)
    await asyncio.gather(*(one(-1 - i) for i in range(50)))  # warm: connections open
    cpu, wall = time.process_time(), time.perf_counter()
    done = await asyncio.gather(*(one(i) for i in range(n)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await pool.aclose()
    assert all(r.choices[0].message.content for r, _ in done)
    print(json.dumps({"cpu_ms": 1000 * cpu / n, "per_s": n / wall}))

asyncio.run(main())
"""


def _client_cpu(url: str) -> dict[str, float]:
    """The one client's own CPU per request, in a process of its own (the server in another)."""
    return json.loads(_run([sys.executable, "-c", _CLIENT, url, str(CLIENT_REQUESTS)]).stdout)


def _dry_run_tokens(args: list[str]) -> int:
    out = _run([*RAP, *args, "--dry-run"]).stdout
    row = next(x for x in out.splitlines() if x.startswith("total"))
    cells = row.split()
    return int(cells[4].replace(",", "")) + int(cells[5].replace(",", ""))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=float, default=1.0, help="1.0 = the paper's scale (2.4M records)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--workdir", help="keep the files here (default: a temporary folder, removed)")
    p.add_argument("--server-workers", type=int, default=2)
    p.add_argument("--skip-llm", action="store_true", help="snapshot, read and offline build only (LLM keys null)")
    p.add_argument("--skip-offline", action="store_true", help="snapshot and LLM parts only (read/offline keys null)")
    args = p.parse_args()
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="rap-full-build-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = rehearse(work, args.scale, args.seed, args.server_workers, args.skip_llm, args.skip_offline)
    finally:
        if not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, sort_keys=False))
    return 0


def rehearse(
    work: Path, scale: float, seed: int, server_workers: int, skip_llm: bool = False, skip_offline: bool = False
) -> dict[str, object]:
    snap = work / f"snapshot-{scale}-{seed}.jsonl"
    if not snap.exists():
        with _phase("snapshot"):
            out = _run([sys.executable, str(REPO / "tests" / "arxiv_snapshot.py"), "--scale", str(scale),
                        "--seed", str(seed), "--out", str(snap)]).stdout  # fmt: skip
        (work / f"{snap.name}.counts").write_text(out)
    counts = json.loads((work / f"{snap.name}.counts").read_text())
    spec = work / "spec.json"
    _spec(scale, spec)

    if skip_offline:
        read, offline_s, offline_rss = {"read_s": None}, None, None
    else:
        with _phase("read"):
            read = json.loads(_run([sys.executable, "-c", _READ, str(spec), str(snap)]).stdout)
        assert read["n_read"] == counts["records"] and read["in_frame"] == counts["in_frame"], (read, counts)
        with _phase("offline_build"):
            offline_s, offline_rss = _timed(["build", "--spec", str(spec), "--source", str(snap), "--out",
                                             str(work / "offline"), "--quiet", "--no-cache"])  # fmt: skip

    offline = {
        "scale": scale,
        "snapshot_records": counts["records"],
        "in_frame": counts["in_frame"],
        "read_s": None if read["read_s"] is None else round(read["read_s"], 2),
        "offline_build_s": None if offline_s is None else round(offline_s, 2),
        "offline_peak_rss_gib": None if offline_rss is None else round(offline_rss, 3),
    }
    if skip_llm:
        keys = (
            "llm_requests",
            "llm_requests_per_s",
            "llm_pipeline_cpu_ms_per_request",
            "llm_client_cpu_ms_per_request",
            "truncated_replies",
            "resume_lost_requests",
            "resume_identical",
            "dry_run_token_error",
        )
        return {**offline, **dict.fromkeys(keys), "phases_s": PHASES, "phases_cpu_s": PHASES_CPU}
    clean = ["--workers", str(server_workers), "--error-rate", "0.01", "--malformed-rate", "0.01",
             "--invalid-rate", "0.02", "--seed", "1"]  # fmt: skip
    proc, url = _server(clean, work / "served-a.log")
    try:
        for d in ("llm-a", "llm-a.store"):
            shutil.rmtree(work / d, ignore_errors=True)
        with _phase("llm_build"):
            _run([*RAP, *_llm_args(spec, snap, work / "llm-a", work / "llm-a.store", url, 30.0)])
        with _phase("client_cpu"):
            client = _client_cpu(url)
    finally:
        _stop(proc)
    summary = json.loads((work / "llm-a.store" / "summary.json").read_text())
    stages = summary["stages"].values()
    sent = sum(s["sent"] for s in stages)
    actual_tokens = sum(s["prompt_tokens"] + s["completion_tokens"] for s in stages)
    shutil.rmtree(work / "dry.store", ignore_errors=True)
    with _phase("dry_run"):
        estimated = _dry_run_tokens(_llm_args(spec, snap, work / "dry", work / "dry.store", "http://unused/v1", 30.0))

    faulty = [*clean, "--timeout-rate", "0.002", "--hang-s", "3"]
    log = work / "served-b.log"
    log.unlink(missing_ok=True)
    proc, url = _server(faulty, log)
    try:
        for d in ("llm-b", "llm-b.store"):
            shutil.rmtree(work / d, ignore_errors=True)
        b_args = _llm_args(spec, snap, work / "llm-b", work / "llm-b.store", url, 1.0)
        half = (work / "llm-a.store" / "requests.jsonl").stat().st_size // 2
        with _phase("llm_build_killed"):
            child = subprocess.Popen([*RAP, *b_args], env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            requests_file = work / "llm-b.store" / "requests.jsonl"
            while child.poll() is None and (not requests_file.exists() or requests_file.stat().st_size < half):
                time.sleep(0.02)
            child.send_signal(signal.SIGKILL)
            killed = child.wait() == -signal.SIGKILL
        from rap_benchmark.pipeline.instrument.llm.store import RequestStore

        with RequestStore(work / "llm-b.store") as st:
            durable = set(st.records)
        served_before = len(log.read_text().splitlines())
        with _phase("llm_build_resumed"):
            _run([*RAP, *b_args])
        resent = set(log.read_text().splitlines()[served_before:]) & durable
    finally:
        _stop(proc)
    identical = all(
        (work / a / name).read_bytes() == (work / b / name).read_bytes()
        for a, b, name in (("llm-a", "llm-b", "SHA256SUMS"), ("llm-a.store", "llm-b.store", "review.md"))
    )
    return {
        **offline,
        "llm_requests": sent,
        "llm_requests_per_s": round(sent / summary["wall_s"], 1),
        "llm_pipeline_cpu_ms_per_request": round(1000 * summary["client_cpu_s"] / sent, 3),
        "llm_client_cpu_ms_per_request": round(client["cpu_ms"], 3),
        "llm_client_requests_per_s": round(client["per_s"], 1),
        "truncated_replies": summary["truncated_replies"],
        "resume_killed_mid_run": killed,
        "resume_durable_at_kill": len(durable),
        "resume_lost_requests": len(resent),
        "resume_identical": identical,
        "dry_run_token_error": round(abs(estimated - actual_tokens) / actual_tokens, 4),
        "phases_s": PHASES,
        "phases_cpu_s": PHASES_CPU,
    }


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.exit(main())
