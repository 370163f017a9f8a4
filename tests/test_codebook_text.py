"""Real-text codebooks (the paper's codebook construction): verbatim phrase names, exactly eight directions of at least 3%,
no pre-cutoff leak, byte-identical rebuilds; the quality measures and ``rap show``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from phrase_oracle import extract_phrases
from sources import garble_after

from rap_benchmark.audit.codebook import codebook_only_primary, direction_shares, names_distinct, names_verbatim
from rap_benchmark.core.artifacts import codebook_to_dict, write_json, write_parquet
from rap_benchmark.core.records import DIRECTION_KEYS, Codebook, Direction
from rap_benchmark.core.schemas import ASSIGNMENTS
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.codebook import MIN_DIRECTION_SHARE, build_codebooks
from rap_benchmark.pipeline.fields import FieldInfo
from rap_benchmark.pipeline.instrument.offline import assign_offline
from rap_benchmark.pipeline.phrases import maximal_phrases, phrase_table

CUTOFF = "2024-07-01"
SPEC = BenchmarkSpec(name="t", codebook_cutoff=CUTOFF, eligibility_end="2026-01-01", seed=11)

TOPICS = [
    ("graph neural networks", "message passing", "node classification"),
    ("speech recognition", "acoustic model", "spoken language"),
    ("image segmentation", "semantic masks", "pixel labels"),
    ("machine translation", "parallel corpora", "low-resource languages"),
    ("reinforcement learning", "reward shaping", "policy gradient"),
    ("question answering", "reading comprehension", "answer spans"),
    ("code generation", "program synthesis", "unit tests"),
    ("protein folding", "amino acid sequences", "structure prediction"),
    ("time series forecasting", "temporal patterns", "demand prediction"),
]
FILLER = "models data training evaluation benchmark accuracy robust scalable tasks".split()


def _corpus(n_per_topic: int, seed: int, *, n_topics: int = 9) -> pd.DataFrame:
    """Papers on ``n_topics`` topics; each text uses its topic's phrases plus shared filler words."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_topics):
        phrases = TOPICS[t]
        for i in range(n_per_topic):
            words = " ".join(rng.choice(FILLER, size=6))
            p = rng.permutation(3)
            title = f"Towards {phrases[p[0]].title()} with {rng.choice(FILLER)}"
            abstract = f"We study {phrases[p[0]]}. Our {phrases[p[1]]} work improves {phrases[p[2]]}; {words}."
            day = int(rng.integers(0, 900))
            date = (pd.Timestamp("2023-01-01") + pd.Timedelta(days=day)).strftime("%Y-%m-%d")
            rows.append({"arxiv_id": f"{2300 + t:04d}.{i:05d}", "title": title, "abstract": abstract, "date": date})
    return pd.DataFrame(rows).sort_values(["date", "arxiv_id"]).reset_index(drop=True)


def _one_field(papers: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, FieldInfo]]:
    mem = pd.DataFrame({"arxiv_id": papers["arxiv_id"], "field_id": "f000"})
    return mem, {"f000": FieldInfo("f000", "applied machine learning", "Papers applying machine learning.")}


@pytest.fixture(scope="module")
def built() -> tuple[pd.DataFrame, pd.DataFrame, list[Codebook]]:
    papers = _corpus(30, seed=1)
    mem, info = _one_field(papers)
    codebooks, protos, _ = build_codebooks(papers, mem, info, SPEC)
    asg = assign_offline(papers, mem, codebooks, protos, SPEC)
    return papers, asg, codebooks


def test_extract_phrases_keeps_surface_forms_and_breaks_at_stop_words() -> None:
    found = extract_phrases("We use Retrieval-Augmented Generation (RAG) for open-domain question answering.")
    assert found["retrieval-augmented generation"] == "Retrieval-Augmented Generation"
    assert "question answering" in found and "open-domain question answering" in found
    assert not any(k.startswith("use ") or "rag" in k.split() for k in found)  # stop word / punctuation break


def test_a_name_is_completed_to_the_phrase_its_papers_use() -> None:
    """Regression: names were cut-off sub-phrases ("Anything Model" for "Segment Anything Model")
    because a sub-phrase is always at least as frequent as the phrase containing it."""
    texts = [
        "Segment Anything Model for polyps. We adapt the Segment Anything Model.",
        "Prompting the Segment Anything Model in ultrasound images.",
        "Anything Model variants beyond segmentation.",
        "Segment Anything Model meets medical images.",
        "Neural radiance fields for medical images.",
    ]
    table = phrase_table(texts)
    complete = maximal_phrases(table, range(4))
    assert complete("anything model") == "segment anything model"  # 3 of its 4 users say more
    assert complete("segment anything") == "segment anything model"
    assert complete("medical images") == "medical images"  # no completion is used by most of its users
    assert table.surface(complete("anything model"), range(4)) == "Segment Anything Model"
    rare = maximal_phrases(table, range(4), keep=1.0)
    assert rare("anything model") == "anything model"  # one user says only "Anything Model"
    split = phrase_table(
        [
            "Convolutional Neural Networks for tumours.",
            "A convolutional neural network for skin lesions.",
            "Convolutional Neural Networks again.",
            "Convolutional neural network training.",
        ]
    )
    # each completion alone has half the users; together they have all of them
    assert maximal_phrases(split, range(4))("convolutional neural") in {
        "convolutional neural networks",
        "convolutional neural network",
    }


def test_every_field_has_eight_named_directions_of_at_least_three_percent(built) -> None:
    papers, asg, codebooks = built
    (cb,) = codebooks
    assert tuple(d.key for d in cb.directions) == DIRECTION_KEYS
    shares = direction_shares(asg, CUTOFF)
    assert shares.to_numpy().min() >= MIN_DIRECTION_SHARE
    assert names_distinct({cb.field_id: cb}).all()
    for d in cb.directions:
        assert 2 <= len(d.name.split()) <= 6
        assert len(d.exemplars) == 5 and len(d.exemplar_titles) == 5
        assert d.name in d.definition and d.exclusion.startswith("Exclude papers centred on")
        assert d.inclusion.startswith(f"Include papers whose main contribution concerns {d.name}")


def test_every_direction_name_occurs_in_its_directions_pre_cutoff_papers(built) -> None:
    papers, asg, codebooks = built
    table = names_verbatim(papers, asg, {cb.field_id: cb for cb in codebooks}, CUTOFF)
    assert len(table) == 8 and table["verbatim"].all(), table.loc[~table["verbatim"]]


def test_exemplars_are_pre_cutoff_members_with_their_titles(built) -> None:
    papers, asg, codebooks = built
    by_id = papers.set_index("arxiv_id")
    for d in codebooks[0].directions:
        for e, title in zip(d.exemplars, d.exemplar_titles, strict=True):
            assert by_id.loc[e, "date"] < CUTOFF and by_id.loc[e, "title"] == title


def test_codebook_only_classifier_recovers_written_directions(built) -> None:
    papers, asg, codebooks = built
    single = asg.loc[asg["type"] == "single"].reset_index(drop=True)
    guess = codebook_only_primary(papers, single, {cb.field_id: cb for cb in codebooks})
    assert (guess == single["primary"]).mean() > 0.6


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_per_topic=st.integers(14, 24), n_topics=st.integers(8, 9))
def test_codebooks_never_read_a_paper_dated_at_or_after_the_cutoff(seed: int, n_per_topic: int, n_topics: int) -> None:
    """Changing or dropping every paper dated >= cutoff leaves codebooks and prototypes unchanged."""
    papers = _corpus(n_per_topic, seed, n_topics=n_topics)
    mem, info = _one_field(papers)
    codebooks, protos, _ = build_codebooks(papers, mem, info, SPEC)
    garbled = garble_after(papers, CUTOFF, abstract="zzleak qqleak wwleak " * 10, keep_every=3)
    mem2, _ = _one_field(garbled)
    codebooks2, protos2, _ = build_codebooks(garbled, mem2, info, SPEC)
    assert codebooks2 == codebooks
    assert protos2.features == protos.features and "zzleak" not in protos.features.unigrams
    np.testing.assert_array_equal(protos2.centroids["f000"], protos.centroids["f000"])
    np.testing.assert_array_equal(protos2.spaces["f000"].axes, protos.spaces["f000"].axes)
    assert all(len(cb.directions) == 8 for cb in codebooks)


def test_two_builds_give_byte_identical_instrument_outputs(tmp_path: Path) -> None:
    papers = _corpus(20, seed=5)
    mem, info = _one_field(papers)
    digests = []
    for run in ("a", "b"):
        codebooks, protos, _ = build_codebooks(papers.sample(frac=1.0, random_state=len(run)), mem, info, SPEC)
        asg = assign_offline(papers, mem, codebooks, protos, SPEC)
        (tmp_path / run).mkdir()
        write_json(tmp_path / run / "codebooks.json", [codebook_to_dict(cb) for cb in codebooks])
        write_parquet(tmp_path / run / "assignments.parquet", asg, ASSIGNMENTS)
        digests.append([(tmp_path / run / f).read_bytes() for f in ("codebooks.json", "assignments.parquet")])
    assert digests[0] == digests[1]


def test_codebook_dict_round_trips_titles_and_omits_them_when_absent() -> None:
    from rap_benchmark.core.artifacts import codebook_from_dict

    d = Direction("D0", "a b", "def", "inc", "exc", ("1",), ("T",))
    cb = Codebook("f000", "F", "defn", tuple(Direction(k, f"n{k}", "d", "i", "e", ()) for k in DIRECTION_KEYS))
    assert "exemplar_titles" not in codebook_to_dict(cb)["directions"][0]
    cb2 = Codebook("f000", "F", "defn", (d, *cb.directions[1:]))
    assert codebook_from_dict(json.loads(json.dumps(codebook_to_dict(cb2)))) == cb2


def test_prompt_shows_two_exemplar_titles() -> None:
    from rap_benchmark.agents.prompts import format_directions

    dirs = tuple(
        Direction(k, f"name {k}", "d", "i", "e", ("1", "2", "3"), (f"First {k}", f"Second {k}", f"Third {k}"))
        for k in DIRECTION_KEYS
    )
    text = format_directions(Codebook("f000", "F", "defn", dirs))
    assert "\u201cFirst D3\u201d; \u201cSecond D3\u201d" in text and "Third" not in text


def test_frozen_real_text_instrument_labels_as_the_build_did(tmp_path: Path) -> None:
    """fit_fields + LocalPrototypes freeze to disk and label every paper exactly as the build."""
    from rap_benchmark.pipeline.fields import fit_fields
    from rap_benchmark.pipeline.instrument import frozen
    from rap_benchmark.pipeline.instrument.offline import AssignRules, calibrate_and_assign

    papers = _corpus(30, seed=2)
    spec = SPEC.replace(n_fields=2, min_field_papers=20, extra={"field_lsa_dims": 20})
    mem, info, model = fit_fields(papers, spec)
    assert 1 <= len(info) <= 2 and all(fi.definition.startswith(f"Research on {fi.name}") for fi in info.values())
    codebooks, protos, _ = build_codebooks(papers, mem, info, spec)
    asg, calibration = calibrate_and_assign(papers, mem, codebooks, protos, spec)
    inst = frozen.FrozenInstrument(
        fields=model,
        prototypes=protos,
        rules=AssignRules.from_spec(spec),
        calibration=calibration,
        codebooks=tuple(codebook_to_dict(cb) for cb in codebooks),
        codebook_cutoff=CUTOFF,
    )
    frozen.save(inst, tmp_path)
    again = frozen.load(tmp_path)
    pd.testing.assert_frame_equal(again.label(papers).reset_index(drop=True), asg.reset_index(drop=True))


def test_a_field_that_cannot_hold_eight_directions_is_dropped_and_listed_never_raised() -> None:
    """Regression: at full scale ``eight_directions`` raised 'no eight directions of at least 8 papers
    after 40 rounds' and took the whole build down. A field of identical papers cannot be split;
    the build drops it, renumbers the rest, lists it in the summary and labels with the rest."""
    from rap_benchmark.pipeline.build import _fit_offline_instrument

    papers = _corpus(30, seed=2)
    clones = pd.DataFrame(
        {
            "arxiv_id": [f"2399.{i:05d}" for i in range(60)],
            "title": "Hamstring strain injuries in amateur football players",
            "abstract": "Hamstring strain injuries recur in amateur football players; squad rotation lowers recurrence.",
            "date": [(pd.Timestamp("2023-01-01") + pd.Timedelta(days=7 * i)).strftime("%Y-%m-%d") for i in range(60)],
        }
    )
    papers = pd.concat([papers, clones]).sort_values(["date", "arxiv_id"]).reset_index(drop=True)
    spec = SPEC.replace(n_fields=4, min_field_papers=20, extra={"field_lsa_dims": 20})
    frozen, codebooks, asg = _fit_offline_instrument(papers, spec, progress=False)
    summary = frozen.summary
    assert summary["n_candidates"] == 3  # the fourth cluster is too small to be a candidate
    assert len(summary["dropped"]) == 1 and "football" in summary["dropped"][0]["name"].lower()
    assert "eight directions" in summary["dropped"][0]["reason"]
    assert [cb.field_id for cb in codebooks] == ["f000", "f001"]
    assert all(len(cb.directions) == 8 for cb in codebooks)
    assert set(asg["field_id"]) == {"f000", "f001"} and not asg["arxiv_id"].str.startswith("2399.").any()
    assert sorted(frozen.fields.memberships(papers)["field_id"].unique()) == ["f000", "f001"]
    assert sorted(d["field_id"] for d in summary["least_cohesive"]) == ["f000", "f001"]
    pd.testing.assert_frame_equal(frozen.label(papers), asg, check_dtype=False)


def test_name_fit_counts_precision_coverage_and_field_share_by_hand() -> None:
    from rap_benchmark.audit.codebook import name_fit

    names = ["Graph Neural Networks", "speech recognition"] + [f"topic {k}" for k in DIRECTION_KEYS[2:]]
    cb = Codebook(
        "f000", "F", "d", tuple(Direction(k, n, "d", "i", "e", ()) for k, n in zip(DIRECTION_KEYS, names, strict=True))
    )
    texts = [
        ("graph neural networks for molecules", "D0"),
        ("Graph Neural Networks at scale", "D0"),
        ("message passing", "D0"),
        ("speech recognition with graph neural networks", "D1"),
        ("spoken language", "D1"),
        ("late paper on graph neural networks", "D1"),  # after the cutoff: not counted
    ]
    papers = pd.DataFrame(
        {
            "arxiv_id": [f"p{i}" for i in range(6)],
            "title": [t for t, _ in texts],
            "abstract": "",
            "date": ["2024-01-01"] * 5 + ["2025-01-01"],
        }
    )
    asg = papers[["arxiv_id", "date"]].assign(field_id="f000", primary=[p for _, p in texts])
    fit = name_fit(papers, asg, {"f000": cb}, CUTOFF).set_index("key")
    assert fit.loc["D0", "precision"] == pytest.approx(2 / 3) and fit.loc["D0", "coverage"] == pytest.approx(2 / 3)
    assert fit.loc["D0", "field_share"] == pytest.approx(3 / 5)
    assert fit.loc["D1", "precision"] == 1.0 and fit.loc["D1", "coverage"] == pytest.approx(1 / 2)
    assert np.isnan(fit.loc["D2", "precision"]) and np.isnan(fit.loc["D2", "coverage"])


@pytest.mark.parametrize(
    "fragment",
    ["shown remarkable", "simple yet", "may help", "become increasingly", "building upon", "proposed method"],
)
def test_fragments_readers_flagged_are_not_names(fragment: str) -> None:
    from rap_benchmark.pipeline.phrases import names_a_thing

    assert not names_a_thing(fragment)


@pytest.mark.parametrize(
    "name", ["anomaly detection", "large language models", "retrieval-augmented generation", "model predictive control"]
)
def test_noun_phrases_are_names(name: str) -> None:
    from rap_benchmark.pipeline.phrases import names_a_thing

    assert names_a_thing(name)


def test_inclusion_phrases_do_not_repeat_one_another() -> None:
    from rap_benchmark.pipeline.codebook_text import _diverse

    keys = ["graph neural networks", "graph neural network", "message passing", "neural networks", "node labels"]
    assert _diverse(keys, ["graph neural networks"], 3) == ["message passing", "node labels"]
    assert _diverse(keys, [], 2) == ["graph neural networks", "message passing"]


def test_names_are_noun_phrases_no_field_wide_phrase_and_exclusions_avoid_the_field_name(built) -> None:
    from rap_benchmark.pipeline.phrases import names_a_thing

    _, _, codebooks = built
    for cb in codebooks:
        for d in cb.directions:
            assert names_a_thing(d.name.lower()), d.name
            assert cb.name.lower() not in d.exclusion.lower()


def test_common_phrases_are_those_spread_over_the_fields() -> None:
    from rap_benchmark.pipeline.codebook_text import common_phrases

    texts = [f"Future research on {topic} models." for topic in ("protein folding", "speech coding", "graph cuts")] * 4
    table = phrase_table(texts)
    fields = [np.array([i, i + 3, i + 6, i + 9]) for i in range(3)]
    common = common_phrases(table, fields)
    assert "future research" in common and "protein folding" not in common


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("reasoning abilities", "reasoning ability"),
        ("markov decision processes", "markov decision process"),
        ("search approaches", "search approach"),
        ("multi-modal models", "multimodal model"),
        ("contrastive loss", "contrastive loss"),
    ],
)
def test_singular_plural_and_hyphenated_phrases_say_the_same_thing(a: str, b: str) -> None:
    """Regression: "processes" lost only its s ("processe"), so "reasoning abilities" and
    "reasoning ability" could name two sibling directions."""
    from rap_benchmark.pipeline.codebook_text import _same_or_nested
    from rap_benchmark.pipeline.phrases import word_set as _word_set

    assert _word_set(a) == _word_set(b) and _same_or_nested(a, b)
    assert _word_set("contrastive loss") != _word_set("contrastive los")


def test_a_phrase_whose_users_are_nearly_all_outside_the_field_describes_nothing_in_it() -> None:
    """ "success rate" in 2 of a field's 10 papers but 100 papers elsewhere is the corpus's phrase;
    "membership inference" in 2 of them and nowhere else is the field's."""
    from rap_benchmark.pipeline.codebook_text import _usable

    texts = ["Membership inference with a high success rate."] * 2 + ["Robot grasping."] * 8
    texts += ["The success rate of robot grasping."] * 100
    table = phrase_table(texts)
    counts = table.counts(np.arange(10))
    assert _usable("membership inference", counts, 10, "privacy attacks", frozenset(), table)
    assert not _usable("success rate", counts, 10, "privacy attacks", frozenset(), table)


def test_exemplars_use_the_name_and_come_from_the_closer_half_of_the_direction() -> None:
    from rap_benchmark.pipeline.codebook_text import _exemplars

    texts = [f"Paper {i} on {'graph pruning' if i % 3 == 0 else 'other ideas'}." for i in range(40)]
    table = phrase_table(texts)
    docs = np.arange(40)
    group = np.arange(40)
    sim = np.linspace(1.0, 0.0, 40)  # paper 0 is the most central
    ids = np.array([f"2301.{i:05d}" for i in range(40)], dtype=object)
    chosen, titles = _exemplars(table, docs, group, sim, ids, np.array(texts, dtype=object), "graph pruning")
    assert chosen == tuple(ids[i] for i in (0, 3, 6, 9, 12))  # name users first, by closeness
    far = sim.copy()
    far[:20] = 0.0  # the name's users among the closer half: 21, 24, ..., 39
    chosen, _ = _exemplars(
        table, docs, group, -np.arange(40.0) + 100 * (np.arange(40) >= 20), ids, ids, "graph pruning"
    )
    assert all(int(c.split(".")[1]) >= 20 for c in chosen)  # never from the far half


def test_a_phrase_few_papers_use_never_sets_a_direction_apart() -> None:
    """Readers called the "sets it apart from its nearest sibling" phrase keyword salad ("18x
    speedup", "urgent need"): a phrase two of thirty papers use separates nothing a reader can apply."""
    from rap_benchmark.pipeline.codebook_text import _separating

    theirs = ["Tool learning with API calls."] * 30
    docs, other = np.arange(30), np.arange(30, 60)
    table = phrase_table(["LLM serving with an 18x speedup."] * 2 + ["LLM serving on GPU clusters."] * 28 + theirs)
    assert _separating(table, docs, other, exclude={"llm serving"}, usable=lambda k: True) == "GPU clusters"
    table = phrase_table(["LLM serving with an 18x speedup."] * 2 + ["LLM serving."] * 28 + theirs)
    assert _separating(table, docs, other, exclude={"llm serving"}, usable=lambda k: True) == ""


@pytest.mark.parametrize(
    ("inner", "outer", "nested"),
    [
        ("multi-modal large language models", "multimodal large language models", True),  # respelled
        ("language model", "large language models", True),  # singular inside plural
        ("open-source llms", "open source llm", True),
        ("graph neural networks", "graph neural network", True),
        ("text", "context", False),  # whole words only
        ("speech recognition", "speech synthesis", False),
    ],
)
def test_a_phrase_nests_in_another_singular_or_plural_hyphenated_or_not(inner: str, outer: str, nested: bool) -> None:
    """Regression: a direction of the field "Multimodal Large Language Models" was named
    "Multi-modal Large Language Models", and readers rated it not a direction."""
    from rap_benchmark.pipeline.codebook_text import _nested

    assert _nested(inner, outer) is nested
    assert _nested(outer, inner) is nested
