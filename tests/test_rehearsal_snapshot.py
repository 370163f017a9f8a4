"""The synthetic arXiv metadata snapshot: the real JSON-lines format, deterministic, and read by
the corpus reader with exactly the planned counts."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import orjson
from arxiv_snapshot import PAPER_FRAME, TOTAL_RECORDS, Plan, write_snapshot

from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.corpus import read_corpus

SNAPSHOT_KEYS = {
    "id", "submitter", "authors", "title", "comments", "journal-ref", "doi", "report-no", "categories", "license",
    "abstract", "versions", "update_date", "authors_parsed",
}  # fmt: skip


def test_snapshot_has_the_real_format_and_the_planned_counts(tmp_path: Path) -> None:
    path = tmp_path / "snap.jsonl"
    plan = write_snapshot(path, scale=0.001, seed=3)
    lines = path.read_bytes().splitlines()
    assert len(lines) == plan.n_records
    records = [orjson.loads(line) for line in lines]
    assert all(set(r) == SNAPSHOT_KEYS for r in records)
    assert any("/" in r["id"] for r in records) and any("." in r["id"] and "/" not in r["id"] for r in records)
    first = records[-1]
    assert first["versions"][0]["version"] == "v1" and first["versions"][0]["created"].endswith(" GMT")
    assert first["abstract"].startswith("  ") and all(len(a) == 3 for a in first["authors_parsed"])
    papers, report = read_corpus(path, BenchmarkSpec())
    assert report.n_read == plan.n_records and len(papers) == plan.n_in_frame and report.n_malformed == 0


def test_snapshot_is_deterministic_and_gzip_reads_the_same(tmp_path: Path) -> None:
    a, b, gz = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl.gz"
    for p in (a, b, gz):
        write_snapshot(p, scale=0.0005, seed=7)
    assert hashlib.sha256(a.read_bytes()).digest() == hashlib.sha256(b.read_bytes()).digest()
    assert gzip.decompress(gz.read_bytes()) == a.read_bytes()
    assert (
        a.read_bytes()
        != (write_snapshot(tmp_path / "d.jsonl", scale=0.0005, seed=8), (tmp_path / "d.jsonl").read_bytes())[1]
    )


def test_paper_scale_plan_matches_the_paper() -> None:
    plan = Plan.make(1.0)
    assert plan.n_in_frame == PAPER_FRAME
    assert abs(plan.n_records - TOTAL_RECORDS) / TOTAL_RECORDS < 0.001


def test_texts_are_wrapped_capitalised_sentences(tmp_path: Path) -> None:
    """Abstracts are the snapshot's layout (two leading spaces, lines of eleven words joined by a
    newline and two spaces, a closing newline) holding capitalised sentences that end in a full
    stop; titles are one capitalised line without a stop."""
    path = tmp_path / "snap.jsonl"
    write_snapshot(path, scale=0.0005, seed=5)
    for line in path.read_bytes().splitlines():
        record = orjson.loads(line)
        title, abstract = record["title"], record["abstract"]
        assert "\n" not in title and title[0].isupper() and title == title[0] + title[1:].lower()
        assert not title.endswith(".") and 5 <= len(title.split(" ")) <= 10
        assert abstract.startswith("  ") and abstract.endswith(".\n") and not abstract.startswith("   ")
        rows = [row.split(" ") for row in abstract[2:-1].split("\n  ")]
        assert all(len(row) == 11 for row in rows[:-1]) and 1 <= len(rows[-1]) <= 11
        words = [w for row in rows for w in row]
        assert all(w and w == w.strip() for w in words)
        starts = [0] + [i + 1 for i, w in enumerate(words[:-1]) if w.endswith(".")]
        assert all(words[i][0].isupper() for i in starts)
        assert all(w.islower() or i in starts for i, w in enumerate(words))
