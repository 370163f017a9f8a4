"""The Search tool, its schema and observation JSON, the audit, and ``rap search``."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest
from search_synthetic import manifest_problems, synthetic_instance

from rap_benchmark.bm25 import (
    SearchEngine,
    audit_calls,
    make_search_tool,
    observation_json,
    observation_to_dict,
    read_calls,
    shard_hash,
)
from rap_benchmark.bm25.tokens import CACHE_NAME
from rap_benchmark.cli import main
from rap_benchmark.core.artifacts import LEDGER_FILE, load_instance, write_json, write_table
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import Regime, SearchCall, SearchHit, SearchObservation
from rap_benchmark.core.schemas import EPISODES
from rap_benchmark.core.serial import write_jsonl
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.core.sums import verify, write_sums
from rap_benchmark.core.text import tokenize
from rap_benchmark.tools import tool_schema

ORIGIN = "2025-01-01"


def _manifest(papers: pd.DataFrame, assignments: pd.DataFrame, spec: BenchmarkSpec) -> pd.DataFrame:
    """search_manifest rows computed from the tables alone (string date comparisons)."""
    dates = dict(zip(papers.arxiv_id, papers.date, strict=True))
    rows = []
    for field_id, group in assignments.groupby("field_id", sort=True):
        for origin in spec.origins:
            for regime in ("fixed", "expanding"):
                start = add_months(parse_date(origin), -spec.window_months).isoformat() if regime == "fixed" else None
                ids = [p for p in group.arxiv_id if dates[p] < origin and (start is None or dates[p] >= start)]
                rows.append(
                    {
                        "field_id": field_id,
                        "origin": origin,
                        "regime": regime,
                        "start": start or spec.date_start,  # the expanding regime starts at the corpus start
                        "end": origin,
                        "n_papers": len(ids),
                        "shard_hash": shard_hash(ids),
                    }
                )
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def instance_dir(tmp_path_factory) -> Path:
    """A minimal artifact folder over a generated corpus (with one non-ASCII, long abstract)."""
    spec = BenchmarkSpec(abstract_chars=120)
    synth = synthetic_instance(1_200, 2, seed=9, spec=spec)
    papers = synth.papers.copy()
    papers.loc[5, "abstract"] = "Über-naïve résumé ∑ " + papers.loc[5, "abstract"]
    root = tmp_path_factory.mktemp("inst") / "synthetic"
    root.mkdir()
    write_json(root / LEDGER_FILE, spec.ledger())
    write_json(root / "codebooks.json", [])
    write_table(root, "papers", papers)
    write_table(root, "assignments", synth.assignments)
    write_table(root, "blocks", pd.DataFrame({"field_id": ["F000"], "block_id": ["b0"], "split": ["dev"]}))
    write_table(root, "episodes", pd.DataFrame({c: [] for c in EPISODES.names}))
    write_table(root, "search_manifest", _manifest(papers, synth.assignments, spec))
    write_sums(root)
    return root


@pytest.fixture(scope="module")
def inst(instance_dir):
    return load_instance(instance_dir)


@pytest.fixture(scope="module")
def engine(inst) -> SearchEngine:
    return SearchEngine.from_instance(inst)


def _query(inst, i: int = 0) -> str:
    return " ".join(tokenize(inst.papers.title.iloc[i])[:3])


def test_engine_agrees_with_the_manifest_and_caches_tokens_outside_the_hashes(instance_dir, inst, engine):
    assert manifest_problems(engine, inst.search_manifest) == []
    assert (instance_dir / ".cache" / CACHE_NAME).is_file()
    assert verify(instance_dir) == []  # the cache is never hashed
    again = SearchEngine.from_instance(inst)
    assert again.ranked("F000", ORIGIN, "expanding", _query(inst)) == engine.ranked(
        "F000", ORIGIN, "expanding", _query(inst)
    )


def test_from_dir_reuses_cached_tokens_and_display_text(instance_dir, engine):
    first = SearchEngine.from_dir(instance_dir)  # writes the display cache if absent
    assert (instance_dir / ".cache" / "search_display_v1.arrow").is_file()
    second = SearchEngine.from_dir(instance_dir)  # reads both caches, never the parquet text
    assert verify(instance_dir) == []
    for origin in ("2024-07-01", ORIGIN):
        for regime in Regime:
            for i in range(5):
                q = " ".join(tokenize(engine._titles[40 * i].as_py())[:2])
                want = engine.search("F001", origin, regime, q)
                assert first.search("F001", origin, regime, q) == want
                assert second.search("F001", origin, regime, q) == want


def test_manifest_problems_detect_a_wrong_universe(inst, engine):
    bad = inst.search_manifest.copy()
    bad.loc[0, "n_papers"] += 1
    bad.loc[1, "shard_hash"] = "0" * 64
    problems = manifest_problems(engine, bad)
    assert len(problems) == 2


def test_tool_schema_is_derived_from_the_signature_and_docstring(engine):
    tool = make_search_tool(engine, "F000", ORIGIN, "fixed")
    schema = tool_schema(tool)
    fn = schema["function"]
    assert schema["type"] == "function" and fn["name"] == "search"
    params = fn["parameters"]
    assert params["required"] == ["query"] and params["additionalProperties"] is False
    assert set(params["properties"]) == {"query", "start_date", "end_date"}
    assert all(p["type"] == "string" and p["description"] for p in params["properties"].values())
    assert "YYYY-MM-DD" in params["properties"]["end_date"]["description"]
    assert "inclusive" in params["properties"]["end_date"]["description"]
    assert "at most 8 papers" in fn["description"] and "Args" not in fn["description"]
    json.dumps(schema)  # plain JSON


def test_tool_schema_rejects_undocumented_parameters():
    def f(x: int, y: str | None = None) -> dict:
        """Do f.

        Args:
            x: An int.
        """
        return {}

    with pytest.raises(ValueError, match="'y'"):
        tool_schema(f)


def test_tool_returns_the_engine_observation_and_logs_calls(inst, engine):
    log: list[SearchCall] = []
    tool = make_search_tool(engine, "F000", ORIGIN, Regime.EXPANDING, log=log)
    q = _query(inst, 3)
    out = tool(q)
    obs = engine.search("F000", ORIGIN, "expanding", q)
    assert out == observation_to_dict(obs)
    assert out["total_hits"] == obs.total_hits > 0
    assert set(out["results"][0]) == {"arxiv_id", "title", "date", "abstract"}
    assert all(len(r["abstract"]) <= 120 for r in out["results"])
    narrowed = tool(q, start_date="2024-01-01", end_date="2024-03-31")
    assert all("2024-01-01" <= r["date"] <= "2024-03-31" for r in narrowed["results"])
    widened = tool(q, start_date="1990-01-01", end_date="2030-01-01")  # cannot widen past T
    assert widened == out
    assert [c.query for c in log] == [q, q, q]
    assert log[1].start == dt.date(2024, 1, 1) and log[1].end == dt.date(2024, 3, 31)
    assert log[0].result_ids == tuple(r["arxiv_id"] for r in out["results"])
    with pytest.raises(ValueError, match="start_date"):
        tool(q, start_date="January")
    with pytest.raises(ValueError, match="unknown field"):
        make_search_tool(engine, "nope", ORIGIN, "fixed")


def test_abstracts_are_cut_by_characters_and_non_ascii_is_kept(inst, engine):
    paper = inst.papers.iloc[5]
    q = " ".join(tokenize(paper.title))
    obs = engine.search("F000", "2027-01-01", "expanding", q)
    hit = next(h for h in obs.hits if h.arxiv_id == paper.arxiv_id)
    assert hit.abstract == paper.abstract[:120] and hit.abstract.startswith("Über-naïve résumé ∑")
    assert "Über" in observation_json(obs)


def test_observation_json_is_stable_and_sorted():
    obs = SearchObservation(hits=(SearchHit("2401.00001", "Títle", "2023-12-30", "Abs", 1.5),), total_hits=3)
    text = observation_json(obs)
    assert text == (
        '{"results": [{"abstract": "Abs", "arxiv_id": "2401.00001", "date": "2023-12-30", "title": "Títle"}], '
        '"total_hits": 3}'
    )
    assert observation_json(observation_to_dict(obs)) == text
    assert "score" not in text


def test_audit_reproduces_recorded_calls_and_reports_each_kind_of_difference(tmp_path, inst, engine):
    log: list[SearchCall] = []
    for regime in Regime:
        tool = make_search_tool(engine, "F001", ORIGIN, regime, log=log)
        for i in range(10):
            tool(_query(inst, 20 + i), end_date="2024-12-15" if i % 2 else None)
    path = tmp_path / "calls.jsonl"
    assert write_jsonl(path, log) == 20
    calls = read_calls(path)
    assert calls == log
    assert audit_calls(engine, calls).ok
    multi = next(i for i, c in enumerate(calls) if i >= 2 and len(c.result_ids) >= 2)
    c = calls[multi]
    calls[multi] = SearchCall(**{**{f: getattr(c, f) for f in c.__slots__}, "result_ids": c.result_ids[::-1]})
    calls[0] = SearchCall(**{**{f: getattr(calls[0], f) for f in c.__slots__}, "total_hits": calls[0].total_hits + 1})
    calls[1] = SearchCall(**{**{f: getattr(calls[1], f) for f in c.__slots__}, "result_ids": ("9999.99999",)})
    report = audit_calls(engine, calls)
    got = {m.index: m.problems for m in report.mismatches}
    assert got[multi] == ("order",) and got[0] == ("total",) and got[1][0] == "ids"
    assert len(report.mismatches) == 3 and not report.ok and "3 differ" in report.summary()
    with pytest.raises(ValueError, match="calls.jsonl:1"):
        (tmp_path / "calls.jsonl").write_text('{"field_id": "F000"}\n', encoding="utf-8")
        read_calls(tmp_path / "calls.jsonl")


def test_cli_json_prints_exactly_the_agent_observation(instance_dir, inst, engine, capsys):
    q = _query(inst, 7)
    rc = main(
        ["search", str(instance_dir), "--field", "F000", "--origin", ORIGIN, "--regime", "expanding", "--json", q]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert out == observation_json(engine.search("F000", ORIGIN, "expanding", q)) + "\n"
    tool_out = make_search_tool(engine, "F000", ORIGIN, "expanding")(q)
    assert out.strip() == observation_json(tool_out)


def test_cli_table_and_audit(tmp_path, instance_dir, inst, engine, capsys):
    q = _query(inst, 8)
    assert main(["search", str(instance_dir), "--field", "F001", "--origin", ORIGIN, q]) == 0
    table = capsys.readouterr().out
    obs = engine.search("F001", ORIGIN, "fixed", q)
    assert f"{obs.total_hits} papers match" in table
    assert all(h.arxiv_id in table for h in obs.hits)
    log: list[SearchCall] = []
    tool = make_search_tool(engine, "F001", ORIGIN, "fixed", log=log)
    for i in range(5):
        tool(_query(inst, 40 + i))
    calls_path = tmp_path / "calls.jsonl"
    write_jsonl(calls_path, log)
    assert main(["audit", "search", str(instance_dir), str(calls_path)]) == 0
    assert "5 reproduced exactly, 0 differ" in capsys.readouterr().out
    bad = [SearchCall(**{**{f: getattr(c, f) for f in c.__slots__}, "total_hits": c.total_hits + 1}) for c in log]
    write_jsonl(calls_path, bad)
    assert main(["audit", "search", str(instance_dir), str(calls_path)]) == 1
    assert main(["search", str(instance_dir), "graph"]) == 2  # --field/--origin missing
