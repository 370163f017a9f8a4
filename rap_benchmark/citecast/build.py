"""Build an instance from a real harvest: arXiv month listing + v1 metadata, the Semantic Scholar
snapshot, and a crawl-dated corpus from JSON lines / WARC files. Network only via ``fetch``."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from rap_benchmark.citecast.harvest import ArxivHarvester, Fetch, cohort_ids, snapshot_citations
from rap_benchmark.citecast.instance import write_instance
from rap_benchmark.citecast.records import DEFAULT_CUTOFF, DEFAULT_SNAPSHOT
from rap_benchmark.citecast.tasks import FULL_TOTAL, build_tasks
from rap_benchmark.citecast.webcorpus import WebCorpus


def build_from_harvest(
    out_dir: str | Path,
    corpus_paths: Sequence[str | Path],
    *,
    fetch: Fetch,
    year: int = 2026,
    month: int = 1,
    lead_days: int = 3,
    snapshot_date: dt.date = DEFAULT_SNAPSHOT,
    cutoff: dt.date = DEFAULT_CUTOFF,
    n_total: int = FULL_TOTAL,
    arxiv_delay_s: float = 3.0,
    s2_api_key: str | None = None,
    sleep: Callable[[float], None] | None = None,
    progress: bool = False,
) -> Path:
    """Harvest the cohort, snapshot its citations, select tasks, load the corpus, write the instance."""
    import time

    sleep = sleep or time.sleep
    harvester = ArxivHarvester(fetch, delay_s=arxiv_delay_s, sleep=sleep)
    listing = harvester.list_month(year, month, lead_days=lead_days, progress=progress)
    ids = cohort_ids(listing)
    withdrawn = [e.meta.arxiv_id for e in listing if e.withdrawn]
    if progress:
        print(f"[citecast] {len(ids)} cohort ids, {len(withdrawn)} withdrawn; fetching v1 metadata", file=sys.stderr)
    v1 = harvester.fetch_v1(ids)
    papers = [v1[a] for a in ids if a in v1]
    citations = snapshot_citations(fetch, ids, snapshot_date, api_key=s2_api_key, sleep=sleep)
    task_set = build_tasks(papers, citations, withdrawn, n_total=n_total)
    corpus = WebCorpus.load(corpus_paths)
    provenance = {
        "instance": "harvest",
        "month": f"{year:04d}-{month:02d}",
        "n_listed": len(listing),
        "n_cohort": len(ids),
        "n_v1": len(papers),
        "corpus_files": [Path(p).name for p in corpus_paths],
    }
    return write_instance(out_dir, task_set, corpus, cutoff=cutoff, snapshot_date=snapshot_date, provenance=provenance)
