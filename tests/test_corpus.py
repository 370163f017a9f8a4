"""Corpus readers on recorded real-format fixtures (snapshot JSON lines, API Atom feed, parquet)."""

from __future__ import annotations

import datetime as dt
import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.schemas import PAPERS
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.corpus import (
    CorpusError,
    normalize_arxiv_id,
    normalize_text,
    parse_snapshot_date,
    read_corpus,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "corpus"
SNAPSHOT = FIXTURES / "arxiv-metadata-snapshot.jsonl"
ATOM = FIXTURES / "arxiv-api-query.atom.xml"
SPEC = BenchmarkSpec()  # the paper's window [2022-06-01, 2026-07-01) and four categories


def _malformed(report) -> dict[int, str]:
    return {m.line: m.reason for m in report.malformed}


# -- snapshot -----------------------------------------------------------------------------------


def test_snapshot_counts_every_record():
    papers, report = read_corpus(SNAPSHOT, SPEC)
    assert report.n_read == 18 and report.n_blank == 1
    assert (report.n_kept, report.n_filtered_date, report.n_filtered_category) == (7, 2, 2)
    assert (report.n_duplicates, report.n_malformed) == (1, 6)
    assert report.balanced()
    assert papers.columns.tolist() == PAPERS.names
    assert papers["arxiv_id"].tolist() == [
        "2206.07682",
        "2210.03629",
        "2212.08073",
        "2303.08774",
        "2304.02643",
        "2305.18290",
        "2307.09288",
    ]


def test_snapshot_malformed_lines_named_with_reasons():
    _, report = read_corpus(SNAPSHOT, SPEC)
    bad = _malformed(report)
    assert sorted(bad) == [7, 8, 9, 14, 16, 19]
    assert bad[7].startswith("invalid JSON")
    assert "versions" in bad[8]
    assert "not an arXiv id" in bad[9]
    assert bad[14] == "abstract is empty"
    assert bad[16] == "line is not a JSON object"
    assert "unparseable version date" in bad[19]
    assert all(m.source == SNAPSHOT.name for m in report.malformed)


def test_snapshot_strict_mode_raises_at_first_malformed_line():
    with pytest.raises(CorpusError, match=r"line 7: invalid JSON"):
        read_corpus(SNAPSHOT, SPEC, strict=True)


def test_snapshot_fields_normalised():
    papers, _ = read_corpus(SNAPSHOT, SPEC)
    row = papers.set_index("arxiv_id")
    # v1 date, not the latest version's
    assert row.loc["2303.08774", "date"] == "2023-03-15"
    # newlines and runs of spaces collapsed
    assert row.loc["2305.18290", "title"] == (
        "Direct Preference Optimization: Your Language Model is Secretly a Reward Model"
    )
    assert "\n" not in "".join(papers["abstract"]) and "  " not in "".join(papers["abstract"])
    # authors from authors_parsed: "first last"; missing authors -> empty list
    assert row.loc["2307.09288", "authors"] == ["Hugo Touvron", "Louis Martin", "Kevin Stone", "Peter Albert"]
    assert row.loc["2206.07682", "authors"] == []
    assert row.loc["2304.02643", "categories"] == ["cs.CV", "cs.AI", "cs.LG"]
    # the duplicate line (v2 only, dated a day later) did not replace the v1 record
    assert row.loc["2303.08774", "abstract"].startswith("We report the development of GPT-4, a large-scale")


def test_snapshot_gzip_reads_the_same(tmp_path: Path):
    gz = tmp_path / "snapshot.jsonl.gz"
    with SNAPSHOT.open("rb") as src, gzip.open(gz, "wb") as dst:
        shutil.copyfileobj(src, dst)
    plain, r1 = read_corpus(SNAPSHOT, SPEC)
    packed, r2 = read_corpus(gz, SPEC)
    pd.testing.assert_frame_equal(plain, packed)
    assert [(m.line, m.reason) for m in r1.malformed] == [(m.line, m.reason) for m in r2.malformed]


def test_snapshot_window_and_categories_follow_the_spec():
    spec = SPEC.replace(categories=("cs.CV",), date_start="2023-01-01", date_end="2023-07-01")
    papers, report = read_corpus(SNAPSHOT, spec)
    assert papers["arxiv_id"].tolist() == ["2304.02643"]
    assert report.balanced()


def _line(arxiv_id: str, created: str, categories: str = "cs.LG", title: str = "A title") -> str:
    return json.dumps(
        {
            "id": arxiv_id,
            "categories": categories,
            "title": title,
            "abstract": "An abstract.",
            "versions": [{"version": "v1", "created": created}],
            "authors": "A. One, B. Two and C. Three",
        }
    )


def test_duplicate_with_an_earlier_copy_before_the_window_is_dropped(tmp_path: Path):
    path = tmp_path / "dups.jsonl"
    path.write_text(
        "\n".join(
            [
                _line("2206.00001", "Wed, 8 Jun 2022 10:00:00 GMT"),  # in-window copy
                _line("2206.00001", "Tue, 31 May 2022 23:00:00 GMT"),  # its true v1: before the window
                _line("2301.00002", "Tue, 10 Jan 2023 10:00:00 GMT", title="later copy"),
                _line("2301.00002", "Mon, 2 Jan 2023 10:00:00 GMT", title="earliest copy"),
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    papers, report = read_corpus(path, SPEC)
    assert papers["arxiv_id"].tolist() == ["2301.00002"]
    assert papers["title"].tolist() == ["earliest copy"]
    assert papers["date"].tolist() == ["2023-01-02"]
    assert papers["authors"].tolist() == [["A. One", "B. Two", "C. Three"]]
    assert (report.n_read, report.n_kept, report.n_duplicates, report.n_filtered_date) == (4, 1, 2, 1)
    assert report.balanced()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(2200, 2299),  # id number (collisions make duplicates)
            st.dates(dt.date(2022, 1, 1), dt.date(2026, 12, 31)),
            st.sampled_from(["cs.LG", "math.PR", "cs.CV stat.ML", "hep-th"]),
            st.booleans(),  # malformed?
        ),
        max_size=40,
    )
)
def test_every_record_is_accounted_for(tmp_path_factory, rows):
    path = tmp_path_factory.mktemp("prop") / "s.jsonl"
    lines = []
    for num, day, cats, broken in rows:
        created = dt.datetime(day.year, day.month, day.day, 12).strftime("%a, %d %b %Y %H:%M:%S GMT")
        line = _line(f"2301.{num:05d}", created, cats)
        lines.append(line[:-5] if broken else line)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    papers, report = read_corpus(path, SPEC)
    assert report.balanced() and report.n_read == len(rows)
    assert report.n_malformed == sum(r[3] for r in rows)
    assert papers["arxiv_id"].is_unique
    assert ((papers["date"] >= SPEC.date_start) & (papers["date"] < SPEC.date_end)).all()
    # each kept id carries the earliest date among its well-formed copies
    earliest: dict[str, dt.date] = {}
    for num, day, cats, broken in rows:
        if not broken and set(cats.split()) & set(SPEC.categories):
            key = f"2301.{num:05d}"
            earliest[key] = min(day, earliest.get(key, day))
    expected = sorted(k for k, d in earliest.items() if dt.date(2022, 6, 1) <= d < dt.date(2026, 7, 1))
    assert sorted(papers["arxiv_id"]) == expected
    for arxiv_id, day in zip(papers["arxiv_id"], papers["date"], strict=True):
        assert day == earliest[arxiv_id].isoformat()


# -- Atom feed -----------------------------------------------------------------------------------


def test_atom_feed_counts_and_entries():
    papers, report = read_corpus(ATOM, SPEC)
    assert (report.n_read, report.n_kept, report.n_filtered_date, report.n_filtered_category) == (8, 3, 1, 1)
    assert (report.n_duplicates, report.n_malformed) == (1, 2) and report.balanced()
    row = papers.set_index("arxiv_id")
    assert list(row.index) == ["2306.05685", "2312.00752", "2401.04088"]  # versions stripped, by date
    assert row.loc["2312.00752", "date"] == "2023-12-01"  # published, not updated
    assert row.loc["2401.04088", "categories"] == ["cs.LG", "cs.CL"]  # primary first
    assert row.loc["2401.04088", "authors"] == ["Albert Q. Jiang", "Alexandre Sablayrolles"]
    assert row.loc["2401.04088", "abstract"].startswith("We introduce Mixtral 8x7B")


def test_atom_malformed_entries_named_by_line():
    _, report = read_corpus(ATOM, SPEC)
    bad = _malformed(report)
    assert sorted(bad) == [53, 78]  # the lines their <entry> starts on
    assert bad[53] == "arXiv API error entry: incorrect id format for 2401.0408"
    assert bad[78] == "<published> missing"


def test_atom_not_well_formed_names_the_line(tmp_path: Path):
    broken = tmp_path / "broken.atom"
    text = ATOM.read_text(encoding="utf-8").replace(
        "</title>\n    <summary>  Foundation", "\n    <summary>  Foundation", 1
    )
    broken.write_text(text, encoding="utf-8")
    with pytest.raises(CorpusError, match=r"broken\.atom line \d+: XML is not well-formed"):
        read_corpus(broken, SPEC)


# -- parquet folder ---------------------------------------------------------------------------------


def test_parquet_folder_with_malformed_rows(tmp_path: Path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "arxiv"
    folder.mkdir()
    (folder / "README.md").write_text("not parquet", encoding="utf-8")
    rows_2023 = {
        "arxiv_id": ["2301.00001", "2301.00002", "bad id", "2302.00004", "2303.00005"],
        "title": ["T1", "  T2\n  spaced ", "T3", "", "T5"],
        "abstract": ["A1", "A2", "A3", "A4", "A5"],
        "authors": [["X"], [], ["Y"], [], None],
        "categories": [["cs.CL"], ["cs.LG", "stat.ML"], ["cs.CL"], ["cs.AI"], ["math.PR"]],
        "date": ["2023-01-02", "2023-01-05", "2023-01-09", "2023-02-01", "2023-03-01"],
    }
    rows_2024 = {
        "arxiv_id": ["2301.00001", "2401.00006", "2401.00007"],
        "title": ["T1 again", "T6", "T7"],
        "abstract": ["A1", "A6", "A7"],
        "authors": [["X"], ["Z"], ["W"]],
        "categories": [["cs.CL"], ["cs.CV"], ["cs.CV"]],
        "date": ["2024-01-02", None, "2024-01-03"],
    }
    pq.write_table(pa.table(rows_2023), folder / "arxiv_sample_2023.parquet")
    pq.write_table(pa.table(rows_2024), folder / "arxiv_sample_2024.parquet")
    papers, report = read_corpus(folder, SPEC)
    assert papers["arxiv_id"].tolist() == ["2301.00001", "2301.00002", "2401.00007"]
    assert papers.loc[1, "title"] == "T2 spaced"
    assert papers.loc[0, "title"] == "T1"  # the earlier copy wins
    assert (report.n_read, report.n_duplicates, report.n_filtered_category) == (8, 1, 1)
    assert sorted((m.source, m.line) for m in report.malformed) == [
        ("arxiv_sample_2023.parquet", 3),
        ("arxiv_sample_2023.parquet", 4),
        ("arxiv_sample_2024.parquet", 2),
    ]
    assert report.balanced()


@given(
    st.lists(
        st.one_of(st.none(), st.lists(st.one_of(st.none(), st.sampled_from(["cs.CL", " ", "", "a b", "\t", "é"])))),
        max_size=12,
    ),
    st.integers(0, 3),
)
@settings(max_examples=80, deadline=None)
def test_list_columns_read_flat_as_row_by_row(rows, start):
    """Invariant: a parquet list column read flat (``_str_lists``) gives each row what
    ``_as_str_list`` gives it, null lists and null or blank strings included, also on a slice."""
    import pyarrow as pa

    from rap_benchmark.pipeline.corpus import _as_str_list, _str_lists

    for column in (pa.array(rows, type=pa.list_(pa.string())), pa.array(rows, type=pa.large_list(pa.string()))):
        column = column.slice(min(start, len(rows)))
        assert _str_lists(column) == [_as_str_list(v) for v in column.to_pylist()]
    numbers = pa.array([[1, None, 2], None, []], type=pa.list_(pa.int64()))  # not strings: read row by row
    assert _str_lists(numbers) == [("1", "2"), (), ()]


# -- helpers -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2401.01234", "2401.01234"),
        ("2401.01234v3", "2401.01234"),
        ("http://arxiv.org/abs/2401.01234v1", "2401.01234"),
        ("arXiv:0704.0001", "0704.0001"),
        ("hep-th/9901001v2", "hep-th/9901001"),
        ("math.GT/0309136", "math.GT/0309136"),
        ("cs/0112017", "cs/0112017"),
    ],
)
def test_normalize_arxiv_id(raw: str, expected: str):
    assert normalize_arxiv_id(raw) == expected


@pytest.mark.parametrize("raw", ["", "2401.123", "2401.01234v", "abs/2401.01234", "hello world"])
def test_normalize_arxiv_id_rejects(raw: str):
    with pytest.raises(ValueError):
        normalize_arxiv_id(raw)


@given(st.integers(1, 9999), st.integers(0, 99999), st.integers(1, 30))
def test_new_style_ids_lose_only_their_version(prefix: int, number: int, version: int):
    base = f"{prefix:04d}.{number:05d}"
    assert normalize_arxiv_id(f"{base}v{version}") == base


_SPACES = [
    " ",
    "\n",
    "\t",
    "\r",
    "\x0b",
    "\x0c",
    "\x1c",
    "\x1f",
    "\x85",
    "\xa0",
    "\u2003",
    "\u2028",
    "\u3000",
    "\u200b",
]


@given(st.text() | st.lists(st.sampled_from([*_SPACES, "a", "é", "x y"])).map("".join))
def test_normalize_text_is_idempotent_and_single_spaced(text: str):
    once = normalize_text(text)
    assert once == " ".join(text.split())  # the fast path for text already normal changes nothing
    assert normalize_text(once) == once
    assert "  " not in once and once == once.strip()


def test_parse_snapshot_date_is_utc():
    assert parse_snapshot_date("Mon, 2 Apr 2007 19:18:42 GMT") == dt.date(2007, 4, 2)
    assert parse_snapshot_date("Fri, 30 Jun 2023 23:59:59 GMT") == dt.date(2023, 6, 30)
    with pytest.raises(ValueError):
        parse_snapshot_date("yesterday")


def test_unknown_format_rejected(tmp_path: Path):
    path = tmp_path / "corpus.csv"
    path.write_text("id\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="cannot tell the format"):
        read_corpus(path, SPEC)
