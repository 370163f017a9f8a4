"""The offline assignment instrument: margin rules, calibration, shares on mini, output contract."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from rap_benchmark.core.records import DIRECTION_KEYS, Assignment
from rap_benchmark.core.schemas import ASSIGNMENTS
from rap_benchmark.core.spec import mini_spec
from rap_benchmark.pipeline.codebook import codebooks_from_blueprint
from rap_benchmark.pipeline.instrument.offline import (
    AssignRules,
    assign_offline,
    calibrate_bridge_strength,
    calibrate_tie_ratio,
    classify,
    distinct_pairs,
    runner_up_ratio,
)
from rap_benchmark.pipeline.synth import generate_mini

SPEC = mini_spec()
RULES = AssignRules()
ALL_DISTINCT = (~np.eye(8, dtype=bool))[None]


@pytest.fixture(scope="module")
def mini_assigned():
    corpus = generate_mini(SPEC)
    codebooks, protos = codebooks_from_blueprint(corpus, SPEC)
    out = assign_offline(corpus.papers, corpus.memberships, codebooks, protos, SPEC)
    return corpus, codebooks, protos, out


def _classify(sims, known=None, level=0.5, distinct=ALL_DISTINCT, tie_ratio=0.8, rules=RULES):
    sims = np.atleast_2d(np.asarray(sims, dtype=np.float64))
    n = len(sims)
    known = np.full(n, 50) if known is None else np.asarray(known)
    return classify(sims, known, np.full(n, level), distinct, np.zeros(n, dtype=np.int64), rules, tie_ratio)


def test_rules_on_hand_made_similarities() -> None:
    base = [0.0] * 8
    single = [0.9, 0.3, *base[2:]]
    boundary = [0.3, 0.45, 0.38, *base[3:]]  # a tie, but the runner-up is weak (< 0.8 x level 0.5)
    bridge = [0.6, 0.58, *base[2:]]
    other = [0.1, 0.05, *base[2:]]
    tie_first = [0.5, 0.5, *base[2:]]
    prim, sec, kind = _classify([single, boundary, bridge, other, tie_first, single], known=[50, 50, 50, 50, 50, 3])
    assert kind.tolist() == ["single", "boundary", "bridge", "other", "bridge", "low_evidence"]
    assert prim.tolist() == ["D0", "D1", "D0", "other", "D0", "other"]
    assert sec.tolist() == [None, "D2", "D1", None, "D1", None]
    # the same tie between two directions that are NOT distinct is a boundary, not a bridge
    not_distinct = np.zeros((1, 8, 8), dtype=bool)
    assert _classify([bridge], distinct=not_distinct)[2].tolist() == ["boundary"]
    # a paper with no similarity at all is other
    assert _classify([[0.0] * 8], level=0.0)[2].tolist() == ["other"]


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, (30, 8), elements=st.floats(0, 1)),
    st.floats(0.3, 0.99),
    st.floats(0.05, 0.9),
)
def test_rule_invariants(sims: np.ndarray, tie_ratio: float, level: float) -> None:
    prim, sec, kind = _classify(sims, level=level, tie_ratio=tie_ratio)
    ratio = runner_up_ratio(sims)
    s1 = sims.max(axis=1)
    for i in range(len(sims)):
        Assignment("x", "f", prim[i], sec[i], kind[i])  # records accept every output
        if kind[i] in ("boundary", "bridge"):
            assert ratio[i] >= tie_ratio and sec[i] != prim[i]
            assert sims[i, int(prim[i][1])] == s1[i]
        if kind[i] == "single":
            assert ratio[i] < tie_ratio and sec[i] is None
        if kind[i] == "other":
            assert s1[i] < RULES.other_ratio * level or s1[i] <= 0
    # a wider tie region never turns a tie into a single
    _, _, wider = _classify(sims, level=level, tie_ratio=tie_ratio * 0.9)
    ties = np.isin(kind, ["boundary", "bridge"])
    assert np.isin(wider[ties], ["boundary", "bridge"]).all()


def test_tie_ratio_is_calibrated_on_pre_cutoff_rows_only() -> None:
    rng = np.random.default_rng(0)
    sims = rng.random((1000, 8))
    pre = np.arange(1000) < 600
    r = calibrate_tie_ratio(sims, np.full(1000, 50), pre, RULES)
    assert r == pytest.approx(np.quantile(runner_up_ratio(sims[:600]), 1 - RULES.tie_rate))
    changed = sims.copy()
    changed[600:] = rng.random((400, 8)) ** 5  # later rows do not move the threshold
    assert calibrate_tie_ratio(changed, np.full(1000, 50), pre, RULES) == r
    assert ((runner_up_ratio(sims[:600]) >= r).mean()) == pytest.approx(RULES.tie_rate, abs=0.01)


@pytest.mark.parametrize("rate", [0.0, 0.0158, 0.05])
def test_bridge_strength_is_calibrated_to_the_bridge_share_on_pre_cutoff_rows(rate: float) -> None:
    """With ``bridge_rate`` set, a share ``rate`` of the calibration rows become bridges (the
    paper's 1.58%), later rows do not move the strength, and the fixed rule is kept without it."""
    rng = np.random.default_rng(3)
    n = 4000
    sims = rng.random((n, 8)) ** 2
    known, pre = np.full(n, 50), np.arange(n) < 3000
    level = np.full(n, float(np.median(sims.max(axis=1))))
    rules = dataclasses.replace(RULES, bridge_rate=rate)
    r = calibrate_tie_ratio(sims, known, pre, rules)
    args = (known, pre, level, ALL_DISTINCT, np.zeros(n, dtype=np.int64), r, rules)
    strength = calibrate_bridge_strength(sims, *args)
    table = np.zeros(n, dtype=np.int64)
    _, _, kind = classify(sims, known, level, ALL_DISTINCT, table, rules, r, strength)
    assert (kind[pre] == "bridge").mean() == pytest.approx(rate, abs=1 / 3000)
    assert rate > 0 or not (kind[pre] == "bridge").any()
    later = sims.copy()
    later[~pre] = rng.random((n - 3000, 8))
    assert calibrate_bridge_strength(later, *args) == strength
    _, _, fixed = classify(sims, known, level, ALL_DISTINCT, table, RULES, r)
    _, _, none = classify(sims, known, level, ALL_DISTINCT, table, RULES, r, None)
    assert (fixed == none).all()
    with pytest.raises(ValueError, match="bridge_rate"):
        AssignRules.from_spec(SPEC.replace(extra={"assign_rules": {"bridge_rate": 1.5}}))


def test_distinct_pairs_is_the_lower_half_of_prototype_similarities() -> None:
    rng = np.random.default_rng(1)
    c = rng.random((8, 20))
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    d = distinct_pairs(c)
    assert (d == d.T).all() and not d.diagonal().any()
    assert d[np.triu_indices(8, 1)].sum() == 14  # 28 pairs, median split


def test_output_contract_on_mini(mini_assigned) -> None:
    corpus, _, _, out = mini_assigned
    assert out.columns.tolist() == ASSIGNMENTS.names
    assert len(out) == len(corpus.memberships)
    assert not out.duplicated(["arxiv_id", "field_id"]).any()
    assert out.equals(out.sort_values(["field_id", "date", "arxiv_id"]).reset_index(drop=True))
    dates = corpus.papers.set_index("arxiv_id")["date"]
    assert (out["date"].to_numpy() == dates.loc[out["arxiv_id"]].to_numpy()).all()
    for row in out.itertuples():
        Assignment(row.arxiv_id, row.field_id, row.primary, row.secondary, row.type)
    assert set(out["primary"]) <= {*DIRECTION_KEYS, "other"}


def test_shares_on_mini_look_like_the_papers_instrument(mini_assigned) -> None:
    """Paper: single 55.48%, boundary 42.60%, bridge 1.58%, other 0.34%, low evidence ~0."""
    _, _, _, out = mini_assigned
    shares = out["type"].value_counts(normalize=True)
    assert 0.50 <= shares["single"] <= 0.62
    assert 0.37 <= shares["boundary"] <= 0.48
    assert 0.005 <= shares["bridge"] <= 0.03
    assert 0.0005 <= shares["other"] <= 0.01
    assert shares.get("low_evidence", 0.0) <= 0.002


def test_primary_recovers_the_latent_direction(mini_assigned) -> None:
    corpus, _, _, out = mini_assigned
    j = out.merge(corpus.truth, on=["arxiv_id", "field_id"])
    hit = j["primary"] == j["true_direction"]
    assert hit[j["type"] == "single"].mean() > 0.93
    assert hit.mean() > 0.8
    tie = j["type"].isin(["boundary", "bridge"])
    assert ((j["primary"] == j["true_direction"]) | (j["secondary"] == j["true_direction"]))[tie].mean() > 0.85


def test_withdrawn_text_is_low_evidence(mini_assigned) -> None:
    corpus, codebooks, protos, _ = mini_assigned
    papers = corpus.papers.copy()
    first = papers.index[0]
    papers.loc[first, ["title", "abstract"]] = ["Withdrawn", "This paper has been withdrawn."]
    mem = corpus.memberships.loc[corpus.memberships["arxiv_id"] == papers.loc[first, "arxiv_id"]]
    out = assign_offline(papers, mem, codebooks, protos, SPEC)
    assert out["type"].tolist() == ["low_evidence"] * len(mem) and (out["primary"] == "other").all()


def test_rules_come_from_the_spec_and_unknown_keys_fail(mini_assigned) -> None:
    corpus, codebooks, protos, base = mini_assigned
    spec = SPEC.replace(extra={"assign_rules": {"tie_rate": 0.2}})
    fewer = assign_offline(corpus.papers, corpus.memberships, codebooks, protos, spec)
    assert (fewer["type"] == "boundary").mean() < (base["type"] == "boundary").mean() - 0.1
    with pytest.raises(ValueError, match="unknown assign_rules keys: tie_margin"):
        AssignRules.from_spec(SPEC.replace(extra={"assign_rules": {"tie_margin": 0.1}}))


def test_missing_papers_or_codebooks_raise(mini_assigned) -> None:
    corpus, codebooks, protos, _ = mini_assigned
    bad = pd.DataFrame({"arxiv_id": ["9999.99999"], "field_id": ["f000"]})
    with pytest.raises(KeyError, match="not in the corpus"):
        assign_offline(corpus.papers, bad, codebooks, protos, SPEC)
    with pytest.raises(KeyError, match="no codebook"):
        assign_offline(corpus.papers, corpus.memberships, codebooks[:3], protos, SPEC)
    assert dataclasses.is_dataclass(protos)
