"""A living instance: new origins as arXiv grows (``rap extend``) and their targets (``rap resolve``).

``extend_instance(parent, source, origin)`` writes a new version of a built instance with one
more origin T:

* the parent folder is only read: ``codebooks.json``, ``blocks.parquet`` and ``instrument/`` are
  copied byte for byte and the parent's table rows kept as they are; the new rows follow them;
* new papers (by arXiv id) dated from the parent's ``date_end`` on are read from ``source`` and
  labelled by the parent's frozen instrument (:mod:`rap_benchmark.pipeline.instrument.frozen`);
  earlier ones a newer snapshot adds are counted, never added (the parent froze those windows);
* ``x`` and the history of T are computed; ``y`` stays *pending* (null, ``y_counts`` zero,
  flag ``y_pending``) until the data cover [T, T+6mo), i.e. until the newest paper read is dated
  on or after the window's last day;
* the ledger keeps the parent's spec with T added (and ``date_end`` moved to T+6mo), and
  ``derived.living`` names the parent's manifest hash: versions form a hash chain.

``resolve_instance(dir, source)`` fills the pending targets once a newer source covers their
windows (it refuses otherwise): papers dated from the earliest pending origin on are added,
labelled by the same frozen instrument, and the pending episodes' ``y``, ``y_counts``, ``n_y``
and target flags are computed; ``x`` and the history stay as they were sealed against.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pandas as pd

from rap_benchmark.core.artifacts import (
    LEDGER_FILE,
    check_instance_out,
    load_instance,
    replacing_instance,
    write_json,
    write_table,
)
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.records import Policy
from rap_benchmark.core.schemas import EPISODE_PENDING_FLAG
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.core.sums import write_sums

COPIED = ("codebooks.json", "blocks.parquet")
TARGET_FLAGS = ("y_empty", "y_censored")


def _window_end(origin: str, spec: BenchmarkSpec) -> str:
    return add_months(parse_date(origin), spec.window_months).isoformat()


def _new_papers(source: Path, spec: BenchmarkSpec, known: set[str], since: str, progress: bool) -> dict[str, Any]:
    """Papers of ``source`` not in ``known`` and dated on or after ``since``; what was read."""
    from rap_benchmark.pipeline.build import normalise_papers
    from rap_benchmark.pipeline.corpus import read_corpus

    papers, _ = read_corpus(source, spec, progress=progress)
    papers = normalise_papers(papers)
    dates = papers["date"].astype(str)
    newest = str(dates.max()) if len(papers) else None
    fresh = ~papers["arxiv_id"].isin(known)
    keep = fresh & (dates >= since)
    return {
        "papers": papers.loc[keep].reset_index(drop=True),
        "covered_until": None if newest is None else (parse_date(newest) + dt.timedelta(days=1)).isoformat(),
        "n_read": len(papers),
        "n_duplicates": int((~fresh).sum()),
        "n_late_ignored": int((fresh & (dates < since)).sum()),
    }


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def _origin_episodes(
    assignments: pd.DataFrame, blocks: pd.DataFrame, spec: BenchmarkSpec, origin: str, pending: bool
) -> pd.DataFrame:
    from rap_benchmark.pipeline.episodes import episode_table

    rows = episode_table(assignments, blocks, dataclasses.replace(spec, origins=(origin,)))
    if pending:
        rows["y"] = pd.Series([None] * len(rows), dtype=object)
        rows["y_counts"] = pd.Series([[0.0] * 8 for _ in range(len(rows))], dtype=object)
        rows["n_y"] = 0.0
        rows["flags"] = pd.Series(
            [[f for f in fl if f not in TARGET_FLAGS] + [EPISODE_PENDING_FLAG] for fl in rows["flags"]], dtype=object
        )
    return rows


def _policy_order(frame: pd.DataFrame) -> pd.DataFrame:
    order = {p.value: i for i, p in enumerate(Policy)}
    frame = frame.assign(_p=frame["policy"].map(order))
    return _sorted(frame, ["field_id", "origin", "_p"]).drop(columns="_p")


def _with_labelled(inst: Any, frozen: Any, new_papers: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The instance's papers and assignments with ``new_papers`` (all dated after its own) and
    their frozen-instrument labels added; the instance's rows stay as they are."""
    from rap_benchmark.pipeline.build import normalise_assignments

    if not len(new_papers):
        return inst.papers, inst.assignments
    labelled = normalise_assignments(frozen.label(new_papers), new_papers)
    papers = pd.concat([inst.papers, new_papers], ignore_index=True)
    assignments = pd.concat([inst.assignments, labelled], ignore_index=True)
    return papers, _sorted(assignments, ["field_id", "date", "arxiv_id"])


def _write_version(src: Path, out: Path, tables: dict[str, pd.DataFrame], ledger: dict[str, Any]) -> Path:
    """Write a version into ``out`` atomically: ``src``'s frozen files byte for byte, ``tables``, ledger, sums."""
    from rap_benchmark.pipeline.instrument.frozen import FOLDER

    with replacing_instance(out) as tmp:
        for name in COPIED:
            shutil.copyfile(src / name, tmp / name)
        shutil.copytree(src / FOLDER, tmp / FOLDER)
        for name, frame in tables.items():
            write_table(tmp, name, frame)
        write_json(tmp / LEDGER_FILE, ledger)
        write_sums(tmp)
    return out


def extend_instance(
    parent_dir: str | Path, source: str | Path, origin: str, out: str | Path, *, progress: bool = False
) -> Path:
    """Write ``out``: the parent instance plus origin ``origin`` (see the module docstring)."""
    from rap_benchmark.pipeline.episodes import search_manifest
    from rap_benchmark.pipeline.instrument.frozen import instrument_hash, load

    parent_dir, out = Path(parent_dir), Path(out)
    if out.resolve() == parent_dir.resolve():
        raise InputError("--out must be a new folder: the parent version is never modified")
    origin = parse_date(origin).isoformat()  # the cheap checks first
    if not Path(source).exists():
        raise InputError(f"no corpus at {source}")
    check_instance_out(out)
    parent = load_instance(parent_dir)
    frozen = load(parent_dir)
    spec = parent.spec
    pending_now = parent.ledger.get("derived", {}).get("living", {}).get("pending_origins", [])
    if pending_now:
        raise InputError(f"{parent_dir} still waits for the targets of {pending_now[0]}: rap resolve it first")
    if origin <= spec.origins[-1]:
        raise InputError(f"origin {origin} is not after the parent's last origin {spec.origins[-1]}")
    if parse_date(origin) < parse_date(spec.date_end) and _window_end(origin, spec) <= spec.date_end:
        raise InputError(f"origin {origin}: its window already lies inside the parent's data (to {spec.date_end})")
    new_spec = dataclasses.replace(
        spec, origins=(*spec.origins, origin), date_end=max(spec.date_end, _window_end(origin, spec))
    )
    read = _new_papers(Path(source), new_spec, set(parent.papers["arxiv_id"]), spec.date_end, progress)
    x_start = add_months(parse_date(origin), -spec.window_months).isoformat()
    covered = read["covered_until"] or spec.date_end
    if max(covered, spec.date_end) < origin:
        raise InputError(
            f"the data reach {covered}: origin {origin} needs papers up to it (x is [{x_start}, {origin}))"
        )
    pending = covered < _window_end(origin, spec)

    new_papers = read["papers"]
    if pending:  # papers inside a pending window wait for rap resolve, so y is filled from one source
        new_papers = new_papers[new_papers["date"].astype(str) < origin].reset_index(drop=True)
    papers, assignments = _with_labelled(parent, frozen, new_papers)
    episodes = _policy_order(
        pd.concat(
            [parent.episodes, _origin_episodes(assignments, parent.blocks, new_spec, origin, pending)],
            ignore_index=True,
        )
    )
    field_ids = sorted(parent.blocks["field_id"].astype(str))
    manifest = _sorted(
        pd.concat(
            [
                parent.search_manifest,
                search_manifest(assignments, field_ids, dataclasses.replace(new_spec, origins=(origin,))),
            ],
            ignore_index=True,
        ),
        ["field_id", "origin"],
    )
    ledger = new_spec.ledger()
    living = dict(parent.ledger.get("derived", {}).get("living", {}))
    ledger["derived"] = {
        **parent.ledger.get("derived", {}),
        "living": {
            "parent_manifest_hash": parent.manifest_hash,
            "chain": [*living.get("chain", []), parent.manifest_hash],
            "extension_origin": origin,
            "extension_start": spec.date_end,
            "pending_origins": [*living.get("pending_origins", []), *([origin] if pending else [])],
            "covered_until": covered,
            "new_papers": len(new_papers),
            "duplicates_skipped": read["n_duplicates"],
            "late_papers_ignored": read["n_late_ignored"],
            "frozen_instrument_sha256": instrument_hash(parent_dir),
        },
    }
    tables = {"papers": papers, "assignments": assignments, "episodes": episodes, "search_manifest": manifest}
    return _write_version(parent_dir, out, tables, ledger)


def resolve_instance(
    inst_dir: str | Path, source: str | Path, *, out: str | Path | None = None, progress: bool = False
) -> Path:
    """Fill the pending targets of ``inst_dir`` from ``source`` into ``out`` (default: in place).

    An instance has at most one pending origin (``rap extend`` refuses to add another), so the
    papers added here, all dated on or after it, leave its ``x`` and history as they were."""
    from rap_benchmark.pipeline.instrument.frozen import load

    inst_dir = Path(inst_dir)
    out = Path(out) if out is not None else inst_dir
    check_instance_out(out)  # before the load and the labelling, as the writer would refuse it only then
    inst = load_instance(inst_dir)
    living = inst.ledger.get("derived", {}).get("living", {})
    pending = list(living.get("pending_origins", []))
    if not pending:
        raise InputError(f"{inst_dir} has no pending origin: nothing to resolve")
    if not Path(source).exists():
        raise InputError(f"no corpus at {source}")
    spec = inst.spec
    since = pending[0]
    read = _new_papers(Path(source), spec, set(inst.papers["arxiv_id"]), since, progress)
    covered = read["covered_until"] or since
    late = [o for o in pending if covered < _window_end(o, spec)]
    if late:
        o = late[0]
        raise InputError(
            f"the data reach {covered}: the window [{o}, {_window_end(o, spec)}) of origin {o} is not covered yet"
        )
    frozen = load(inst_dir)  # only once the data are known to cover the window
    new_papers = read["papers"]
    papers, assignments = _with_labelled(inst, frozen, new_papers)
    (origin,) = pending
    episodes = _policy_order(
        pd.concat(
            [
                inst.episodes[inst.episodes["origin"].astype(str) != origin],
                _origin_episodes(assignments, inst.blocks, spec, origin, pending=False),
            ],
            ignore_index=True,
        )
    )
    ledger = dict(inst.ledger)
    ledger["derived"] = {
        **inst.ledger["derived"],
        "living": {
            **living,
            "pending_origins": [],
            "resolved": {
                "origins": pending,
                "from_manifest_hash": inst.manifest_hash,
                "covered_until": covered,
                "new_papers": len(new_papers),
                "duplicates_skipped": read["n_duplicates"],
                "late_papers_ignored": read["n_late_ignored"],
            },
        },
    }
    tables = {
        "papers": papers,
        "assignments": assignments,
        "episodes": episodes,
        "search_manifest": inst.search_manifest,
    }
    return _write_version(inst_dir, out, tables, ledger)
