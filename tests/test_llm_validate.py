"""Validators of the LLM instrument's replies (pure): labels, absorption, groups, programs, drafts,
and the deterministic repair of a consolidation with a count other than eight."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.records import DIRECTION_KEYS, AssignmentType
from rap_benchmark.pipeline.instrument.llm.validate import (
    InvalidOutput,
    parse_json_reply,
    repair_consolidation,
    validate_absorption,
    validate_assignment,
    validate_codebook,
    validate_draft,
    validate_groups,
    validate_label_batch,
    validate_programs,
)

IDS = [f"2301.{i:05d}" for i in range(1, 21)]


def _direction(name: str, exemplars: list[str] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "definition": f"Work on {name}.",
        "inclusion": f"Central contribution on {name}.",
        "exclusion": "Papers about other directions.",
        "exemplars": exemplars or [IDS[0]],
    }


def _keyed(names: list[str]) -> str:
    return orjson.dumps({f"D{i}": _direction(n, [IDS[i % 20]]) for i, n in enumerate(names)}).decode()


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ({"primary": "other", "secondary": None, "type": "single"}, "needs a direction"),
        ({"primary": "D1", "secondary": None, "type": "other"}, "needs primary 'other'"),
        ({"primary": "D1", "secondary": "D2", "type": "single"}, "no secondary"),
        ({"primary": "D1", "secondary": "D1", "type": "bridge"}, "different from the primary"),
        ({"primary": "D1", "secondary": None, "type": "tie"}, "unknown type"),
        ({"primary": "D8", "secondary": None, "type": "single"}, "not D0..D7 or other"),
        ({"primary": "D1", "type": "single"}, "missing key 'secondary'"),
    ],
)
def test_assignment_validator_rejects_incoherent_labels(obj: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidOutput, match=reason):
        validate_assignment(obj, "2301.00001", "f000")


def test_assignment_validator_accepts_every_type() -> None:
    for obj in (
        {"primary": "D0", "secondary": None, "type": "single"},
        {"primary": "D0", "secondary": "D7", "type": "boundary"},
        {"primary": "D3", "secondary": "D5", "type": "bridge"},
        {"primary": "other", "secondary": None, "type": "other"},
        {"primary": "other", "secondary": None, "type": "low_evidence"},
    ):
        assert validate_assignment(obj, "x", "f").type is AssignmentType(obj["type"])


def test_label_batch_keeps_good_labels_and_names_each_bad_one() -> None:
    ids = IDS[:4]
    obj = {
        "labels": [
            {"id": ids[0], "primary": "D1", "secondary": None, "type": "single"},
            {"id": ids[1], "primary": "D9", "secondary": None, "type": "single"},
            {"id": ids[2], "primary": "D2", "secondary": None, "type": "single"},
            {"id": ids[2], "primary": "D3", "secondary": None, "type": "single"},
            {"id": "9999.00001", "primary": "D1", "secondary": None, "type": "single"},
        ]
    }
    check = validate_label_batch(obj, ids, "f000")
    good, bad = check.good, check.bad
    assert list(good) == [ids[0]] and good[ids[0]].primary == "D1"
    assert "primary 'D9'" in bad[ids[1]] and "labelled twice" in bad[ids[2]] and bad[ids[3]] == "not labelled"
    assert check.faults == ("label 4: id '9999.00001' is not one of the papers to label",)
    message = check.message()
    assert message.count(ids[1]) == 1 and f"papers not labelled: {ids[3]}" in message
    with pytest.raises(InvalidOutput):
        validate_label_batch({"labels": "none"}, ids, "f000")


def test_a_renamed_key_is_named_once_for_the_whole_reply() -> None:
    """Regression: a reply keyed ``arxiv_id`` gave "paper X not labelled" eight times and never
    said which key was wrong; the model repeated the mistake."""
    ids = IDS[:8]
    obj = {"labels": [{"arxiv_id": p, "primary": "D1", "secondary": None, "type": "single"} for p in ids]}
    with pytest.raises(InvalidOutput) as err:
        validate_label_batch(obj, ids, "f000")
    assert str(err.value) == (
        "label 0: missing key 'id'; unexpected key 'arxiv_id' (expected keys: id, primary, secondary, type)"
    )
    with pytest.raises(InvalidOutput, match="program 0: missing key 'name'; unexpected key 'title'"):
        validate_programs({"programs": [{"title": "x", "description": "d", "papers": [IDS[0]]}]}, frozenset(IDS))


def test_absorption_needs_every_shown_paper_once() -> None:
    shown = IDS[:3]
    ok = {
        "papers": [
            {"id": shown[0], "direction": 2},
            {"id": shown[1], "direction": None},
            {"id": shown[2], "direction": 1},
        ]
    }
    assert validate_absorption(ok, shown, 2) == {shown[0]: 2, shown[1]: None, shown[2]: 1}
    for bad, reason in (
        ({"papers": ok["papers"][:2]}, "not labelled"),
        ({"papers": [*ok["papers"], ok["papers"][0]]}, "labelled twice"),
        ({"papers": [{"id": shown[0], "direction": 3}, *ok["papers"][1:]]}, "not 1..2"),
        ({"papers": [{"id": shown[0], "direction": True}, *ok["papers"][1:]]}, "not 1..2"),
    ):
        with pytest.raises(InvalidOutput, match=reason):
            validate_absorption(bad, shown, 2)


def test_groups_are_disjoint_known_and_at_least_pairs() -> None:
    assert validate_groups({"groups": [["b", "a"]]}, ["a", "b", "c"], "merge") == (("a", "b"),)
    for groups, reason in (
        ([["a"]], "at least two"),
        ([["a", "z"]], "unknown"),
        ([["a", "b"], ["b", "c"]], "disjoint"),
    ):
        with pytest.raises(InvalidOutput, match=reason):
            validate_groups({"groups": groups}, ["a", "b", "c"], "merge")


def test_programs_and_drafts_need_unique_names_and_shown_ids() -> None:
    allowed = frozenset(IDS)
    prog = {"name": "x", "description": "d", "papers": [IDS[0]]}
    assert len(validate_programs({"programs": [prog]}, allowed)) == 1
    with pytest.raises(InvalidOutput, match="duplicate"):
        validate_programs({"programs": [prog, dict(prog, name="X")]}, allowed)
    with pytest.raises(InvalidOutput, match="not among the papers shown"):
        validate_programs({"programs": [dict(prog, papers=["1234.5678"])]}, allowed)
    with pytest.raises(InvalidOutput, match="3 directions"):
        validate_draft({"directions": [_direction(f"d{i}") for i in range(3)], "papers": []}, allowed, [])
    with pytest.raises(InvalidOutput, match="duplicate direction names"):
        validate_draft({"directions": [_direction("same")] * 4, "papers": []}, allowed, [])


def test_a_draft_places_every_paper_it_was_shown_once() -> None:
    """A draft (and a frozen revision) places each paper it was shown in one direction or none:
    the revision's counts and the consolidation's candidate sizes are read from it."""
    dirs = [_direction(f"d{i}") for i in range(4)]
    shown = IDS[:5]
    papers = [{"id": p, "direction": d} for p, d in zip(shown, [1, 1, None, 4, 1], strict=True)]
    draft = validate_draft({"directions": dirs, "papers": papers[::-1]}, frozenset(IDS), shown)
    assert list(draft.papers) == shown  # in the order shown, whatever the reply's order
    assert draft.held() == [3, 0, 0, 1] and draft.unplaced() == [IDS[2]]
    for bad, reason in (
        ({"directions": dirs}, "draft: missing key 'papers'"),
        ({"directions": dirs, "papers": papers[:4]}, f"draft papers: papers not labelled: {IDS[4]}"),
        ({"directions": dirs, "papers": [*papers[:4], dict(papers[4], direction=5)]}, "direction 5 is not 1..4"),
        ({"directions": dirs, "papers": [*papers, {"id": IDS[9], "direction": 1}]}, "id '2301.00010' was not shown"),
    ):
        with pytest.raises(InvalidOutput, match=re.escape(reason)):
            validate_draft(bad, frozenset(IDS), shown)


def test_codebook_needs_exactly_eight_unique_directions() -> None:
    names = [f"direction {k}" for k in DIRECTION_KEYS]
    cb = validate_codebook(parse_json_reply(_keyed(names)), frozenset(IDS), "f000", "field", "def")
    assert tuple(d.key for d in cb.directions) == DIRECTION_KEYS
    for bad, reason in ((_keyed(names[:7]), "missing key 'D7'"), (_keyed([*names, "nine"]), "unexpected key 'D8'"),
                        (_keyed([*names[:7], names[0]]), "duplicate direction names")):  # fmt: skip
        with pytest.raises(InvalidOutput, match=reason):
            validate_codebook(parse_json_reply(bad), frozenset(IDS), "f000", "field", "def")


def test_repair_merges_the_most_similar_names_and_fills_from_the_union() -> None:
    names = ["speech recognition", "speech recognition streaming", *[f"topic {c}" for c in "abcdefg"]]
    dirs, note = repair_consolidation(_keyed(names), frozenset(IDS), [])
    assert len(dirs) == 8 and [d["name"] for d in dirs][0] == "speech recognition"
    assert "returned 9" in note and "merged 'speech recognition streaming' into 'speech recognition'" in note
    assert dirs[0]["exemplars"] == [IDS[0], IDS[1]]
    union = [_direction("topic a"), _direction("graph learning"), _direction("topic b variant")]
    dirs, note = repair_consolidation(_keyed([f"topic {c}" for c in "abcdefg"]), frozenset(IDS), union)
    assert [d["name"] for d in dirs][-1] == "graph learning" and "added candidate 'graph learning'" in note
    with pytest.raises(InvalidOutput, match="too few distinct candidates"):
        repair_consolidation(_keyed(["a", "b"]), frozenset(IDS), [])


def test_repair_adds_one_of_the_candidates_named_alike() -> None:
    """The union keeps directions the two drafts named alike as two candidates; filling a short
    consolidation adds one of them, never both (two directions of one name are no codebook)."""
    union = [_direction("graph learning", [IDS[1]]), _direction("Graph Learning", [IDS[2]]), _direction("zeta")]
    dirs, note = repair_consolidation(_keyed([f"topic {c}" for c in "abcdef"]), frozenset(IDS), union)
    assert [d["name"] for d in dirs][6:] == ["graph learning", "zeta"]
    assert note.count("added candidate") == 2


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 16), extra=st.integers(0, 10))
def test_repair_always_gives_eight_distinct_directions_when_it_can(n: int, extra: int) -> None:
    names = [f"direction {i} {'x' * (i % 3)}" for i in range(n)]
    union = [_direction(f"candidate {j}") for j in range(extra)]
    try:
        dirs, _ = repair_consolidation(_keyed(names), frozenset(IDS), union)
    except InvalidOutput:
        assert n + extra < 8
        return
    assert len(dirs) == 8 and len({d["name"].casefold() for d in dirs}) == 8
    assert all(1 <= len(d["exemplars"]) <= 5 for d in dirs)


LABELS = '{"labels": [{"id": "2407.06170", "primary": "D2", "secondary": null, "type": "single"}]}'
PARSED = orjson.loads(LABELS)

# Replies written the way served models write them (Qwen3, Llama 3.x, GPT-4o class models seen
# through vLLM and OpenAI-compatible APIs): fences in any case, preambles, trailing notes,
# reasoning blocks, a trailing comma.
REAL_REPLIES = {
    "bare": LABELS,
    "fence json": f"```json\n{LABELS}\n```",
    "fence JSON": f"```JSON\n{LABELS}\n```",
    "fence bare": f"```\n{LABELS}\n```",
    "fence one line": f"```json {LABELS}```",
    "preamble then fence": f"Here are the labels for the eight papers:\n\n```json\n{LABELS}\n```",
    "preamble with a brace": f"Both candidates describe the same area ({{hardware}} design), so:\n{LABELS}",
    "trailing note": f"{LABELS}\n\nNote: paper 2407.06170 could also fit D3.",
    "fence and trailing note": f"```json\n{LABELS}\n```\nLet me know if you need changes.",
    "think block": f"<think>\nThe paper is about placement {{D2}}, so single.\n</think>\n\n{LABELS}",
    "THINK upper": f"<THINK>reasoning</THINK>{LABELS}",
    "think close only (qwen3 template)": f"Okay, let me look at each paper.\n</think>\n\n{LABELS}",
    "trailing comma": LABELS.replace("}]}", "},]}"),
    "trailing comma in object": LABELS.replace('"single"}', '"single",}'),
}


@pytest.mark.parametrize("name", sorted(REAL_REPLIES))
def test_parse_json_reply_reads_what_real_models_send(name: str) -> None:
    assert parse_json_reply(REAL_REPLIES[name]) == PARSED


def test_parse_json_reply_still_refuses_what_holds_no_answer() -> None:
    assert parse_json_reply('{"a": "x, }"}') == {"a": "x, }"}  # a comma inside a string is left alone
    for bad, reason in (
        ("", "empty reply"),
        ("[1, 2]", "expected a JSON object"),
        ("Sure! Here is the JSON you asked for: {", "ends inside its JSON object"),
        ('{"labels": [{"id": "2407.06170", "primary": "D2"', "ends inside its JSON object"),
        ("I cannot label these papers.", "no JSON object"),
        ("<think>\nLet me think about paper 1. It discusses", "unclosed <think> block"),
        ("<think>all reasoning</think>", "empty reply"),
    ):
        with pytest.raises(InvalidOutput, match=reason):
            parse_json_reply(bad)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=20,
    ),
    # any preamble but one that opens an unclosed reasoning block: such a reply is a model cut
    # while thinking, and has no answer (the "unclosed <think> block" case above)
    st.text(alphabet=st.characters(blacklist_characters="{"), max_size=40).filter(
        lambda p: not p.lstrip().lower().startswith("<think>")
    ),
    st.text(max_size=40),
)
@settings(max_examples=100, deadline=None)
def test_any_object_is_found_after_any_preamble_and_before_any_note(value: Any, preamble: str, note: str) -> None:
    obj = {"answer": value}
    text = f"{preamble}\n{orjson.dumps(obj).decode()}\n{note}"
    assert parse_json_reply(text) == obj


@pytest.mark.parametrize(
    ("value", "preamble", "note"),
    [
        ({"<THINK></THINK>": None}, "", ""),
        ({"<THINK>": None}, "", ""),
        (None, "", "</THINK>"),
        ("a</think>b", "x</think>", ""),
        (["</THINK>", {}], "", ""),
    ],
)
def test_think_tags_in_the_answer_or_a_trailing_note_are_text(value: Any, preamble: str, note: str) -> None:
    """Regression (found by the property above): think tags were cut wherever they stood, so a
    JSON key ``"<THINK></THINK>"`` lost its tags (a silently different object), a key
    ``"<THINK>"`` cut the answer, and a trailing ``</THINK>`` made the whole reply reasoning; a
    tag in a string before a nested object must not end reasoning either."""
    obj = {"answer": value}
    assert parse_json_reply(f"{preamble}\n{orjson.dumps(obj).decode()}\n{note}") == obj


def test_split_reasoning_keeps_the_answer_and_the_reasoning_apart() -> None:
    from rap_benchmark.pipeline.instrument.llm.validate import split_reasoning

    assert split_reasoning("<think>\nplan\n</think>\n\n{}") == ("{}", "plan")
    assert split_reasoning("plan\n</think>\n{}") == ("{}", "plan")
    assert split_reasoning("<think>\nstill thinking") == ("", "still thinking")
    assert split_reasoning("{}") == ("{}", None)


def test_named_groups_and_not_in_field_labels() -> None:
    from rap_benchmark.pipeline.instrument.llm.validate import OutOfField, validate_named_groups

    groups = validate_named_groups(
        {"groups": [{"ids": ["P2", "P1"], "name": "Speech recognition", "description": "Both."}]}, ["P1", "P2"], "d"
    )
    assert groups[0].ids == ("P1", "P2") and groups[0].name == "Speech recognition"
    with pytest.raises(InvalidOutput, match="d group 0: missing key 'name'"):
        validate_named_groups({"groups": [{"ids": ["P1", "P2"], "description": "x"}]}, ["P1", "P2"], "d")
    with pytest.raises(InvalidOutput, match="at least two"):
        validate_named_groups({"groups": [{"ids": ["P1"], "name": "n", "description": "x"}]}, ["P1", "P2"], "d")
    label = {"primary": "other", "secondary": None, "type": "not_in_field"}
    assert validate_assignment(label, "x", "f") == OutOfField("x", "f")
    with pytest.raises(InvalidOutput, match="needs primary 'other'"):
        validate_assignment(dict(label, primary="D1"), "x", "f")
