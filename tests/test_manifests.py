"""Golden manifests: the shipped instances rebuild to exactly the committed SHA256SUMS.

A failure means something changed what an instance contains. If that is intended, bump
``BENCHMARK_VERSION`` (an instance whose contents did not change pins its old version in its
spec), add a changelog entry in cards/CHANGELOG.md and run
``python dataset_scripts/refresh_manifests.py`` (with ``--arxiv-sample`` for the real sample).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rap_benchmark.core.artifacts import LEDGER_FILE
from rap_benchmark.core.spec import spec_for
from rap_benchmark.core.sums import SUMS_FILE

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests"


def _diff(built: Path, name: str) -> list[str]:
    want = dict(line.split("  ", 1)[::-1] for line in (MANIFESTS / name / SUMS_FILE).read_text().splitlines())
    got = dict(line.split("  ", 1)[::-1] for line in (built / SUMS_FILE).read_text().splitlines())
    return [f for f in sorted(set(want) | set(got)) if want.get(f) != got.get(f)]


def test_mini_rebuilds_to_the_committed_manifest(mini_dir: Path) -> None:
    changed = _diff(mini_dir, "mini")
    assert not changed, f"mini differs from manifests/mini in {changed} (see this file's docstring)"


@pytest.mark.slow
def test_arxiv_sample_rebuilds_to_the_committed_manifest(arxiv_sample_dir: Path) -> None:
    if not (MANIFESTS / "arxiv-sample" / SUMS_FILE).is_file():
        pytest.fail("manifests/arxiv-sample is missing: run dataset_scripts/refresh_manifests.py --arxiv-sample")
    changed = _diff(arxiv_sample_dir, "arxiv-sample")
    assert not changed, f"arxiv-sample differs from manifests/arxiv-sample in {changed}"


@pytest.mark.parametrize("name", ["mini", "arxiv-sample"])
def test_committed_ledgers_carry_the_benchmark_version(name: str) -> None:
    ledger = json.loads((MANIFESTS / name / LEDGER_FILE).read_text())
    assert ledger["benchmark_version"] == spec_for(name).version
    assert ledger["spec"]["name"] == name
