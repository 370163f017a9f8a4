"""A built CiteCast instance: a folder of named files plus a SHA256 manifest.

citecast.json             manifest: version, cutoff, snapshot date, bands, mix, counts, provenance
server/tasks.jsonl        server-side tasks (metadata, band, split, target)
server/exclusions.jsonl   excluded papers and why
specs/train.jsonl         agent-facing specs: {"task_id": ...} only
specs/test.jsonl
corpus/documents.jsonl    the frozen crawl-dated web corpus (one crawl a line)
SHA256SUMS                sha256 of every file above (verified on load)
.cache/webindex-<key>/    the memory-mapped search index of the cutoff view (derived, not hashed;
                          see :mod:`rap_benchmark.citecast.webindex`)

:func:`write_instance` swaps the folder into place only once everything (the index included) is
written: a build killed half-way leaves the previous instance as it was.
"""

from __future__ import annotations

import datetime as dt
import json
import shlex
from functools import cached_property
from pathlib import Path
from typing import Any

from rap_benchmark.citecast.records import CiteTask
from rap_benchmark.citecast.tasks import DEFAULT_BANDS, DEFAULT_MIX, TaskSet, load_tasks, write_task_files
from rap_benchmark.citecast.webcorpus import WebCorpus
from rap_benchmark.core.artifacts import LEDGER_FILE, ArtifactError, write_json
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.fsio import check_replaceable, replacing
from rap_benchmark.core.serial import to_dict
from rap_benchmark.core.spec import CITECAST_VERSION
from rap_benchmark.core.sums import CACHE_DIR, listed_sha256, verify, write_sums

MANIFEST = "citecast.json"
KIND = "CiteCast instance"
"""What the refusal of a foreign output folder calls a folder holding :data:`MANIFEST`."""
CORPUS_FILE = Path("corpus") / "documents.jsonl"


class CiteCastInstance:
    """A loaded instance: manifest and tasks; the corpus is read only when asked for."""

    def __init__(self, root: Path, manifest: dict[str, Any], tasks: dict[str, CiteTask]) -> None:
        self.root = root
        self.manifest = manifest
        self.tasks = tasks

    @property
    def cutoff(self) -> dt.date:
        return parse_date(self.manifest["cutoff"])

    @cached_property
    def corpus(self) -> WebCorpus:
        return WebCorpus.from_jsonl(self.root / CORPUS_FILE)

    def index_dir(self, cutoff: dt.date | None = None, cache_dir: str | Path | None = None) -> Path:
        """Where the memory-mapped search index of the view at ``cutoff`` lives."""
        from rap_benchmark.citecast.webindex import index_key

        base = Path(cache_dir) if cache_dir is not None else self.root / CACHE_DIR
        return base / f"webindex-{index_key(listed_sha256(self.root, CORPUS_FILE.as_posix()), cutoff or self.cutoff)}"

    def web_index(self, cutoff: dt.date | None = None, cache_dir: str | Path | None = None):  # -> MappedView
        """The search index of the view at ``cutoff`` (default: the instance's), built on first use
        (into the system's temporary folder when the instance's ``.cache/`` is not writable)."""
        import tempfile

        from rap_benchmark.citecast.webindex import MappedView, write_index

        folder = self.index_dir(cutoff, cache_dir)
        if not (folder / "meta.json").is_file():
            view = self.corpus.view(cutoff or self.cutoff)
            try:
                write_index(view, folder)
            except PermissionError:
                if cache_dir is not None:
                    raise
                folder = self.index_dir(cutoff, Path(tempfile.gettempdir()) / "rap_citecast_index")
                write_index(view, folder)
        return MappedView(folder)


def check_out(out: str | Path) -> None:
    """Refuse (``FileExistsError``) an ``out`` a CiteCast instance may not be written to: a file, or
    a non-empty folder without :data:`MANIFEST` (:func:`rap_benchmark.core.fsio.check_replaceable`)."""
    check_replaceable(out, (MANIFEST,), kind=KIND)


def write_instance(
    out_dir: str | Path,
    task_set: TaskSet,
    corpus: WebCorpus,
    *,
    cutoff: dt.date,
    snapshot_date: dt.date,
    provenance: dict[str, Any],
) -> Path:
    final = Path(out_dir)
    with replacing(final, (MANIFEST,), kind=KIND) as out:
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
            "bands": [to_dict(b) for b in DEFAULT_BANDS],
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
        from rap_benchmark.citecast.webindex import write_index

        # the serving index, in .cache/ (derived, not hashed), so `serve` starts without building it
        write_index(corpus.view(cutoff), CiteCastInstance(out, manifest, {}).index_dir(cutoff))
    return final


def load_instance(root: str | Path, *, check: bool = True) -> CiteCastInstance:
    """The CiteCast instance at ``root``, verified against its ``SHA256SUMS`` unless ``check`` is False."""
    root = Path(root)
    if not root.is_dir():
        raise ArtifactError(
            f"no CiteCast instance at {root}: no such folder; build it with: "
            f"rap citecast build --instance embedded --out {shlex.quote(str(root))}"
        )
    if not (root / MANIFEST).is_file():
        what = "a RAP instance" if (root / LEDGER_FILE).is_file() else f"a folder without {MANIFEST}"
        raise ArtifactError(f"{root} is {what}, not a CiteCast instance (build one with rap citecast build)")
    if check:
        problems = verify(root)
        if problems:
            raise ArtifactError(f"{root}: " + "; ".join(problems[:5]))
    manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
    return CiteCastInstance(root, manifest, load_tasks(root))
