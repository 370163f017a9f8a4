"""``rap citecast serve``: several worker processes behind one listening socket.

The supervisor verifies the instance, maps (building once) the search index, creates the session
store's schema, warms the kernels, binds the socket and forks ``workers`` processes that serve it
(:mod:`rap_benchmark.citecast.httpserver`). Workers share the mapped index through the page cache
and each connects to the one session store (SQLite in WAL mode, or Redis, which also lets several
machines share sessions), so any worker serves any session and a dead worker, replaced, loses none.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rap_benchmark.citecast.env import CiteCastEnv, Mode
from rap_benchmark.core.errors import InputError

RESPAWN_PAUSE_S = 0.5


@dataclass(frozen=True)
class ServeConfig:
    instance_dir: Path
    host: str = "127.0.0.1"
    port: int = 8765
    workers: int = 2
    store: str | None = None  # None: <instance>/.cache/sessions.sqlite3
    mode: Mode = Mode.TRAINING
    api_keys: Mapping[str, str] | None = None  # secret -> name
    session_ttl_s: float = 3600.0
    cache_dir: Path | None = None


def default_store(instance_dir: Path) -> str:
    return str(Path(instance_dir) / ".cache" / "sessions.sqlite3")


def parse_api_keys(text: str, source: str) -> dict[str, str]:
    """``name:secret`` entries, one per line or comma-separated (``#`` starts a comment) ->
    {secret: name}."""
    keys: dict[str, str] = {}
    for n, raw in enumerate(text.replace(",", "\n").splitlines(), 1):
        entry = raw.split("#", 1)[0].strip()
        if not entry:
            continue
        name, sep, secret = entry.partition(":")
        if not sep or not name.strip() or len(secret.strip()) < 8:
            raise InputError(f"{source} entry {n}: expected name:secret with a secret of 8+ characters")
        if secret.strip() in keys:
            raise InputError(f"{source} entry {n}: the same secret is given twice")
        keys[secret.strip()] = name.strip()
    return keys


def make_env_factory(cfg: ServeConfig) -> Callable[[], CiteCastEnv]:
    """Load and check everything once (in the supervisor); the returned factory builds a worker's
    environment from the loaded parts (cheap: the index is mapped, the store opens lazily)."""
    from rap_benchmark.citecast.instance import load_instance
    from rap_benchmark.citecast.stores import open_store

    inst = load_instance(cfg.instance_dir)
    view = inst.web_index(None, cfg.cache_dir)
    store_url = cfg.store or default_store(cfg.instance_dir)
    try:  # the schema, and a clear error now when the store is unreachable
        probe = open_store(store_url, ttl_s=cfg.session_ttl_s)
        probe.count()
        probe.close()
    except ImportError as exc:
        raise InputError(f"{exc} (pip install 'rap_benchmark[redis]' for a Redis store)") from exc
    except Exception as exc:  # noqa: BLE001 - sqlite3/redis errors: the store is the user's input
        raise InputError(f"session store {store_url}: {type(exc).__name__}: {exc}") from exc

    def factory() -> CiteCastEnv:
        store = open_store(store_url, ttl_s=cfg.session_ttl_s)
        return CiteCastEnv(inst.tasks, view, inst.cutoff, store=store, mode=cfg.mode)

    return factory


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    sock.set_inheritable(True)
    return sock


def serve(cfg: ServeConfig, *, ready: Callable[[socket.socket], None] | None = None) -> int:
    """Run the server until SIGINT/SIGTERM (blocking); returns the exit status."""
    factory = make_env_factory(cfg)
    factory().warm()  # compile the kernels once, before forking, so workers start warm
    try:
        sock = bind(cfg.host, cfg.port)
    except OSError as exc:
        raise InputError(f"cannot listen on {cfg.host}:{cfg.port}: {exc.strerror or exc}") from exc
    children: dict[int, int] = {}  # pid -> slot
    stopping = False

    supervisor = os.getpid()

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker
            code = 0
            try:
                # first: the supervisor's own handlers (stop) would swallow the SIGTERM that its death
                # sends, and a worker still starting would then serve on as an orphan
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                _die_with(supervisor)
                from rap_benchmark.citecast.httpserver import run
                from rap_benchmark.citecast.server import CiteCastApp

                run(CiteCastApp(factory(), cfg.api_keys), sock)
            except BaseException:  # noqa: BLE001 - a worker reports and exits; the supervisor respawns it
                import traceback

                traceback.print_exc()
                code = 1
            finally:
                os._exit(code)
        children[pid] = slot

    def stop(_signum, _frame) -> None:  # noqa: ANN001
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for slot in range(max(1, cfg.workers)):
        spawn(slot)
    host, port = sock.getsockname()[:2]
    print(
        f"citecast: {cfg.mode.value} mode, {max(1, cfg.workers)} workers on http://{host}:{port}"
        f" (pids {' '.join(map(str, children))})",
        file=sys.stderr,
        flush=True,
    )
    if ready is not None:
        ready(sock)
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries os.wait
            continue
        slot = children.pop(pid, None)
        if slot is None or stopping:
            continue
        print(f"citecast: worker {pid} exited ({_describe(status)}); starting a new one", file=sys.stderr, flush=True)
        time.sleep(RESPAWN_PAUSE_S)
        if not stopping:
            spawn(slot)
    sock.close()
    return 0


def _die_with(parent: int) -> None:
    """Linux: this worker gets SIGTERM when the supervisor dies, even by SIGKILL (no orphan keeps
    serving the port); elsewhere the supervisor's own SIGTERM handler stops the workers."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os._exit(0)


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"status {os.WEXITSTATUS(status)}"
