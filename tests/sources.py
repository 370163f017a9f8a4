"""Source corpora written as a user would pass them to ``rap build --source``, folder digests, and
corpora garbled after a cutoff (shared by the living, instrument-cache and codebook tests)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from rap_benchmark.core.schemas import PAPERS


def write_source(papers: pd.DataFrame, folder: Path) -> Path:
    """``papers`` as a parquet source folder (the papers schema's columns, in order)."""
    folder.mkdir(parents=True)
    frame = papers[list(PAPERS.names)].reset_index(drop=True)
    pq.write_table(pa.Table.from_pandas(frame, schema=PAPERS, preserve_index=False), folder / "papers.parquet")
    return folder


def file_digests(folder: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file below ``folder`` by relative path, leaving out paths through ``skip``."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not set(skip) & set(p.relative_to(folder).parts)
    }


def garble_after(papers: pd.DataFrame, cutoff: str, *, abstract: str, keep_every: int) -> pd.DataFrame:
    """``papers`` with every paper dated on or after ``cutoff`` rewritten (title "zzleak qqleak",
    abstract ``abstract``: leak words), and all but every ``keep_every``-th row dropped from them:
    whatever reads only pre-cutoff papers cannot tell the result from ``papers``."""
    late = papers["date"] >= cutoff
    out = papers.copy()
    out.loc[late, "title"] = "zzleak qqleak"
    out.loc[late, "abstract"] = abstract
    keep = ~late | (np.arange(len(papers)) % keep_every == 0)
    return out.loc[keep].reset_index(drop=True)
