"""A built CiteCast instance: a folder of named files plus a SHA256 manifest.

citecast.json             manifest: version, cutoff, snapshot date, bands, mix, counts, provenance
server/tasks.jsonl        server-side tasks (metadata, band, split, target)
server/exclusions.jsonl   excluded papers and why
specs/train.jsonl         agent-facing specs: {"task_id": ...} only
specs/test.jsonl
corpus/documents.jsonl    the frozen crawl-dated web corpus (one crawl a line)
SHA256SUMS                sha256 of every file above (verified on load)
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rap_benchmark.citecast.records import CiteTask
from rap_benchmark.citecast.tasks import DEFAULT_BANDS, DEFAULT_MIX, TaskSet, load_tasks, write_task_files
from rap_benchmark.citecast.webcorpus import WebCorpus
from rap_benchmark.core.artifacts import ArtifactError, verify, write_json, write_sums
from rap_benchmark.core.dates import parse_date

CITECAST_VERSION = "1.0.0"
MANIFEST = "citecast.json"
CORPUS_FILE = Path("corpus") / "documents.jsonl"


@dataclass(frozen=True)
class CiteCastInstance:
    root: Path
    manifest: dict[str, Any]
    tasks: dict[str, CiteTask]
    corpus: WebCorpus

    @property
    def cutoff(self) -> dt.date:
        return parse_date(self.manifest["cutoff"])


def write_instance(
    out_dir: str | Path,
    task_set: TaskSet,
    corpus: WebCorpus,
    *,
    cutoff: dt.date,
    snapshot_date: dt.date,
    provenance: dict[str, Any],
) -> Path:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_task_files(out, task_set)
    corpus.to_jsonl(out / CORPUS_FILE)
    splits: dict[str, dict[str, int]] = {}
    for t in task_set.tasks:
        splits.setdefault(t.split.value, {}).setdefault(t.band, 0)
        splits[t.split.value][t.band] += 1
    manifest = {
        "citecast_version": CITECAST_VERSION,
        "cutoff": cutoff.isoformat(),
        "snapshot_date": snapshot_date.isoformat(),
        "bands": [{"name": b.name, "lo": b.lo, "hi": b.hi} for b in DEFAULT_BANDS],
        "mix": DEFAULT_MIX,
        "n_tasks": len(task_set.tasks),
        "n_eligible": task_set.n_eligible,
        "eligible_band_counts": task_set.eligible_band_counts,
        "split_band_counts": splits,
        "n_excluded": len(task_set.exclusions),
        "corpus": {"n_documents": len(corpus), "sub_corpora": corpus.sub_corpus_counts()},
        "provenance": provenance,
    }
    write_json(out / MANIFEST, manifest)
    write_sums(out)
    return out


def load_instance(root: str | Path, *, check: bool = True) -> CiteCastInstance:
    root = Path(root)
    if check:
        problems = verify(root)
        if problems:
            raise ArtifactError(f"{root}: " + "; ".join(problems[:5]))
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    return CiteCastInstance(root, manifest, load_tasks(root), WebCorpus.from_jsonl(root / CORPUS_FILE))
