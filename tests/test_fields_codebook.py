"""TF-IDF space, spherical k-means, fields from text and codebooks (offline path)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment
from sources import garble_after

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.core.spec import mini_spec
from rap_benchmark.core.text import tokenize
from rap_benchmark.pipeline.clusters import spherical_kmeans_dense
from rap_benchmark.pipeline.codebook import build_codebooks, codebooks_from_blueprint
from rap_benchmark.pipeline.features import Features, LocalSpace
from rap_benchmark.pipeline.fields import TfidfSpace, build_fields, fit_fields, tokenize_papers
from rap_benchmark.pipeline.synth import MiniCorpus, generate_mini

SPEC = mini_spec()


@pytest.fixture(scope="module")
def corpus() -> MiniCorpus:
    return generate_mini(SPEC)


def _frame(texts: list[str]) -> pd.DataFrame:
    return pd.DataFrame(
        {"arxiv_id": [f"id{i}" for i in range(len(texts))], "title": ["" for _ in texts], "abstract": texts}
    )


# -- TF-IDF ------------------------------------------------------------------------------------

WORDS = st.sampled_from(["graph", "speech", "vision", "token", "reward", "policy", "node", "audio", "pixel"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(WORDS, min_size=0, max_size=12), min_size=2, max_size=15))
def test_tfidf_matches_scikit_learn(docs: list[list[str]]) -> None:
    """Oracle: scikit-learn's TfidfVectorizer with sublinear tf and smoothed idf."""
    sklearn_text = pytest.importorskip("sklearn.feature_extraction.text")
    texts = [" ".join(d) for d in docs]
    corpus = tokenize_papers(_frame(texts))
    space = TfidfSpace.fit(corpus, min_df=1, max_df_ratio=1.0)
    if space.n_terms == 0:
        return
    x, n_known = space.transform(corpus)
    ref = sklearn_text.TfidfVectorizer(
        vocabulary=list(space.terms), sublinear_tf=True, token_pattern=r"[a-z0-9]+", lowercase=True
    )
    ref.fit(texts)
    np.testing.assert_allclose(space.idf, ref.idf_, rtol=1e-12)
    np.testing.assert_allclose(x.toarray(), ref.transform(texts).toarray(), rtol=1e-10, atol=1e-12)
    assert n_known.tolist() == [len(d) for d in docs]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.lists(WORDS, min_size=0, max_size=12), min_size=4, max_size=15), st.integers(0, 2**31 - 1))
def test_a_fields_local_space_is_the_field_spaces_rules_on_its_rows(docs: list[list[str]], seed: int) -> None:
    """Oracle: a field's LocalSpace (unigrams and bigrams) weighs its columns as scikit-learn's
    TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True) with min_df=2, max_df=0.5 picks and
    weighs them, through the same helpers as the field space; its LSA axes are orthonormal and
    each one's largest loading is positive."""
    sklearn_text = pytest.importorskip("sklearn.feature_extraction.text")
    texts = [" ".join(d) for d in docs]
    corpus = tokenize_papers(_frame(texts))
    features = Features.fit(corpus, min_df=1)
    counts, _ = features.counts(corpus)
    ref = sklearn_text.TfidfVectorizer(
        ngram_range=(1, 2), sublinear_tf=True, min_df=2, max_df=0.5, token_pattern=r"[a-z0-9]+", dtype=np.float64
    )
    try:
        ref.fit(texts)
    except ValueError:  # no term in the band: no local space either
        with pytest.raises(ValueError):
            LocalSpace.fit(counts, dims=3, seed=seed)
        return
    space = LocalSpace.fit(counts, dims=3, seed=seed)
    names = np.asarray(features.names, dtype=object)[space.columns]
    order = np.argsort(names)
    assert names[order].tolist() == ref.get_feature_names_out().tolist()
    np.testing.assert_allclose(space.idf[order], ref.idf_, rtol=1e-12)
    np.testing.assert_allclose(space.tfidf(counts).toarray()[:, order], ref.transform(texts).toarray(), atol=1e-12)
    axes = space.axes
    np.testing.assert_allclose(axes @ axes.T, np.eye(axes.shape[0]), atol=1e-8)
    assert (axes[np.arange(axes.shape[0]), np.abs(axes).argmax(axis=1)] > 0).all()


def test_tfidf_vocabulary_bounds_and_unknown_tokens() -> None:
    texts = ["alpha beta gamma", "alpha beta", "alpha delta", "alpha zeta zeta"]
    corpus = tokenize_papers(_frame(texts))
    space = TfidfSpace.fit(corpus, min_df=2, max_df_ratio=0.6)
    assert space.terms == ("beta",)  # alpha is in every doc (> 60%), the rest in one doc
    x, known = space.transform(corpus)
    assert known.tolist() == [1, 1, 0, 0]
    np.testing.assert_allclose(sp.linalg.norm(x, axis=1), [1, 1, 0, 0])
    capped = TfidfSpace.fit(corpus, min_df=1, max_df_ratio=1.0, max_terms=2)
    assert capped.terms == ("alpha", "beta")  # the two most frequent; ties broken by term


def test_tokenized_corpus_matches_the_shared_tokenizer(corpus: MiniCorpus) -> None:
    papers = corpus.papers.head(300)
    tok = tokenize_papers(papers)
    for i in (0, 17, 299):
        row = papers.iloc[i]
        assert tok.tokens(i) == tokenize(f"{row.title} {row.abstract}")
    sub = tok.select(np.array([299, 0]))
    assert sub.tokens(0) == tok.tokens(299) and sub.tokens(1) == tok.tokens(0)


# -- spherical k-means -------------------------------------------------------------------------


def test_spherical_kmeans_recovers_separated_clusters_and_is_seeded() -> None:
    rng = np.random.default_rng(0)
    centres = np.eye(6)[:3] + 0.05
    truth = np.repeat(np.arange(3), 40)
    x = centres[truth] + rng.normal(0, 0.05, (120, 6)).clip(-0.04, None)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    labels, cents = spherical_kmeans_dense(x, 3, np.random.default_rng(1))
    table = np.zeros((3, 3))
    np.add.at(table, (labels, truth), 1)
    r, c = linear_sum_assignment(-table)
    assert table[r, c].sum() == 120
    np.testing.assert_allclose(np.linalg.norm(cents, axis=1), 1.0)
    again, _ = spherical_kmeans_dense(x, 3, np.random.default_rng(1))
    assert (again == labels).all()


# -- fields ------------------------------------------------------------------------------------


def test_build_fields_recovers_the_generators_fields(corpus: MiniCorpus) -> None:
    papers = corpus.papers.iloc[::2].reset_index(drop=True)
    spec = SPEC.replace(min_field_papers=150, extra={"field_fit_sample": 5000})
    memberships, info = build_fields(papers, spec)
    assert sorted(info) == [f"f{i:03d}" for i in range(len(info))]
    assert 10 <= len(info) <= 12
    assert set(memberships["arxiv_id"]) == set(papers["arxiv_id"])  # all papers, any date
    assert not memberships.duplicated().any()
    assert memberships.equals(memberships.sort_values(["field_id", "arxiv_id"]).reset_index(drop=True))
    found = {f: set(g["arxiv_id"]) for f, g in memberships.groupby("field_id")}
    true = {f: set(g["arxiv_id"]) for f, g in corpus.memberships.groupby("field_id")}
    true = {f: t & set(papers["arxiv_id"]) for f, t in true.items()}
    best = [max(len(t & s) / len(t | s) for s in found.values()) for t in true.values()]
    assert np.median(best) > 0.6
    elig = papers.loc[papers["date"] < spec.eligibility_end, "arxiv_id"]
    counts = memberships.loc[memberships["arxiv_id"].isin(set(elig))].groupby("field_id").size()
    assert (counts >= spec.min_field_papers).all()
    # names come from text
    assert all(fi.name and fi.definition.startswith(f"Research on {fi.name}") for fi in info.values())
    assert len({fi.name.lower() for fi in info.values()}) == len(info)  # distinct phrase names


def test_build_fields_is_deterministic_and_drops_small_fields(corpus: MiniCorpus) -> None:
    papers = corpus.papers.iloc[::6].reset_index(drop=True)
    spec = SPEC.replace(min_field_papers=50)
    a = fit_fields(papers, spec)
    shuffled = papers.sample(frac=1.0, random_state=3)
    b = build_fields(shuffled, spec)  # row order does not matter
    pd.testing.assert_frame_equal(a[0], b[0])
    assert a[1] == b[1]
    # the frozen model gives the build's papers the build's table, dtypes included
    pd.testing.assert_frame_equal(a[2].memberships(shuffled), a[0])
    none, info, model = fit_fields(papers, SPEC.replace(min_field_papers=10**6))
    assert info == {} and none.empty
    pd.testing.assert_frame_equal(model.memberships(papers), none)


def test_a_corpus_too_small_or_too_uniform_for_fields_is_one_cli_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: more n_fields than eligible papers was a bare ValueError, and papers too alike to
    leave two TF-IDF terms reached scikit-learn's randomized_svd with n_components=-1: both were
    tracebacks from rap build. Now each is an InputError: one line, exit 2, nothing written."""
    import json

    from rap_benchmark.cli import main as rap
    from rap_benchmark.core.errors import InputError

    versions = [{"version": "v1", "created": "Mon, 2 Jan 2023 10:00:00 GMT"}]
    record = {"title": "alpha beta", "abstract": "alpha beta gamma delta", "categories": "cs.LG", "versions": versions}
    snap = tmp_path / "same.jsonl"
    snap.write_text("".join(json.dumps({"id": f"2301.{i:05d}", **record}) + "\n" for i in range(50)))
    papers = _frame(["alpha beta gamma delta"] * 50).assign(date="2023-01-02")
    for n_fields, message in ((51, "50 papers before eligibility_end"), (3, "0 term(s) occur in at least 3")):
        spec = SPEC.replace(name="tiny", n_fields=n_fields, min_field_papers=4, n_dev_seed_fields=1)
        with pytest.raises(InputError, match=re.escape(message)):
            fit_fields(papers, spec)
        (tmp_path / "spec.json").write_text(json.dumps(spec.to_dict()))
        argv = ["build", "--spec", str(tmp_path / "spec.json"), "--source", str(snap), "--out", str(tmp_path / "o")]
        assert rap([*argv, "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("rap build: ") and message in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()


POOLS = [tuple(f"{stem}{i}" for i in range(12)) for stem in ("graph", "speech", "vision", "reward")]
FILLER = ("we", "study", "method", "results", "show", "model", "data", "improves", "novel", "approach")


@settings(max_examples=15, deadline=None)
@given(
    sizes=st.lists(st.integers(45, 80), min_size=2, max_size=4),
    bridges=st.integers(10, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_fit_fields_table_is_the_field_models_table(sizes: list[int], bridges: int, seed: int) -> None:
    """The build's memberships (fit_fields) and a later paper's (FieldModel.memberships) come from
    one builder: on corpora of 2-4 topics with papers bridging two topics (several memberships),
    the fitted model gives the same papers, in any order, exactly the build's table."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(sum(sizes) + bridges):
        t = int(np.searchsorted(np.cumsum(sizes), i, side="right")) if i < sum(sizes) else None
        pools = [POOLS[t]] if t is not None else [POOLS[j] for j in rng.choice(len(sizes), 2, replace=False)]
        words = [w for pool in pools for w in rng.choice(pool, 4)]
        day = int(rng.integers(0, 1000))
        rows.append(
            {
                "arxiv_id": f"{2300 + (t if t is not None else 9):04d}.{i:05d}",
                "title": " ".join(words[:2]),
                "abstract": " ".join([*words, *rng.choice(FILLER, 5)]),
                "date": (pd.Timestamp("2022-01-01") + pd.Timedelta(days=day)).strftime("%Y-%m-%d"),
            }
        )
    papers = pd.DataFrame(rows)
    spec = SPEC.replace(n_fields=len(sizes), min_field_papers=10, extra={"field_lsa_dims": 10})
    memberships, _, model = fit_fields(papers, spec)
    again = model.memberships(papers.sample(frac=1.0, random_state=seed % 1000))
    pd.testing.assert_frame_equal(again, memberships)


# -- codebooks ---------------------------------------------------------------------------------


def test_blueprint_codebooks_align_with_truth(corpus: MiniCorpus) -> None:
    codebooks, protos = codebooks_from_blueprint(corpus, SPEC)
    assert [cb.field_id for cb in codebooks] == sorted(corpus.field_info)
    dates = corpus.papers.set_index("arxiv_id")["date"]
    truth = corpus.truth.set_index(["arxiv_id", "field_id"])["true_direction"]
    for cb in codebooks:
        assert tuple(d.key for d in cb.directions) == DIRECTION_KEYS
        assert [d.name for d in cb.directions] == [d.name for d in corpus.blueprints[cb.field_id].directions]
        assert protos.centroids[cb.field_id].shape == (8, protos.space.n_terms)
        for d in cb.directions:
            assert 1 <= len(d.exemplars) <= 5
            assert all(dates[e] < SPEC.codebook_cutoff for e in d.exemplars)
            assert all(truth[(e, cb.field_id)] == d.key for e in d.exemplars)
    garbled = dataclasses.replace(
        corpus, papers=garble_after(corpus.papers, SPEC.codebook_cutoff, abstract="zzleak qqleak " * 20, keep_every=2)
    )
    again, protos2 = codebooks_from_blueprint(garbled, SPEC)
    assert again == codebooks and protos2.space.terms == protos.space.terms


def test_offline_codebooks_use_no_paper_at_or_after_the_cutoff(corpus: MiniCorpus) -> None:
    """Changing or dropping every paper dated >= cutoff leaves codebooks and prototypes unchanged."""
    fields = sorted(corpus.field_info)[:4]
    mem = corpus.memberships.loc[corpus.memberships["field_id"].isin(fields)]
    info = {f: corpus.field_info[f] for f in fields}
    codebooks, protos, _ = build_codebooks(corpus.papers, mem, info, SPEC)
    garbled = garble_after(corpus.papers, SPEC.codebook_cutoff, abstract="zzleak qqleak " * 20, keep_every=2)
    mem2 = mem.loc[mem["arxiv_id"].isin(set(garbled["arxiv_id"]))]
    codebooks2, protos2, _ = build_codebooks(garbled, mem2, info, SPEC)
    assert codebooks2 == codebooks
    assert protos2.features == protos.features and "zzleak" not in protos.features.unigrams
    for f in fields:
        np.testing.assert_array_equal(protos2.centroids[f], protos.centroids[f])

    dates = corpus.papers.set_index("arxiv_id")["date"]
    members = {f: set(g["arxiv_id"]) for f, g in mem.groupby("field_id")}
    for cb in codebooks:
        assert tuple(d.key for d in cb.directions) == DIRECTION_KEYS
        assert len({d.name for d in cb.directions}) == 8
        for d in cb.directions:
            assert 1 <= len(d.exemplars) <= 5
            assert all(dates[e] < SPEC.codebook_cutoff and e in members[cb.field_id] for e in d.exemplars)
            assert d.definition.startswith(f"Work in {cb.name} on {d.name}")
            assert d.exclusion.startswith("Exclude papers centred on")


def test_offline_codebook_directions_recover_the_latent_directions(corpus: MiniCorpus) -> None:
    """k-means directions match the generator's directions after Hungarian alignment."""
    fid = "f002"
    mem = corpus.memberships.loc[corpus.memberships["field_id"] == fid]
    _, protos, _ = build_codebooks(corpus.papers, mem, {fid: corpus.field_info[fid]}, SPEC)
    pre = corpus.papers.loc[corpus.papers["date"] < SPEC.codebook_cutoff]
    t = corpus.truth.loc[corpus.truth["field_id"] == fid].merge(pre[["arxiv_id"]])
    sub = pre.set_index("arxiv_id").loc[t["arxiv_id"]].reset_index()
    pred = protos.similarities(protos.prepare(sub), fid, np.arange(len(sub))).argmax(axis=1)
    true = t["true_direction"].str[1].astype(int).to_numpy()
    table = np.zeros((8, 8))
    np.add.at(table, (pred, true), 1)
    r, c = linear_sum_assignment(-table)
    assert table[r, c].sum() / len(true) > 0.7


def test_field_names_are_whole_phrases_and_never_a_larger_fields_name_respelled() -> None:
    """Regression: fields were named by fragments ("Named Entity", "Graph Neural") and by respellings
    of a larger field's name ("Large Language Model" beside "Large Language Models")."""
    from rap_benchmark.pipeline.fields import _field_names

    big = [f"Segment Anything Model for organ {i}. The Segment Anything Model on scans." for i in range(5)]
    big.append("Anything Model probing. A study of what the Anything Model sees.")
    small = [
        f"Retrieval Augmented Generation over {x}. Retrieval Augmented Generation."
        for x in ("tables", "forms", "maps", "logs")
    ]
    # field 2's two phrases are equally frequent; the respelling of field 1's name sorts first
    other = [f"Retrieval-augmented generation for software repositories {i}. Software repositories." for i in range(3)]
    texts = big + small + other
    papers = pd.DataFrame({"title": [t.split(". ")[0] for t in texts], "abstract": [t.split(". ")[1] for t in texts]})
    member = np.zeros((len(texts), 3), dtype=bool)
    member[: len(big), 0] = True
    member[len(big) : len(big) + len(small), 1] = True
    member[len(big) + len(small) :, 2] = True
    names, definitions = _field_names(papers, member, np.arange(3), np.ones(len(texts), dtype=bool))
    # "anything model" is the most frequent phrase of field 0, but 5 of its 6 users say more
    assert names[0] == "Segment Anything Model"
    assert names[1] == "Retrieval Augmented Generation"
    # field 2's best phrase respells field 1's name (hyphenated), so it takes its next best
    assert names[2] not in {"Retrieval-augmented generation", "retrieval-augmented generation"}
    assert names[2] == "software repositories"
    assert definitions[2] == "Research on software repositories, including Retrieval-augmented generation."
