"""From a harvested cohort to task files: exclusions, citation bands, the stratified mix, the
deterministic within-band hash split, and the server-side / agent-facing task files.

Citation bands (true Semantic Scholar count at the snapshot; inclusive bounds):

    0 | 1-2 | 3-5 | 6-10 | 11-25 | 26-100 | >100

About half of a month's papers have zero citations seven months on, so the mix is stratified
(``DEFAULT_MIX``; papers above 25 citations are 5.6% of it, as on the card). Within a band, papers
are taken in ``sha256("mix:" + arxiv_id)`` order; the test split takes, within each band, the
first papers in ``sha256(arxiv_id)`` order (200/2200 at full scale), so every band is in the test
split and a paper's split never depends on other bands.

Files written by :func:`write_task_files` (``server/`` stays with the server; agents get ``specs/``)::

    server/tasks.jsonl        one CiteTask per line: v1 metadata, band, split, target, S2 id
    server/exclusions.jsonl   arxiv_id, reason, detail
    specs/train.jsonl         {"task_id": ...} per line, nothing else
    specs/test.jsonl
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rap_benchmark.citecast.records import (
    ARXIV_2601,
    CitationRecord,
    CiteTask,
    Exclusion,
    ExclusionReason,
    PaperMeta,
    TaskSpec,
    TaskSplit,
)
from rap_benchmark.core.serial import read_jsonl, write_jsonl

FULL_TOTAL = 2200
FULL_TEST = 200


@dataclass(frozen=True, slots=True)
class Band:
    """A citation band with inclusive bounds; ``hi=None`` is open-ended."""

    name: str
    lo: int
    hi: int | None

    def contains(self, count: int) -> bool:
        return count >= self.lo and (self.hi is None or count <= self.hi)


DEFAULT_BANDS: tuple[Band, ...] = (
    Band("0", 0, 0),
    Band("1-2", 1, 2),
    Band("3-5", 3, 5),
    Band("6-10", 6, 10),
    Band("11-25", 11, 25),
    Band("26-100", 26, 100),
    Band(">100", 101, None),
)

DEFAULT_MIX: dict[str, float] = {
    "0": 0.150,
    "1-2": 0.200,
    "3-5": 0.200,
    "6-10": 0.180,
    "11-25": 0.214,
    "26-100": 0.046,
    ">100": 0.010,
}


def band_of(count: int, bands: Sequence[Band] = DEFAULT_BANDS) -> Band:
    for band in bands:
        if band.contains(count):
            return band
    raise ValueError(f"count {count} falls in no band")


def bands_by_name(bands: Sequence[Band] = DEFAULT_BANDS) -> dict[str, Band]:
    return {b.name: b for b in bands}


_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalise_title(title: str) -> str:
    """ASCII-folded, lower-cased, punctuation collapsed: the duplicate-title key."""
    folded = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode("ascii").lower()
    return _NON_ALNUM.sub(" ", folded).strip()


def hash_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def task_id_for(arxiv_id: str) -> str:
    """An opaque, deterministic task id that does not reveal the paper."""
    return "cc_" + hash_key(f"citecast-task:{arxiv_id}")[:16]


@dataclass(frozen=True, slots=True)
class Candidate:
    paper: PaperMeta
    citation: CitationRecord

    @property
    def count(self) -> int:
        assert self.citation.citation_count is not None
        return self.citation.citation_count


def select_eligible(
    papers: Sequence[PaperMeta],
    citations: Mapping[str, CitationRecord],
    withdrawn: Collection[str] = (),
) -> tuple[list[Candidate], list[Exclusion]]:
    """Apply the exclusions, in this order, over papers sorted by id: not 2601.*, withdrawn, no
    Semantic Scholar row or count, a Semantic Scholar paperId or normalised title an earlier id
    already has (the earliest id of a duplicate group is kept)."""
    eligible: list[Candidate] = []
    excluded: list[Exclusion] = []
    seen_s2: dict[str, str] = {}
    seen_title: dict[str, str] = {}
    withdrawn_set = set(withdrawn)
    for paper in sorted(papers, key=lambda p: p.arxiv_id):
        aid = paper.arxiv_id
        cit = citations.get(aid)
        if not ARXIV_2601.match(aid):
            excluded.append(Exclusion(aid, ExclusionReason.NOT_2601))
        elif aid in withdrawn_set:
            excluded.append(Exclusion(aid, ExclusionReason.WITHDRAWN))
        elif cit is None or cit.missing:
            excluded.append(Exclusion(aid, ExclusionReason.MISSING_S2))
        elif cit.paper_id in seen_s2:
            excluded.append(Exclusion(aid, ExclusionReason.DUPLICATE_S2, seen_s2[cit.paper_id]))
        elif normalise_title(paper.title) in seen_title:
            excluded.append(Exclusion(aid, ExclusionReason.DUPLICATE_TITLE, seen_title[normalise_title(paper.title)]))
        else:
            assert cit.paper_id is not None
            seen_s2[cit.paper_id] = aid
            seen_title[normalise_title(paper.title)] = aid
            eligible.append(Candidate(paper, cit))
    return eligible, excluded


def allocate(total: int, weights: Sequence[float], caps: Sequence[int]) -> list[int]:
    """Integer quotas summing to ``min(total, sum(caps))``, proportional to ``weights`` by largest
    remainder, never above a cap; a capped band's shortfall is shared by the others."""
    n = len(weights)
    quota = [0] * n
    remaining = min(total, int(sum(caps)))
    open_ = [i for i in range(n) if caps[i] > 0]
    while remaining > 0 and open_:
        w = np.array([weights[i] for i in open_], dtype=np.float64)
        if w.sum() <= 0:
            w = np.ones(len(open_))
        exact = remaining * w / w.sum()
        base = np.floor(exact).astype(int)
        order = sorted(range(len(open_)), key=lambda j: (-(exact[j] - base[j]), open_[j]))
        for j in order[: remaining - int(base.sum())]:
            base[j] += 1
        given = 0
        for j, i in enumerate(open_):
            take = min(int(base[j]), caps[i] - quota[i])
            quota[i] += take
            given += take
        remaining -= given
        open_ = [i for i in open_ if quota[i] < caps[i]]
        if given == 0:  # every open band got a zero share: hand out one each in order
            for i in open_[:remaining]:
                quota[i] += 1
            remaining -= min(remaining, len(open_))
            open_ = [i for i in open_ if quota[i] < caps[i]]
    return quota


def stratified_mix(
    candidates: Sequence[Candidate],
    n_total: int,
    mix: Mapping[str, float] = DEFAULT_MIX,
    bands: Sequence[Band] = DEFAULT_BANDS,
) -> list[Candidate]:
    """Pick ``n_total`` candidates with band shares ``mix`` (hash order within a band)."""
    by_band: dict[str, list[Candidate]] = {b.name: [] for b in bands}
    for c in candidates:
        by_band[band_of(c.count, bands).name].append(c)
    for name in by_band:
        by_band[name].sort(key=lambda c: hash_key("mix:" + c.paper.arxiv_id))
    names = [b.name for b in bands]
    quota = allocate(n_total, [mix.get(n, 0.0) for n in names], [len(by_band[n]) for n in names])
    chosen = [c for n, q in zip(names, quota, strict=True) for c in by_band[n][:q]]
    return sorted(chosen, key=lambda c: c.paper.arxiv_id)


def split_within_band(band_of_id: Mapping[str, str], n_test: int) -> dict[str, TaskSplit]:
    """Test = the first ids in ``sha256(id)`` order within each band; band quotas proportional to
    band size (largest remainder), at least one per band holding two or more papers, and at
    least one train paper left in every band."""
    groups: dict[str, list[str]] = {}
    for aid, band in band_of_id.items():
        groups.setdefault(band, []).append(aid)
    names = sorted(groups)
    sizes = [len(groups[n]) for n in names]
    floor_one = [1 if s >= 2 else 0 for s in sizes]
    rest = max(0, n_test - sum(floor_one))
    # caps keep at least one train paper in every band (a band oracle needs one to fit on)
    extra = allocate(rest, sizes, [max(0, s - 2) for s in sizes])
    out: dict[str, TaskSplit] = {}
    for name, f, e in zip(names, floor_one, extra, strict=True):
        ordered = sorted(groups[name], key=hash_key)
        for k, aid in enumerate(ordered):
            out[aid] = TaskSplit.TEST if k < f + e else TaskSplit.TRAIN
    return out


@dataclass(frozen=True)
class TaskSet:
    tasks: tuple[CiteTask, ...]
    exclusions: tuple[Exclusion, ...]
    n_eligible: int
    eligible_band_counts: dict[str, int]

    def by_id(self) -> dict[str, CiteTask]:
        return {t.task_id: t for t in self.tasks}

    def specs(self, split: TaskSplit | None = None) -> list[TaskSpec]:
        return [t.spec() for t in self.tasks if split is None or t.split is split]


def build_tasks(
    papers: Sequence[PaperMeta],
    citations: Mapping[str, CitationRecord] | Iterable[CitationRecord],
    withdrawn: Collection[str] = (),
    *,
    n_total: int = FULL_TOTAL,
    n_test: int | None = None,
    mix: Mapping[str, float] = DEFAULT_MIX,
    bands: Sequence[Band] = DEFAULT_BANDS,
) -> TaskSet:
    """Exclusions, the stratified mix and the split; ``n_test`` defaults to the card's 200/2200."""
    if not isinstance(citations, Mapping):
        citations = {c.arxiv_id: c for c in citations}
    eligible, excluded = select_eligible(papers, citations, withdrawn)
    chosen = stratified_mix(eligible, n_total, mix, bands)
    n_test = round(len(chosen) * FULL_TEST / FULL_TOTAL) if n_test is None else n_test
    band_names = {c.paper.arxiv_id: band_of(c.count, bands).name for c in chosen}
    split = split_within_band(band_names, n_test)
    tasks = tuple(
        CiteTask(
            task_id=task_id_for(c.paper.arxiv_id),
            paper=c.paper,
            target=c.count,
            band=band_names[c.paper.arxiv_id],
            split=split[c.paper.arxiv_id],
            s2_paper_id=str(c.citation.paper_id),
            snapshot_date=c.citation.snapshot_date,
        )
        for c in chosen
    )
    counts = Counter(band_of(c.count, bands).name for c in eligible)
    return TaskSet(tasks, tuple(excluded), len(eligible), {b.name: counts.get(b.name, 0) for b in bands})


# -- files ---------------------------------------------------------------------------------------
def write_task_files(out_dir: str | Path, task_set: TaskSet) -> None:
    out = Path(out_dir)
    write_jsonl(out / "server" / "tasks.jsonl", task_set.tasks)
    write_jsonl(out / "server" / "exclusions.jsonl", task_set.exclusions)
    for split in TaskSplit:
        write_jsonl(out / "specs" / f"{split.value}.jsonl", task_set.specs(split))


def load_tasks(instance_dir: str | Path) -> dict[str, CiteTask]:
    """The server-side tasks of a built instance, by task id."""
    tasks = read_jsonl(Path(instance_dir) / "server" / "tasks.jsonl", CiteTask.from_dict)
    return {t.task_id: t for t in tasks}
