"""Recorded replies: an LLM-built instance rebuilds offline, byte for byte, from the replies the
package ships, and a request without a recorded reply fails the build in one line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from rap_benchmark.core import resources
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.build import build_instance
from rap_benchmark.pipeline.instrument.llm import LLMInstrument, LLMSettings, PipelineConfig
from rap_benchmark.pipeline.instrument.llm.instrument import MissingReplies
from rap_benchmark.pipeline.instrument.llm.store import REQUESTS_FILE, read_requests, write_recorded
from rap_benchmark.testing.scripted_server import ScriptedApp, ServerThread

REPO = Path(__file__).resolve().parents[1]
CONFIG = PipelineConfig(
    model="scripted-main", draft_models=("scripted-main", "scripted-main"), construction="compact", label_batch=30
)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, BenchmarkSpec, Path, Path]:
    """A tiny snapshot built over HTTP by the compact construction, and its store recorded."""
    from arxiv_snapshot import write_snapshot

    tmp = tmp_path_factory.mktemp("replay")
    snap = tmp / "snapshot.jsonl"
    write_snapshot(snap, scale=0.002, seed=1, n_fields=3)
    spec = BenchmarkSpec().replace(name="tiny", n_fields=3, min_field_papers=40, n_dev_seed_fields=1)
    with ServerThread(ScriptedApp()) as srv:
        http = LLMInstrument(CONFIG, LLMSettings((srv.url,), tmp / "store"))
        build_instance(spec, tmp / "http", snap, instrument=http)
    records, _ = read_requests(tmp / "store" / REQUESTS_FILE)
    recorded = tmp / "tiny.jsonl.xz"
    write_recorded(list(records.values()), recorded)
    return snap, spec, tmp / "http", recorded


def test_recorded_replies_rebuild_the_instance_offline_byte_for_byte(tiny, tmp_path: Path) -> None:
    snap, spec, http, recorded = tiny
    replay = LLMInstrument(CONFIG, LLMSettings((), None, recorded=recorded))
    assert replay.replay
    out = build_instance(spec, tmp_path / "replayed", snap, instrument=replay)
    ledger_file = "FINAL_PARAMETER_LEDGER_V1.json"
    sums = lambda d: [ln for ln in (d / "SHA256SUMS").read_text().splitlines() if ledger_file not in ln]  # noqa: E731
    assert sums(out) == sums(http) and len(sums(out)) >= 7  # every table and the codebooks, byte for byte
    ledger, original = (json.loads((d / ledger_file).read_text()) for d in (out, http))
    entry = ledger["derived"].pop("instrument")
    assert entry.pop("replayed_from") == recorded.name and len(entry.pop("replies_sha256")) == 64
    assert entry == original["derived"].pop("instrument") and ledger == original  # the ledger says it was replayed
    assert entry["construction"] == "compact" and entry["compact"]["draft_A"]["held_out_papers"] > 0
    again = build_instance(spec, tmp_path / "again", snap, instrument=replay)
    assert (again / "SHA256SUMS").read_bytes() == (out / "SHA256SUMS").read_bytes()


def test_a_request_without_a_recorded_reply_fails_in_one_line_and_builds_nothing(tiny, tmp_path: Path) -> None:
    """A prompt or code change leaves requests without a reply: the build names how many and the
    command that writes them as a batch file, and never falls back to anything."""
    snap, spec, _, recorded = tiny
    other = PipelineConfig(**{**CONFIG.__dict__, "label_papers": 59})  # another label sample: new requests
    replay = LLMInstrument(other, LLMSettings((), None, recorded=recorded))
    with pytest.raises(MissingReplies) as err:
        build_instance(spec, tmp_path / "out", snap, instrument=replay)
    message = str(err.value)
    assert "\n" not in message and "requests of the compact construction (assign) have no recorded reply" in message
    assert "--instrument llm --batch" in message and not (tmp_path / "out").exists()


def test_the_package_ships_every_recorded_reply_file() -> None:
    """A non-editable install must carry the recorded replies: pyproject's package data covers them."""
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["rap_benchmark"]
    shipped = [p for p in (resources.DATA_DIR / "replies").glob("*") if p.is_file()]
    for path in shipped:
        rel = path.relative_to(resources.PACKAGE_DIR).as_posix()
        assert any(Path(rel).match(g) for g in data), f"{rel} is not package data"


def test_the_recorded_replies_answer_a_batch_build_whose_review_shows_every_draft(tiny, tmp_path: Path) -> None:
    """How a maintainer reads every draft of a shipped instance: ``--instrument llm --batch DIR``
    with nothing to ask. The recorded replies answer every request, so no batch file is written,
    the instance is the replayed one, and the store's review.md holds each field's drafts."""
    snap, spec, http, recorded = tiny
    settings = LLMSettings((), tmp_path / "store", batch_dir=tmp_path / "batch", recorded=recorded)
    out = build_instance(spec, tmp_path / "out", snap, instrument=LLMInstrument(CONFIG, settings))
    ledger_file = "FINAL_PARAMETER_LEDGER_V1.json"
    sums = lambda d: [ln for ln in (d / "SHA256SUMS").read_text().splitlines() if ledger_file not in ln]  # noqa: E731
    assert sums(out) == sums(http)
    assert not list((tmp_path / "batch").glob("*.input.jsonl"))  # nothing left to ask
    review = (tmp_path / "store" / "review.md").read_text(encoding="utf-8")
    fields = json.loads((out / "codebooks.json").read_text())
    assert review.count("### Draft A") >= len(fields) >= 1
    for field in fields:
        assert f"### Draft A: {field['name']}" in review
