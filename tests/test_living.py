"""The living benchmark end to end (issue 17): cut the data at T = 2026-01-01, build with the
frozen instrument, extend with origin T (y pending), seal forecasts, resolve with the full data;
the resolved y equals the y of the parent's frozen instrument applied to the full data in one
pass, the parent's artifacts are untouched, and late or tampered reveals are refused.

The fast variant runs on a source corpus made of mini's papers; the slow one on arxiv-sample."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from sources import file_digests, write_source

from rap_benchmark.core.artifacts import Instance, load_instance
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.schemas import EPISODE_PENDING_FLAG as PENDING_FLAG
from rap_benchmark.pipeline.build import build_instance, normalise_assignments
from rap_benchmark.pipeline.extend import extend_instance, resolve_instance
from rap_benchmark.pipeline.instrument.frozen import instrument_hash, load, save

T = "2026-01-01"


def _one_pass_episodes(parent_dir: Path, full_source: Path, spec) -> pd.DataFrame:
    """The reference: the parent's frozen instrument applied to the whole data at once."""
    from rap_benchmark.pipeline.build import normalise_papers
    from rap_benchmark.pipeline.corpus import read_corpus
    from rap_benchmark.pipeline.episodes import episode_table

    papers, _ = read_corpus(full_source, spec)
    papers = normalise_papers(papers)
    assignments = normalise_assignments(load(parent_dir).label(papers), papers)
    blocks = load_instance(parent_dir).blocks
    return episode_table(assignments, blocks, dataclasses.replace(spec, origins=(T,)))


def run_simulation(
    all_papers: pd.DataFrame,
    spec,
    tmp: Path,
    seal_models: dict,
    *,
    relabel: bool = True,
    one_pass: bool = True,
    whole: Callable[[Path], Instance] | None = None,
) -> dict:
    """The issue's simulation. ``relabel=False`` skips relabelling the parent's papers with its
    frozen instrument (the fast variant always checks it; on arxiv-sample in a test session the
    parent is labelled by the instrument the session's build cached, so the check would compare
    that instrument with itself, at a minute of CPU).

    The resolved origin is compared, bit for bit, with the parent's frozen instrument applied to
    the whole data in one pass: :func:`_one_pass_episodes` (``one_pass``), and, when ``whole`` is
    given, ``whole(full_source)``: an instance built from the whole data with the same spec (the
    fast variant builds one after the parent, whose fit it finds cached; the arxiv-sample variant
    returns the session's build instead of labelling the sample once more).
    Its instrument is the parent's: the fit reads only papers dated before ``eligibility_end``
    (= T), which the cut and the whole data share (the instrument cache keys on exactly that),
    and a build labels with the instrument it fitted or found cached (the same bytes either way,
    ``tests/test_instrument_cache.py``). So the same equality says more: a resolved living
    version's new origin is what a fresh build of all the data gives."""
    cut = write_source(all_papers[all_papers["date"].astype(str) < T], tmp / "cut")
    full = write_source(all_papers, tmp / "full")
    parent_spec = spec.replace(origins=tuple(o for o in spec.origins if o < T), date_end=T)
    parent = build_instance(parent_spec, tmp / "v1", source=cut, freeze_instrument=True)
    before = file_digests(parent, skip=(".cache",))

    inst1 = load_instance(parent)
    if relabel:  # the frozen instrument reproduces the build's labels from the papers alone
        relabelled = normalise_assignments(load(parent).label(inst1.papers), inst1.papers)
        _same(relabelled, inst1.assignments)
    # saved again from what was loaded: the same bytes, so the same hash
    save(load(parent), tmp / "again")
    for name in ("instrument.json", "arrays.bin"):
        assert (tmp / "again" / "instrument" / name).read_bytes() == (parent / "instrument" / name).read_bytes()

    v2 = extend_instance(parent, cut, T, tmp / "v2")
    inst2 = load_instance(v2)
    new = inst2.episodes[inst2.episodes["origin"] == T]
    assert len(new) and all(PENDING_FLAG in f for f in new["flags"]) and new["y"].isna().all()
    assert inst2.ledger["derived"]["living"]["parent_manifest_hash"] == inst1.manifest_hash
    with pytest.raises(InputError, match="not covered yet"):
        resolve_instance(v2, cut)
    _pending_takes_no_retrospective_forecast(inst2)

    from rap_benchmark.evaluation.live import parse_stamp, read_seals, score_live, seal

    seals, reveals = [], []
    for name, (frame, sealed_at) in seal_models(inst2, tmp).items():
        from rap_benchmark.evaluation.predictions import write_predictions

        path = write_predictions(frame, tmp / "preds" / f"{name}.jsonl")
        meta = {"model": str(frame["model"].iloc[0]), "conditions": sorted(set(frame["condition"]))}
        meta["manifest_hash"] = inst2.manifest_hash
        Path(str(path) + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
        row, _ = seal(path, sealed_at=parse_stamp(sealed_at))
        seals.append(json.dumps(row))
        reveals.append(path)
    log = tmp / "seals.jsonl"
    log.write_text("\n".join(seals) + "\n")

    v3 = resolve_instance(v2, full, out=tmp / "v3")
    inst3 = load_instance(v3)
    assert file_digests(parent, skip=(".cache",)) == before, "the parent folder changed"
    for name in ("codebooks.json", "blocks.parquet", "instrument/instrument.json", "instrument/arrays.bin"):
        assert (v3 / name).read_bytes() == (parent / name).read_bytes()
    assert instrument_hash(v3) == instrument_hash(parent)
    for table in ("episodes", "search_manifest"):
        old = getattr(inst1, table).reset_index(drop=True)
        kept = getattr(inst3, table)
        kept = kept[kept["origin"].isin(set(old["origin"]))].reset_index(drop=True)
        _same(kept, old)
    _same(inst3.papers.iloc[: len(inst1.papers)].reset_index(drop=True), inst1.papers)

    refs = {}
    if one_pass:
        refs["one pass"] = _one_pass_episodes(parent, full, inst3.spec)
    if whole is not None:
        whole = whole(full)
        assert whole.spec.replace(origins=parent_spec.origins, date_end=T) == parent_spec, "not the parent's spec"
        _same(whole.blocks, inst1.blocks)  # the frozen blocks and split: pre-cutoff memberships only
        refs["whole build"] = whole.episodes[whole.episodes["origin"] == T].reset_index(drop=True)
    assert refs, "nothing to compare the resolved origin with"
    got = inst3.episodes[inst3.episodes["origin"] == T].reset_index(drop=True)
    for what, ref in refs.items():
        assert len(got) == len(ref), what
        for col in ("y", "y_counts", "n_y", "x", "history", "flags"):
            assert list(map(_plain, got[col])) == list(map(_plain, ref[col])), (what, col)  # bit for bit

    result = score_live(reveals, inst3, read_seals([log]), n_resamples=200)
    return {"result": result, "parent": inst1, "resolved": inst3, "reveals": reveals, "log": log}


def _pending_takes_no_retrospective_forecast(inst) -> None:
    """Rows for a pending episode are dropped with their own problem; coverage ignores them."""
    from rap_benchmark.evaluation.predictions import (
        ProblemKind,
        n_expected_episodes,
        validate_predictions,
    )
    from rap_benchmark.evaluation.scoring import baseline_predictions

    frame, _ = baseline_predictions(inst)
    assert T in set(frame["origin"])
    report = validate_predictions(frame[frame["model"] == "baseline/ewma"], inst)
    kinds = {p.kind for p in report.problems}
    assert ProblemKind.PENDING_EPISODE in kinds and ProblemKind.MISSING_EPISODES not in kinds
    assert T not in set(report.frame["origin"])
    n_fields = inst.blocks["field_id"].nunique()
    assert n_expected_episodes(inst, None) == n_fields * (len(inst.spec.origins) - 1)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for col in a.columns:
        assert list(map(_plain, a[col])) == list(map(_plain, b[col])), col


def _plain(v):
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return None
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def _seal_plan(inst, tmp: Path) -> dict:
    """EWMA, Recent and the search-hits reference agent (A1, run on the pending version: it never
    sees y) sealed before T; ARIMA sealed one second into T (too late for the live track)."""
    import rap_benchmark as rap
    from rap_benchmark.evaluation.predictions import read_predictions
    from rap_benchmark.evaluation.scoring import baseline_predictions

    # only the pending origin's episodes: the earlier ones are the parent's, and only T is sealed
    view = inst.public_view()
    _, agent = rap.run(view, "reference/search-hits", tmp / "run", conditions=[rap.Condition.A1], origins=[T])
    agent_rows = read_predictions(agent)
    assert set(agent_rows["origin"]) == {T}
    assert set(agent_rows["field_id"]) == set(view.episodes.loc[view.episodes["origin"] == T, "field_id"])

    frame, _ = baseline_predictions(inst)
    frame = frame[frame["origin"].astype(str) == T]
    pick = {m: frame[frame["model"] == m].reset_index(drop=True) for m in sorted(set(frame["model"]))}
    plan = {
        "ewma": (pick["baseline/ewma"], "2025-12-31T12:00:00Z"),
        "recent": (pick["baseline/recent"], "2025-12-31T12:00:00Z"),
        "arima": (pick["baseline/arima"], "2026-01-01T00:00:01Z"),
        "reference": (agent_rows, "2025-12-31T18:00:00Z"),
    }
    return plan


def _mini_living_data(mini):
    """The fast variant's data: 9,000 of mini's papers (to 2026-06-30) and a spec with six fields."""
    papers = mini.papers.sample(n=9000, random_state=5).sort_values(["date", "arxiv_id"])
    spec = mini.spec.replace(name="living-test", n_fields=6, min_field_papers=50, n_dev_seed_fields=2)
    return papers, spec


def test_living_on_mini_text(mini, tmp_path):
    papers, spec = _mini_living_data(mini)
    sim = run_simulation(
        papers,
        spec,
        tmp_path,
        _seal_plan,
        whole=lambda full: load_instance(build_instance(spec, tmp_path / "whole", full)),
    )
    verdicts = {Path(v.path).stem: v for v in sim["result"].verdicts}
    assert verdicts["ewma"].accepted and verdicts["recent"].accepted
    assert not verdicts["arima"].accepted and "not before origin 2026-01-01" in verdicts["arima"].message
    board = sim["result"].board
    assert verdicts["reference"].accepted
    assert set(board["model"]) == {"baseline/ewma", "baseline/recent", "reference/search-hits"}
    assert set(board["track"]) == {"Forecast-Live"}
    # a tampered reveal: one weight changed after sealing
    ewma = sim["reveals"][0]
    rows = [json.loads(line) for line in ewma.read_text().splitlines()]
    rows[0]["D0"] = rows[0]["D0"] + 0.001 if rows[0]["D0"] is not None else 0.5
    tampered = ewma.with_name("tampered.jsonl")
    tampered.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for suffix in (".salt.hex", ".meta.json"):
        Path(str(tampered) + suffix).write_bytes(Path(str(ewma) + suffix).read_bytes())
    from rap_benchmark.evaluation.live import read_seals, score_live

    (verdict,) = score_live([tampered], sim["resolved"], read_seals([sim["log"]])).verdicts
    assert not verdict.accepted and "matches no published commitment" in verdict.message


def test_extend_refuses_without_a_frozen_instrument(mini_dir, tmp_path):
    from rap_benchmark.core.errors import ArtifactError

    with pytest.raises(ArtifactError, match="freeze-instrument"):
        extend_instance(mini_dir, mini_dir, "2026-07-01", tmp_path / "v2")


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.timeout(3600)  # with the session's build in its setup when run alone: 13 min on a loaded 2-core machine
def test_living_on_arxiv_sample(arxiv_sample, tmp_path):
    """The issue's simulation on the real sample (the closing note's live leaderboard).

    It starts from the session's arxiv-sample build: its papers are the corpus (the sample as
    ``rap build`` reads it), and its episodes at T are the one-pass reference the resolved version
    must equal (see :func:`run_simulation`); the parent labels with the instrument that build
    cached. With ``RAP_LIVE_BOARD_OUT=DIR`` set, the live board it scores
    (``leaderboard_live.{csv,md}`` and ``reveals.json``) is written to DIR as well, to quote in the
    closing note."""
    from rap_benchmark.evaluation.live import write_live_board

    spec = arxiv_sample.spec
    assert T in spec.origins and spec.eligibility_end == T
    sim = run_simulation(
        arxiv_sample.papers, spec, tmp_path, _seal_plan, relabel=False, one_pass=False, whole=lambda _: arxiv_sample
    )
    verdicts = {Path(v.path).stem: v for v in sim["result"].verdicts}
    assert verdicts["ewma"].accepted and verdicts["reference"].accepted and not verdicts["arima"].accepted
    out = write_live_board(sim["result"], os.environ.get("RAP_LIVE_BOARD_OUT") or tmp_path / "board")
    board = (out / "leaderboard_live.md").read_text(encoding="utf-8")
    assert "baseline/ewma" in board and "reference/search-hits" in board and "baseline/arima" not in board
    print(board)


def test_frozen_instrument_reconstructs_package_records_only(tmp_path):
    """The artifact names classes by module path; one outside the package is refused, not imported."""
    from rap_benchmark.core.errors import ArtifactError

    folder = tmp_path / "instrument"
    folder.mkdir()
    tree = {"__class__": "os:system", "fields": {}}
    (folder / "instrument.json").write_text(json.dumps({"format_version": 1, "tree": tree, "arrays": []}))
    (folder / "arrays.bin").write_bytes(b"")
    with pytest.raises(ArtifactError, match="outside the package"):
        load(tmp_path)


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["extend", "{mini}", "--source", "{mini}", "--origin", "2026-13-01", "--out", "{out}"], "not a YYYY-MM-DD"),
        (["extend", "{mini}", "--source", "{mini}", "--origin", "2026-07-01", "--out", "{out}"], "freeze-instrument"),
        (["resolve", "{mini}", "--source", "{mini}", "--out", "{out}"], "no pending origin"),
    ],
)
def test_living_cli_errors_are_one_line(mini_dir, tmp_path, args, phrase):
    import subprocess
    import sys

    out = tmp_path / "out"
    argv = [a.format(mini=mini_dir, out=out) for a in args]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    r = subprocess.run([sys.executable, "-m", "rap_benchmark", *argv], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and phrase in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "Traceback" not in r.stderr and not out.exists()


def _rap(*argv) -> str:
    """``rap ARGV`` through the stock CLI (a subprocess); its stderr."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    cmd = [sys.executable, "-m", "rap_benchmark", *map(str, argv)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return r.stderr


def _hub_episodes(repo: Path, config: str) -> pd.DataFrame:
    from rap_benchmark.hub import read_manifest

    splits = read_manifest(repo)["configs"][config]
    return pd.concat([pd.read_parquet(repo / info["path"]) for info in splits.values()], ignore_index=True)


def test_export_of_a_pending_version_publishes_no_target_until_resolved(mini, tmp_path):
    """Regression (issue 17): ``rap hub export`` of an extended version whose y is pending put the
    pending episodes in the scored ``<policy>`` configs with y null, y_counts all zero and n_y 0
    (read as a target of nothing), and the card said "every target is public". Now they go to
    ``<policy>_pending`` with no target column, the manifest, card and command say so, and the
    export after ``rap resolve`` publishes their y in the scored configs, equal to the instance's."""
    from rap_benchmark.core.records import Policy
    from rap_benchmark.hub import read_manifest
    from rap_benchmark.integrations.hub_instance import load_hub_instance

    papers, spec = _mini_living_data(mini)
    cut = write_source(papers[papers["date"].astype(str) < T], tmp_path / "cut")
    full = write_source(papers, tmp_path / "full")
    parent_spec = spec.replace(origins=tuple(o for o in spec.origins if o < T), date_end=T)
    (tmp_path / "parent.json").write_text(json.dumps(parent_spec.to_dict()), encoding="utf-8")
    v1, v2, v3 = tmp_path / "v1", tmp_path / "v2", tmp_path / "v3"
    _rap("build", "--quiet", "--spec", tmp_path / "parent.json", "--source", cut, "--freeze-instrument", "--out", v1)
    _rap("extend", v1, "--source", cut, "--origin", T, "--out", v2, "--quiet")
    said = _rap("hub", "export", v2, "--out", tmp_path / "hub2")
    assert f"pending targets (origin {T})" in said

    inst2 = load_instance(v2)
    repo = tmp_path / "hub2" / "rap" / "episodes"
    manifest = read_manifest(repo)
    n_fields = inst2.blocks["field_id"].nunique()
    for policy in Policy:
        scored = _hub_episodes(repo, policy.value)
        assert T not in set(scored["origin"]) and len(scored) == n_fields * (len(inst2.spec.origins) - 1)
        waiting = _hub_episodes(repo, policy.value + "_pending")
        assert set(waiting["origin"]) == {T} and len(waiting) == n_fields
        assert not {"y", "y_counts", "n_y"} & set(waiting.columns)
        assert all(PENDING_FLAG in list(fl) for fl in waiting["flags"])
        ours = inst2.episodes[(inst2.episodes["origin"] == T) & (inst2.episodes["policy"] == policy.value)]
        ours = ours.sort_values("field_id").reset_index(drop=True)
        waiting = waiting.sort_values("field_id").reset_index(drop=True)
        for col in ("x", "history", "n_x"):
            assert list(map(_plain, waiting[col])) == list(map(_plain, ours[col])), col
        info = manifest["pending"][policy.value + "_pending"]
        assert {s: i["origins"] for s, i in info.items()} == {s: [T] for s in info}
        assert sum(i["rows"] for i in info.values()) == n_fields
    card = (repo / "README.md").read_text(encoding="utf-8")
    assert "## Pending targets" in card and "every target that exists is public" in card
    assert "every target is public." not in card
    # the harnesses' view of the repos runs the pending episodes without a target
    hub = load_hub_instance(tmp_path / "hub2", cache=tmp_path / "cache")
    live = hub.episodes[hub.episodes["origin"].astype(str) == T]
    assert len(live) == n_fields * len(Policy) and live["y"].isna().all()
    assert all(PENDING_FLAG in list(fl) for fl in live["flags"])
    # withholding from the last origin commits nothing for a target that does not exist
    _rap("hub", "export", v2, "--out", tmp_path / "hub2w", "--withhold-test-targets")
    held = read_manifest(tmp_path / "hub2w" / "rap" / "episodes")
    assert not held["withheld"] and set(held["pending"]) == set(manifest["pending"])

    _rap("resolve", v2, "--source", full, "--out", v3)
    said = _rap("hub", "export", v3, "--out", tmp_path / "hub3")
    assert "pending" not in said
    inst3 = load_instance(v3)
    repo = tmp_path / "hub3" / "rap" / "episodes"
    manifest = read_manifest(repo)
    assert "pending" not in manifest and not any(c.endswith("_pending") for c in manifest["configs"])
    assert "Pending targets" not in (repo / "README.md").read_text(encoding="utf-8")
    for policy in Policy:
        got = _hub_episodes(repo, policy.value)
        got = got[got["origin"] == T].sort_values("field_id").reset_index(drop=True)
        ours = inst3.episodes[(inst3.episodes["origin"] == T) & (inst3.episodes["policy"] == policy.value)]
        ours = ours.sort_values("field_id").reset_index(drop=True)
        assert len(got) == n_fields and got["y"].notna().any()
        for col in ("y", "y_counts", "n_y", "flags"):
            assert list(map(_plain, got[col])) == list(map(_plain, ours[col])), col
