"""Shared fixtures: the embedded ``mini`` instance (built once per session) and the real arXiv
sample (skipped when ``../shared/data/arxiv`` is absent)."""

from __future__ import annotations

import os
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
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    for attr in ("_rap_hf_home", "_rap_cache"):
        folder = getattr(config, attr, None)
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """The README contract (tests/test_readme.py): blocks run, skipped with their reasons, failed.
    Read from the test report's properties, so that it also arrives from a pytest-xdist worker."""
    for reports in terminalreporter.stats.values():
        for rep in reports:
            for key, value in getattr(rep, "user_properties", None) or ():
                if key == "readme_contract":
                    terminalreporter.section("README contract")
                    terminalreporter.write_line(str(value))
                    return


ARXIV_GROUP = "arxiv_sample"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``), every test on the real arXiv sample runs on one worker,
    in collection order: the session's arxiv-sample build happens once, and the later builds of
    the same data (the living parent) label with the instrument it cached instead of refitting."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "arxiv_sample_dir" in names or item.get_closest_marker("shared_data") is not None:
            item.add_marker(pytest.mark.xdist_group(ARXIV_GROUP))


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
