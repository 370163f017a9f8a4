"""Exclusions, bands, the stratified mix, the within-band hash split and the task files."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest
from citecast_specs import load_specs
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.citecast.records import CitationRecord, ExclusionReason, PaperMeta, TaskSplit
from rap_benchmark.citecast.tasks import (
    DEFAULT_BANDS,
    DEFAULT_MIX,
    allocate,
    band_of,
    build_tasks,
    load_tasks,
    normalise_title,
    select_eligible,
    split_within_band,
    task_id_for,
    write_task_files,
)

SNAP = dt.date(2026, 8, 23)


def paper(i: int, title: str | None = None) -> PaperMeta:
    return PaperMeta(
        f"2601.{i:05d}",
        title or f"Paper number {i} on topic {i % 7}",
        f"Abstract {i}.",
        ("A B",),
        "cs.LG",
        dt.date(2026, 1, 1 + i % 28),
    )


def cit(i: int, count: int | None, pid: str | None = None) -> CitationRecord:
    return CitationRecord(f"2601.{i:05d}", pid or f"s2-{i}", "t", count, SNAP)


def test_bands_cover_every_count_once() -> None:
    for c in range(0, 500):
        assert sum(b.contains(c) for b in DEFAULT_BANDS) == 1
    assert (
        band_of(0).name == "0"
        and band_of(2).name == "1-2"
        and band_of(25).name == "11-25"
        and band_of(101).name == ">100"
    )


def test_exclusions_in_order_and_keep_earliest() -> None:
    papers = [paper(1), paper(2), paper(3), paper(4, "Paper number 1 on topic 1!"), paper(5)]
    papers.append(PaperMeta("2512.00009", "Dec paper", "a", (), "cs.LG", dt.date(2025, 12, 31)))
    cits = {c.arxiv_id: c for c in [cit(1, 3), cit(2, 5, pid="s2-1"), cit(3, None), cit(4, 1), cit(5, 0)]}
    eligible, excluded = select_eligible(papers, cits, withdrawn={"2601.00005"})
    assert [c.paper.arxiv_id for c in eligible] == ["2601.00001"]
    reasons = {e.arxiv_id: e.reason for e in excluded}
    assert reasons == {
        "2512.00009": ExclusionReason.NOT_2601,
        "2601.00002": ExclusionReason.DUPLICATE_S2,
        "2601.00003": ExclusionReason.MISSING_S2,
        "2601.00004": ExclusionReason.DUPLICATE_TITLE,
        "2601.00005": ExclusionReason.WITHDRAWN,
    }
    assert normalise_title("Paper  number 1, on topic-1!") == normalise_title("paper number 1 on topic 1")


@given(st.integers(0, 300), st.lists(st.floats(0, 1), min_size=1, max_size=8), st.data())
def test_allocate_sums_and_respects_caps(total: int, weights: list[float], data: st.DataObject) -> None:
    caps = data.draw(st.lists(st.integers(0, 80), min_size=len(weights), max_size=len(weights)))
    q = allocate(total, weights, caps)
    assert sum(q) == min(total, sum(caps))
    assert all(0 <= a <= c for a, c in zip(q, caps, strict=True))


def _cohort(n: int, seed: int) -> tuple[list[PaperMeta], list[CitationRecord]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    counts = rng.negative_binomial(0.7, 0.7 / (0.7 + 6.0), size=n)
    return [paper(i) for i in range(1, n + 1)], [cit(i, int(c)) for i, c in zip(range(1, n + 1), counts, strict=True)]


def test_mix_split_proportions_and_determinism() -> None:
    papers, cits = _cohort(3000, 1)
    a = build_tasks(papers, cits, n_total=660)
    b = build_tasks(list(reversed(papers)), list(reversed(cits)), n_total=660)
    assert a.tasks == b.tasks  # independent of input order
    assert len(a.tasks) == 660
    n_test = sum(t.split is TaskSplit.TEST for t in a.tasks)
    assert n_test == 60  # 660 * 200 / 2200
    test_bands = {t.band for t in a.tasks if t.split is TaskSplit.TEST}
    assert test_bands == {t.band for t in a.tasks}  # every band in test
    # the split of a paper depends only on its band mates: removing a whole band changes nothing else
    band_map = {t.paper.arxiv_id: t.band for t in a.tasks}
    full = split_within_band(band_map, 60)
    assert sum(s is TaskSplit.TEST for s in full.values()) == 60


def test_task_files_specs_carry_only_ids(tmp_path) -> None:
    papers, cits = _cohort(800, 2)
    ts = build_tasks(papers, cits, n_total=220)
    write_task_files(tmp_path, ts)
    assert load_tasks(tmp_path) == ts.by_id()
    for split in TaskSplit:
        raw = (tmp_path / "specs" / f"{split.value}.jsonl").read_text()
        for line in raw.splitlines():
            assert set(json.loads(line)) == {"task_id"}
        assert len(load_specs(tmp_path, split)) == sum(t.split is split for t in ts.tasks)
    (tmp_path / "specs" / "test.jsonl").write_text('{"task_id": "x", "target": 3}\n')
    with pytest.raises(ValueError, match="only task_id"):
        load_specs(tmp_path, "test")


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10**9))
def test_a_spec_never_contains_metadata_band_or_target(seed: int) -> None:
    papers, cits = _cohort(60, seed)
    ts = build_tasks(papers, cits, n_total=22)
    for task in ts.tasks:
        spec = task.spec().to_dict()
        assert set(spec) == {"task_id"}  # no band, target, split or metadata key
        assert spec["task_id"] == task_id_for(task.paper.arxiv_id)  # an opaque hash
        for secret in (task.paper.arxiv_id, task.paper.title, task.s2_paper_id, task.paper.abstract):
            assert secret not in json.dumps(spec)


def test_mix_follows_shares_when_bands_are_plentiful() -> None:
    papers, cits = _cohort(6000, 3)
    ts = build_tasks(papers, cits, n_total=1000)
    counts = Counter(t.band for t in ts.tasks)
    assert ts.eligible_band_counts[">100"] == 0  # this cohort has no >100 paper: its 1% is shared out
    for band, share in DEFAULT_MIX.items():
        if band != ">100":
            assert abs(counts[band] - 1000 * share / (1 - DEFAULT_MIX[">100"])) <= 1
