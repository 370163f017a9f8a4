"""The mini generator: deterministic, well-formed, with dynamics that separate the baselines."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr

from rap_benchmark.core.dates import add_months
from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.core.spec import mini_spec
from rap_benchmark.core.text import tokenize
from rap_benchmark.pipeline.synth import BLUEPRINTS, MiniCorpus, generate_mini


@pytest.fixture(scope="module")
def corpus() -> MiniCorpus:
    return generate_mini(mini_spec())


def test_same_seed_same_corpus_other_seed_differs(corpus: MiniCorpus) -> None:
    again = generate_mini(mini_spec())
    pd.testing.assert_frame_equal(corpus.papers, again.papers)
    pd.testing.assert_frame_equal(corpus.truth, again.truth)
    pd.testing.assert_frame_equal(corpus.shares, again.shares)
    other = generate_mini(mini_spec().replace(seed=1))
    assert not corpus.papers["abstract"].head(50).equals(other.papers["abstract"].head(50))


def test_papers_are_well_formed(corpus: MiniCorpus) -> None:
    spec = mini_spec()
    p = corpus.papers
    assert list(p.columns) == ["arxiv_id", "date", "title", "abstract", "categories", "authors"]
    assert 25_000 <= len(p) <= 40_000
    assert p["arxiv_id"].is_unique
    assert (p["date"] >= spec.date_start).all() and (p["date"] < spec.date_end).all()
    assert p.equals(p.sort_values(["date", "arxiv_id"]).reset_index(drop=True))
    # ids encode the month like arXiv's: YYMM.NNNNN
    assert (p["arxiv_id"].str[:4] == p["date"].str[2:4] + p["date"].str[5:7]).all()
    assert all(set(c) <= set(spec.categories) and len(c) >= 1 for c in p["categories"])
    assert all(len(a) >= 1 for a in p["authors"])
    assert (p["title"].str.len() > 0).all() and (p["abstract"].str.len() > 0).all()


def test_memberships_and_truth_cover_twelve_fields_of_eight_directions(corpus: MiniCorpus) -> None:
    t = corpus.truth
    assert sorted(corpus.field_info) == [f"f{i:03d}" for i in range(12)]
    assert set(t["true_direction"]) == set(DIRECTION_KEYS)
    assert t.groupby("field_id")["true_direction"].nunique().eq(8).all()
    pd.testing.assert_frame_equal(corpus.memberships, t[["arxiv_id", "field_id"]])
    assert not t.duplicated(["arxiv_id", "field_id"]).any()
    assert set(t["arxiv_id"]) == set(corpus.papers["arxiv_id"])
    shares = corpus.shares[list(DIRECTION_KEYS)].to_numpy()
    np.testing.assert_allclose(shares.sum(axis=1), 1.0)


def test_text_carries_the_true_direction(corpus: MiniCorpus) -> None:
    """Most of a paper's direction-specific tokens belong to its true direction."""
    bp = {fb.field_id: fb for fb in BLUEPRINTS}
    sample = corpus.truth.iloc[::40].merge(corpus.papers, on="arxiv_id")
    hits = []
    for row in sample.itertuples():
        tokens = tokenize(f"{row.title} {row.abstract}")
        dirs = bp[row.field_id].directions
        counts = [sum(t in set(d.words) for t in tokens) for d in dirs]
        if sum(counts):
            hits.append(int(np.argmax(counts)) == int(row.true_direction[1]))
    assert np.mean(hits) > 0.8


def _compositions(corpus: MiniCorpus, field_id: str, origin, months: int = 6):
    t = corpus.truth.loc[corpus.truth["field_id"] == field_id].merge(corpus.papers[["arxiv_id", "date"]])
    d = t["true_direction"].str[1].astype(int).to_numpy()
    dates = t["date"].to_numpy()

    def comp(lo, hi):
        c = np.bincount(d[(dates >= lo.isoformat()) & (dates < hi.isoformat())], minlength=8).astype(float)
        return c / c.sum()

    hist = [comp(add_months(origin, -6 * (k + 1)), add_months(origin, -6 * k)) for k in (2, 1, 0)]
    return hist, comp(origin, add_months(origin, months))


def test_dynamics_make_ewma_beat_recent_and_an_oracle_beat_both(corpus: MiniCorpus) -> None:
    """Field-macro Spearman on the latent labels: oracle (latent future shares) > EWMA > Recent,
    and neither baseline is perfect (the mini instance must separate forecasters)."""
    spec = mini_spec()
    scores = {"recent": [], "ewma": [], "oracle": []}
    for fid in sorted(corpus.field_info):
        per = {k: [] for k in scores}
        sh = corpus.shares.loc[corpus.shares["field_id"] == fid]
        for origin in spec.origin_dates:
            hist, y = _compositions(corpus, fid, origin)
            ewma = 0.25 * hist[0] + 0.25 * hist[1] + 0.5 * hist[2]
            fut = sh.loc[(sh["month"] >= origin.isoformat()) & (sh["month"] < add_months(origin, 6).isoformat())]
            oracle = (fut[list(DIRECTION_KEYS)].to_numpy() * fut[["volume"]].to_numpy()).sum(axis=0)
            per["recent"].append(spearmanr(hist[2], y)[0])
            per["ewma"].append(spearmanr(ewma, y)[0])
            per["oracle"].append(spearmanr(oracle, y)[0])
        for k in scores:
            scores[k].append(np.mean(per[k]))
    macro = {k: float(np.mean(v)) for k, v in scores.items()}
    assert macro["oracle"] > macro["ewma"] > macro["recent"]
    assert macro["ewma"] < 0.9 and macro["recent"] > 0.5
    # an emerging and a fading direction per field: the latent share of some direction moves a lot
    moves = corpus.shares.groupby("field_id")[list(DIRECTION_KEYS)].agg(
        lambda s: s.iloc[-12:].mean() / s.iloc[:12].mean()
    )
    assert (moves.max(axis=1) > 1.8).mean() >= 0.75 and (moves.min(axis=1) < 0.6).mean() >= 0.75


def test_some_field_pairs_form_blocks_and_others_overlap_weakly(corpus: MiniCorpus) -> None:
    spec = mini_spec()
    m = corpus.memberships.merge(corpus.papers[["arxiv_id", "date"]])
    pre = m.loc[m["date"] < spec.codebook_cutoff]
    sets = {f: set(g["arxiv_id"]) for f, g in pre.groupby("field_id")}
    strong, weak = [], []
    for a, b in itertools.combinations(sorted(sets), 2):
        shared = len(sets[a] & sets[b])
        if not shared:
            continue
        coef = shared / min(len(sets[a]), len(sets[b]))
        if shared >= spec.block_min_shared and coef >= spec.block_min_overlap:
            strong.append((a, b))
        else:
            weak.append((a, b))
    assert len(strong) >= 2
    assert len(weak) >= 2


def test_volume_grows(corpus: MiniCorpus) -> None:
    per_year = corpus.papers["date"].str[:4].value_counts().sort_index()
    assert per_year["2025"] > 1.5 * per_year["2023"]
