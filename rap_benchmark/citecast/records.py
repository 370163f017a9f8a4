"""Frozen records of the CiteCast environment, one per stage: harvest (PaperMeta,
CitationRecord), tasks (Exclusion, CiteTask, TaskSpec), corpus (WebDocument). A value outside an
enum's vocabulary raises ``ValueError``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.records import is_count
from rap_benchmark.core.serial import FLAT, Record, from_dict

ARXIV_2601 = re.compile(r"^2601\.\d{5}$")
"""January 2026 new-style arXiv ids (the cohort's only admissible ids)."""

DEFAULT_CUTOFF = dt.date(2026, 1, 31)
"""The tools' point-in-time cutoff: nothing crawled after this day is ever served."""

DEFAULT_SNAPSHOT = dt.date(2026, 8, 23)
"""The day the Semantic Scholar citation counts (the targets) were snapshotted."""


class SubCorpus(StrEnum):
    """The three sub-corpora of the frozen web corpus."""

    ARXIV = "arxiv"
    NEWS = "news"
    WEB = "web"


class TaskSplit(StrEnum):
    TRAIN = "train"
    TEST = "test"


class ExclusionReason(StrEnum):
    NOT_2601 = "not_2601"  # id outside the January 2026 cohort
    WITHDRAWN = "withdrawn"  # abstract or comment says the paper was withdrawn
    MISSING_S2 = "missing_s2"  # Semantic Scholar returned null (or no count) for it
    DUPLICATE_S2 = "duplicate_s2_id"  # shares a Semantic Scholar paperId with an earlier paper
    DUPLICATE_TITLE = "duplicate_title"  # shares a normalised title with an earlier paper


@dataclass(frozen=True, slots=True)
class PaperMeta(Record):
    """A paper's arXiv version-1 metadata: exactly what a prompt may show.

    Mutable article-level fields (comments, journal reference, DOI) are deliberately absent.
    ``date`` is the v1 ``<published>`` day of the arXiv API (the announcement-day proxy).
    """

    arxiv_id: str
    title: str
    abstract: str
    authors: tuple[str, ...]
    primary_category: str
    date: dt.date

    def __post_init__(self) -> None:
        if not self.arxiv_id or not self.title.strip():
            raise ValueError(f"PaperMeta needs an id and a title, got {self.arxiv_id!r}")
        object.__setattr__(self, "date", parse_date(self.date))
        object.__setattr__(self, "authors", tuple(self.authors))


@dataclass(frozen=True, slots=True)
class CitationRecord:
    """One paper's row of the Semantic Scholar batch snapshot (``None`` = missing there)."""

    arxiv_id: str
    paper_id: str | None
    title: str | None
    citation_count: int | None
    snapshot_date: dt.date

    def __post_init__(self) -> None:
        object.__setattr__(self, "snapshot_date", parse_date(self.snapshot_date))
        if self.citation_count is not None and not is_count(self.citation_count):
            raise ValueError(f"{self.arxiv_id}: citation count must be a nonnegative int")

    @property
    def missing(self) -> bool:
        return self.paper_id is None or self.citation_count is None


@dataclass(frozen=True, slots=True)
class Exclusion:
    arxiv_id: str
    reason: ExclusionReason
    detail: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reason", ExclusionReason(self.reason))


@dataclass(frozen=True, slots=True)
class CiteTask(Record):
    """A server-side task: the paper, its band, its split and its target. Never sent to agents."""

    task_id: str
    paper: PaperMeta = field(metadata=FLAT)  # its keys sit beside the task's
    target: int
    band: str
    split: TaskSplit
    s2_paper_id: str
    snapshot_date: dt.date

    def __post_init__(self) -> None:
        object.__setattr__(self, "split", TaskSplit(self.split))
        object.__setattr__(self, "snapshot_date", parse_date(self.snapshot_date))
        if not is_count(self.target):
            raise ValueError(f"{self.task_id}: target must be a nonnegative int, got {self.target!r}")

    def spec(self) -> TaskSpec:
        return TaskSpec(self.task_id)


@dataclass(frozen=True, slots=True)
class TaskSpec(Record):
    """What an agent is handed: an opaque task id and nothing else."""

    task_id: str


@dataclass(frozen=True, slots=True)
class WebDocument(Record):
    """One crawl of one url. A url may have several crawls (different ``crawl_date``)."""

    url: str
    crawl_date: dt.date
    sub_corpus: SubCorpus
    title: str
    text: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "crawl_date", parse_date(self.crawl_date))
        object.__setattr__(self, "sub_corpus", SubCorpus(self.sub_corpus))
        if not self.url:
            raise ValueError("WebDocument.url is empty")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WebDocument:
        return from_dict(cls, {"title": "", **d}, strict=True, what="document")
