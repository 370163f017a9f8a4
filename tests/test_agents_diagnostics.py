"""Diagnostics (replay, oracle input, trace audit, trace statistics) and SFT export/gate on mini,
driven by the reference agent and a scripted backend."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from scripted_backend import ScriptedBackend

from rap_benchmark.agents import diagnostics as dg
from rap_benchmark.agents.prompts import format_answer
from rap_benchmark.agents.protocol import ModelTurn
from rap_benchmark.agents.reference import ReferenceBackend
from rap_benchmark.agents.runner import episode_cells, run_benchmark
from rap_benchmark.agents.sft import export_sft, sft_gate
from rap_benchmark.agents.store import RunStore, UnitKey
from rap_benchmark.core.records import Condition


@pytest.fixture(scope="module")
def ref_run(mini, tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "run"
    run_benchmark(
        mini.public_view(),
        ReferenceBackend(),
        out,
        model="reference/search-hits",
        conditions=list(Condition),
        fields=mini.field_ids[:3],
        progress=False,
    )
    return out


def echo_backend() -> ScriptedBackend:
    """Answers with the prompt's first numbers as weights (so prompt content shows in the answer)."""

    def script(req, ctx):
        found = re.findall(r"^  D\d \(.*\): ([0-9.]+(?:e[+-]?\d+)?)$", req.messages[1]["content"], flags=re.MULTILINE)
        nums = [float(x) for x in found][:8]
        return ModelTurn(content=format_answer(nums if len(nums) == 8 and sum(nums) > 0 else [1] * 8))

    return ScriptedBackend(script, model="echo")


def test_replay_evidence_is_byte_identical_and_excludes_the_answer(mini, ref_run):
    store = RunStore(ref_run)
    recs = dg.native_records(store, conditions=[Condition.A3])
    units = dg.replay_units(mini, store, "echo", conditions=[Condition.A3])
    assert len(units) == 2 * len(recs)
    by_key = {(u.key.field_id, u.key.origin, u.key.variant): u for u in units}
    for rec in recs:
        ev = dg.serialise_evidence(rec)
        assert ev.count("[call ") == rec["n_search_calls"] == 16
        for variant in dg.REPLAY_VARIANTS:
            prompt = by_key[(rec["key"]["field_id"], rec["key"]["origin"], variant)].user_prompt
            assert ev in prompt
            assert rec["answer_text"] not in prompt and rec["messages"][0]["content"] not in prompt
        tool_contents = [m["content"] for m in rec["messages"] if m["role"] == "tool"]
        assert all(c in ev for c in tool_contents)
    # identical calls and observations give identical bytes, whatever else the messages hold
    rec = dict(recs[0])
    rec["messages"] = [
        dict(m, content=m["content"]) if m["role"] == "tool" else {"role": m["role"], "content": "x"}
        for m in rec["messages"]
    ]
    for m, orig in zip(rec["messages"], recs[0]["messages"], strict=True):
        if orig["role"] == "tool":
            m["tool_call_id"] = orig["tool_call_id"]
    assert dg.serialise_evidence(rec) == dg.serialise_evidence(recs[0])


def test_replay_run_writes_readouts_and_agreement(mini, ref_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ref_run, run)
    units = dg.replay_units(mini, RunStore(run), "reference/search-hits", conditions=[Condition.A1, Condition.A3])
    summary = dg.run_variant_units(mini, ReferenceBackend(), run, units, progress=False)
    files = summary["files"]
    assert set(files) == {f"{v}_{c}.jsonl" for v in dg.REPLAY_VARIANTS for c in ("A1", "A3")}
    from rap_benchmark.evaluation.predictions import read_predictions

    state = read_predictions(run / "diagnostics" / "replay-state_A3.jsonl")
    assert set(state["condition"]) == {"A4"} and state["valid"].all()
    assert summary["stats"]["invalid"] == 0


def test_oracle_prompts_carry_exact_pre_t_counts_only(mini):
    cells = episode_cells(mini, fields=mini.field_ids[:2])
    eps = mini.episodes[mini.episodes.policy == "canonical"].set_index(["field_id", "origin"])
    units = dg.oracle_units(mini, "m", cells)
    assert len(units) == 3 * len(cells)
    for u in units:
        row = eps.loc[(u.key.field_id, u.key.origin)]
        lines = re.findall(r"^  D\d \(.*\): ([0-9.]+(?:e[+-]?\d+)?)$", u.user_prompt, flags=re.MULTILINE)
        shown = [float(v) for v in lines]
        if u.key.variant == "oracle-recent":
            assert shown == [float(v) for v in row.x_counts]
        else:
            assert shown == [float(v) for h in row.history_counts for v in h]
        assert (u.regime is not None) == (u.key.variant == "oracle-history-search")
    # y never reaches a prompt: scrambling it leaves every prompt unchanged
    import dataclasses

    scrambled = mini.episodes.copy()
    scrambled["y_counts"] = [list(np.arange(8.0) * 1000 + 7) for _ in range(len(scrambled))]
    scrambled["y"] = [list(np.full(8, 0.125)) for _ in range(len(scrambled))]
    other = dg.oracle_units(dataclasses.replace(mini, episodes=scrambled), "m", cells)
    assert [u.user_prompt for u in units] == [u.user_prompt for u in other]


def test_oracle_run_through_the_loop(mini, tmp_path):
    cells = episode_cells(mini, fields=mini.field_ids[:1])
    units = dg.oracle_units(mini, "echo", cells, variants=["oracle-recent"])
    summary = dg.run_variant_units(mini, echo_backend(), tmp_path, units, progress=False)
    assert summary["files"]["oracle-recent_A0.jsonl"]["valid"] == len(cells)
    rec = RunStore(tmp_path).load(UnitKey("echo", cells[0][0], cells[0][1], Condition.A0, "oracle-recent"))
    x_counts = (
        mini.episodes[(mini.episodes.policy == "canonical") & (mini.episodes.field_id == cells[0][0])].iloc[0].x_counts
    )
    if sum(x_counts) > 0:
        np.testing.assert_allclose(rec["weights"], np.asarray(x_counts) / sum(x_counts), atol=1e-3)


def test_trace_audit_reproduces_every_call(mini, ref_run):
    table, summary = dg.trace_audit(mini, RunStore(ref_run))
    n_calls = sum(r["n_search_calls"] for r in RunStore(ref_run).iter_units())
    assert summary["exact"] and summary["n_calls"] == summary["n_reproduced"] == n_calls > 0
    assert set(table["condition"]) == {"A1", "A2", "A3", "A4"}
    comp = np.array(table["native_composition"].tolist())
    np.testing.assert_allclose(comp.sum(axis=1), 1.0)


def test_trace_audit_detects_a_tampered_call(mini, ref_run, tmp_path):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ref_run, run)
    store = RunStore(run)
    rec = next(r for r in store.iter_units() if r["n_search_calls"])
    rec["search_calls"][0]["total_hits"] += 1
    store.save(UnitKey.from_dict(rec["key"]), {k: v for k, v in rec.items() if k not in ("key", "unit_id")})
    _, summary = dg.trace_audit(mini, store)
    assert not summary["exact"] and summary["n_reproduced"] == summary["n_calls"] - 1


def test_trace_stats_and_pair_overlap(mini, ref_run):
    table, pairs = dg.trace_stats(mini, RunStore(ref_run))
    a1 = table[table.condition == "A1"]
    assert (a1.n_calls == 16).all() and (a1.query_unique_ratio == 1.0).all()
    assert (a1.n_results == a1.n_distinct + a1.n_duplicates).all()
    assert (a1.recent_share == 1.0).all()  # fixed universe: everything is from [T-6mo, T)
    # the reference agent issues the same calls for Forecast and State: full overlap
    assert len(pairs) == 2 * 3 * len(mini.spec.origins) and np.allclose(pairs.jaccard, 1.0)


def test_sft_export_replaces_the_answer_with_y(mini, ref_run, tmp_path):
    out = tmp_path / "sft.jsonl"
    counts = export_sft(mini, RunStore(ref_run), out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert counts["written"] == len(lines) > 0
    eps = mini.episodes[mini.episodes.policy == "canonical"].set_index(["field_id", "origin"])
    for ex in lines:
        msgs = ex["messages"]
        assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
        assert sum(1 for m in msgs if m["role"] == "tool") == ex["meta"]["teacher_calls"]
        assert all("reasoning_content" not in m for m in msgs)
        final = json.loads(msgs[-1]["content"])
        y = np.asarray(eps.loc[(ex["meta"]["field_id"], ex["meta"]["origin"])].y)
        # 3 decimals: each value moves <= 0.0005 points, the residue (<= 7 x 0.0005) goes to the largest
        np.testing.assert_allclose(np.array(list(final.values())) / 100, y, atol=4e-5)
        assert ex["tools"][0]["function"]["name"] == "search"
    with pytest.raises(ValueError):
        export_sft(mini, RunStore(ref_run), out, conditions=[Condition.A2])


def test_sft_gate(mini, ref_run, tmp_path):
    """The reference agent against the uniform agent: a real gain, Search used, unique queries."""
    base = tmp_path / "uniform"
    run_benchmark(
        mini.public_view(),
        ReferenceBackend("reference/uniform"),
        base,
        model="reference/search-hits",
        conditions=[Condition.A1, Condition.A3],
        fields=mini.field_ids[:3],
        progress=False,
    )
    res = sft_gate(mini, RunStore(ref_run), RunStore(base))
    assert res.n_cells == 2 * 3 * len(mini.spec.origins)
    assert res.pooled_gain > 0.03 and res.passed and res.checks["query_unique_ratio"]
    worse = sft_gate(mini, RunStore(base), RunStore(ref_run))
    assert not worse.passed and not worse.checks["search_use"] and worse.pooled_gain < 0
