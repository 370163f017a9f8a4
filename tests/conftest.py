"""Shared fixtures: the embedded ``mini`` instance (built once per session) and the real arXiv
sample (skipped when ``../shared/data/arxiv`` is absent)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_ARXIV = Path(os.environ.get("RAP_SHARED_ARXIV", REPO.parent / "shared" / "data" / "arxiv"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# OpenMP threads (torch, in-process and in the lm-eval subprocess) sleep instead of spinning while
# they wait. Set before anything loads libgomp. On a loaded 2-core machine a SmolLM2 answer turn
# took 51 s of CPU (192 s wall) with spinning threads and 12.6 s (51 s wall) without.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_configure(config: pytest.Config) -> None:
    """Never touch the network or the user's Hugging Face cache from tests.

    Set before collection: test modules import ``datasets`` at import time, and ``datasets`` reads
    its cache location then (a session fixture came too late, so tests shared the user's
    ``~/.cache/huggingface/datasets`` and could read another run's stale tables)."""
    import tempfile

    if "HF_HOME" not in os.environ:
        os.environ["HF_HOME"] = config._rap_hf_home = tempfile.mkdtemp(prefix="rap-test-hf-home-")  # type: ignore[attr-defined]
    if "RAP_CACHE_DIR" not in os.environ:  # the session's builds share fitted instruments, never the user's
        os.environ["RAP_CACHE_DIR"] = config._rap_cache = tempfile.mkdtemp(prefix="rap-test-cache-")  # type: ignore[attr-defined]
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist): workers inherit it
        os.environ[GROUPS_ENV] = config._rap_groups = tempfile.mkdtemp(prefix="rap-test-groups-")  # type: ignore[attr-defined]
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    # The session writes Python's bytecode caches (__pycache__, gitignored), even where
    # PYTHONDONTWRITEBYTECODE is set, as many container images do: otherwise each of the suite's
    # Python subprocesses (every `rap` command, server worker and the README's commands) compiled
    # the package anew, and the README's fresh venv compiled pandas, numpy and pyarrow on every
    # command. It changes only whether a cache is kept, never what runs. Set before the xdist
    # workers start, so that they and every subprocess inherit it.
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    for attr in ("_rap_hf_home", "_rap_cache", "_rap_groups"):
        folder = getattr(config, attr, None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The README contract (tests/test_readme.py): blocks run, skipped with their reasons, failed.
    Read from the test report's properties, so that it also arrives from a pytest-xdist worker.
    Before it, if any: the xdist groups that ran on more than one worker (:func:`pytest_sessionfinish`)."""
    split = getattr(config, "_rap_split_groups", None)
    if split:
        terminalreporter.section("xdist groups split over workers", red=True)
        for group, workers in split.items():
            terminalreporter.write_line(f"{group}: ran on {', '.join(workers)} (its session fixtures ran on each)")
    for reports in terminalreporter.stats.values():
        for rep in reports:
            for key, value in getattr(rep, "user_properties", None) or ():
                if key == "readme_contract":
                    terminalreporter.section("README contract")
                    terminalreporter.write_line(str(value))
                    return


ARXIV_GROUP = "arxiv_sample"
# The test that pays the session's arxiv-sample build: it runs first in its group, and its own work
# after the build is a manifest comparison. Its pytest-timeout limit is a build's: 4 minutes on two
# idle cores, 16 on a loaded machine (where the board test that paid it before went past 900 s).
ARXIV_FIRST = "test_arxiv_sample_rebuilds_to_the_committed_manifest"
ARXIV_BUILD_TIMEOUT_S = 1800
GROUPS_ENV = "RAP_TEST_GROUPS"  # a folder: the workers write each test's group and slow mark there


def _group_of(item: pytest.Item) -> str | None:
    """The item's xdist group, named as pytest-xdist names it (several marks: sorted, joined by _)."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return "_".join(sorted(names)) or None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``), every test on the real arXiv sample runs on one worker,
    in collection order: the session's arxiv-sample build happens once, and the later builds of
    the same data (the living parent) label with the instrument it cached instead of refitting.

    The build is paid by ``ARXIV_FIRST``, moved to the first of the group's places. On an xdist
    worker, the groups and the slow tests also go to ``$RAP_TEST_GROUPS`` for
    :func:`pytest_xdist_make_scheduler`."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "arxiv_sample_dir" in names or item.get_closest_marker("shared_data") is not None:
            item.add_marker(pytest.mark.xdist_group(ARXIV_GROUP))
        if item.name == ARXIV_FIRST and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(ARXIV_BUILD_TIMEOUT_S))
    places = [k for k, item in enumerate(items) if _group_of(item) == ARXIV_GROUP]
    arxiv = sorted((items[k] for k in places), key=lambda item: item.name != ARXIV_FIRST)
    for k, item in zip(places, arxiv, strict=True):
        items[k] = item
    folder = os.environ.get(GROUPS_ENV)
    if hasattr(config, "workerinput") and folder:
        import json

        found = {
            "groups": {item.nodeid: g for item in items if (g := _group_of(item))},
            "slow": [item.nodeid for item in items if item.get_closest_marker("slow") is not None],
        }
        tmp = Path(folder) / f".collection-{config.workerinput['workerid']}.json"  # type: ignore[attr-defined]
        tmp.write_text(json.dumps(found), encoding="utf-8")
        os.replace(tmp, Path(folder) / "collection.json")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadgroup`` that reads the groups from the workers' collection, longest work first.

    pytest-xdist 3.8 tells the controller a test's group by appending ``@group`` to its node id;
    pytest 9.2's structured node ids ignore that write (pytest-dev/pytest-xdist#1386), so every
    group was spread over both workers: the arxiv sample was built on each, the README run twice.
    Here the workers write each test's group (see above) before they report their collection, and
    the scheduler reads it; an id that already carries ``@group`` is split as xdist does.

    The queue: the groups (largest first: each starts at once on a worker of its own), then the
    tests marked slow, then the rest, each in collection order; a minute-long test handed out
    last would leave one worker idle while the other finishes it."""
    if config.getvalue("dist") != "loadgroup" or not os.environ.get(GROUPS_ENV):
        return None
    import json

    from xdist.scheduler import LoadGroupScheduling

    path = Path(os.environ[GROUPS_ENV]) / "collection.json"

    class MarkedGroupScheduling(LoadGroupScheduling):
        found: dict | None = None
        ordered = False

        def _collection(self) -> dict:
            if self.found is None:  # first called once every worker has reported its collection
                self.found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
            return self.found

        def _split_scope(self, nodeid: str) -> str:
            return self._collection().get("groups", {}).get(nodeid) or super()._split_scope(nodeid)

        def _assign_work_unit(self, node) -> None:  # noqa: ANN001 - xdist's WorkerController
            if not self.ordered:
                self.ordered = True
                groups = set(self._collection().get("groups", {}).values())
                slow = set(self._collection().get("slow", ()))

                def rank(unit: tuple[str, dict[str, bool]]) -> tuple[int, int]:
                    scope, tests = unit
                    if scope in groups:
                        return (0, -len(tests))
                    return (1, 0) if slow & set(tests) else (2, 0)

                units = sorted(self.workqueue.items(), key=rank)
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return MarkedGroupScheduling(config, log)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """On the xdist controller: which workers ran each group (:func:`pytest_sessionfinish` checks one)."""
    node = getattr(report, "node", None)  # only reports that came from a worker have one
    if node is not None:
        _RAN_ON.setdefault(report.nodeid, set()).add(node.gateway.id)


_RAN_ON: dict[str, set[str]] = {}


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under ``--dist loadgroup``, a group that ran on two workers fails the run: its session
    fixtures (the arxiv-sample build, the README run) were paid twice, silently."""
    folder = os.environ.get(GROUPS_ENV)
    path = Path(folder) / "collection.json" if folder else None
    if not _RAN_ON or path is None or not path.is_file() or session.config.getvalue("dist") != "loadgroup":
        return
    import json

    workers: dict[str, set[str]] = {}
    for nodeid, group in json.loads(path.read_text(encoding="utf-8"))["groups"].items():
        workers.setdefault(group, set()).update(_RAN_ON.get(nodeid, ()))
    split = {g: sorted(w) for g, w in workers.items() if len(w) > 1}
    if split:
        session.config._rap_split_groups = split  # type: ignore[attr-defined]
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def mini_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rap_benchmark.core.spec import mini_spec
    from rap_benchmark.pipeline.build import build_instance

    out = tmp_path_factory.mktemp("mini") / "mini"
    build_instance(mini_spec(), out)
    return out


@pytest.fixture(scope="session")
def mini(mini_dir: Path):
    from rap_benchmark.core.artifacts import load_instance

    return load_instance(mini_dir)


@pytest.fixture(scope="session")
def citecast_embedded_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded CiteCast instance in its default configuration, built once per session (each
    CiteCast test file built its own): tests read it, and one that changes an instance copies it."""
    from rap_benchmark.citecast.embedded import build_embedded

    return build_embedded(tmp_path_factory.mktemp("citecast") / "embedded")


@pytest.fixture(scope="session")
def arxiv_sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SHARED_ARXIV.is_dir():
        pytest.skip(f"{SHARED_ARXIV} is absent")
    from rap_benchmark.core.spec import arxiv_sample_spec
    from rap_benchmark.pipeline.build import build_instance

    out = tmp_path_factory.mktemp("arxiv_sample") / "arxiv-sample"
    build_instance(arxiv_sample_spec(), out, source=SHARED_ARXIV)
    return out


@pytest.fixture(scope="session")
def arxiv_sample(arxiv_sample_dir: Path):
    from rap_benchmark.core.artifacts import load_instance

    return load_instance(arxiv_sample_dir)


@pytest.fixture(scope="session")
def arxiv_sample_baselines(arxiv_sample_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``rap baselines --tune-dev`` on the arxiv sample, run once: the report and the board read it."""
    from rap_benchmark.cli import main

    out = tmp_path_factory.mktemp("arxiv_sample_baselines") / "baselines.parquet"
    assert main(["baselines", str(arxiv_sample_dir), "--out", str(out), "--tune-dev"]) == 0
    return out
