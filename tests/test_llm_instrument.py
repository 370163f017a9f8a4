"""The LLM path with a scripted OpenAI-compatible client: valid, invalid-then-valid, always-invalid."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

from rap_benchmark.core.records import DIRECTION_KEYS, AssignmentType, Codebook, Direction
from rap_benchmark.pipeline.fields import FieldInfo
from rap_benchmark.pipeline.instrument.llm import (
    InvalidOutput,
    assign_llm,
    draft_codebook_llm,
    load_prompt,
    parse_json_reply,
    validate_assignment,
)


class ScriptedClient:
    """Replies with the scripted texts in order (``Exception`` instances are raised) and records
    every request, like an OpenAI client's ``chat.completions.create``."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self._create))

    def _create(self, **kwargs: Any) -> Any:
        self.requests.append(kwargs)
        if not self.replies:
            raise AssertionError("the client was asked more often than scripted")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return SimpleNamespace(
            choices=[SimpleNamespace(message=SimpleNamespace(content=reply))],
            model=f"{kwargs['model']}-2026",
            usage=SimpleNamespace(prompt_tokens=100, completion_tokens=20),
        )


FIELD = FieldInfo("f000", "speech recognition", "Automatic speech recognition.")
PAPERS = pd.DataFrame(
    {
        "arxiv_id": [f"2301.{i:05d}" for i in range(1, 11)],
        "date": ["2023-01-15"] * 10,
        "title": [f"Paper {i} on streaming ASR" for i in range(1, 11)],
        "abstract": ["We study chunked streaming recognition. " * 30] * 10,
    }
)
IDS = PAPERS["arxiv_id"].tolist()


def _direction(name: str, exemplars: list[str]) -> dict[str, Any]:
    return {
        "name": name,
        "definition": f"Work on {name}.",
        "inclusion": f"Central contribution on {name}.",
        "exclusion": "Papers about other directions.",
        "exemplars": exemplars,
    }


def _draft(names: list[str]) -> str:
    return json.dumps({"directions": [_direction(n, IDS[i % 10 : i % 10 + 1]) for i, n in enumerate(names)]})


def _codebook_reply(keys: tuple[str, ...] = DIRECTION_KEYS) -> str:
    return json.dumps({k: _direction(f"direction {k}", [IDS[i]]) for i, k in enumerate(keys)})


DRAFT_A = _draft([f"topic {i}" for i in range(6)])
DRAFT_B = _draft([f"theme {i}" for i in range(9)])


def test_prompts_are_package_files_with_their_placeholders() -> None:
    for name, keys in {
        "codebook_draft": ("field_name", "field_definition", "n_papers", "papers"),
        "codebook_consolidate": ("field_name", "field_definition", "candidates", "papers"),
        "assign_paper": ("field_name", "field_definition", "directions", "arxiv_id", "title", "abstract"),
    }.items():
        template = load_prompt(name)
        assert set(template.get_identifiers()) == set(keys)


def test_valid_codebook_in_three_calls_at_temperature_zero() -> None:
    client = ScriptedClient([DRAFT_A, DRAFT_B, "```json\n" + _codebook_reply() + "\n```"])
    res = draft_codebook_llm(client, "m", FIELD, PAPERS, draft_models=("model-a", "model-b"))
    assert res.valid and res.invalid_reason is None
    assert isinstance(res.codebook, Codebook)
    assert tuple(d.key for d in res.codebook.directions) == DIRECTION_KEYS
    assert res.codebook.field_id == "f000" and res.codebook.directions[3].exemplars == (IDS[3],)
    assert [c.step for c in res.calls] == ["draft_a", "draft_b", "consolidate"]
    assert [r["model"] for r in client.requests] == ["model-a", "model-b", "m"]
    assert all(r["temperature"] == 0.0 for r in client.requests)
    assert len(res.drafts[0]) == 6 and len(res.drafts[1]) == 9
    # independent drafts: the second sees the papers in another order
    first_ids = [
        line.split("]")[0] for line in client.requests[0]["messages"][0]["content"].splitlines() if line.startswith("[")
    ]
    second_ids = [
        line.split("]")[0] for line in client.requests[1]["messages"][0]["content"].splitlines() if line.startswith("[")
    ]
    assert sorted(first_ids) == sorted(second_ids) and first_ids != second_ids
    # the union is anonymous and holds all 15 candidates
    consolidate = client.requests[2]["messages"][0]["content"]
    assert (
        "C15." in consolidate
        and "C16." not in consolidate
        and "draft" not in consolidate.lower().split("candidate")[0][-50:]
    )
    assert res.calls[0].response_model == "model-a-2026" and res.calls[0].prompt_tokens == 100


def test_invalid_then_valid_is_retried_with_the_reason() -> None:
    seven = _codebook_reply(DIRECTION_KEYS[:7])
    client = ScriptedClient([DRAFT_A, "not json at all", DRAFT_B, seven, _codebook_reply()])
    res = draft_codebook_llm(client, "m", FIELD, PAPERS)
    assert res.valid
    assert [(c.step, c.attempt, c.error is None) for c in res.calls] == [
        ("draft_a", 1, True),
        ("draft_b", 1, False),
        ("draft_b", 2, True),
        ("consolidate", 1, False),
        ("consolidate", 2, True),
    ]
    assert "missing D7" in res.calls[3].error
    retry = client.requests[4]["messages"]
    assert [m["role"] for m in retry] == ["user", "assistant", "user"]
    assert retry[1]["content"] == seven and "missing D7" in retry[2]["content"]


def test_always_invalid_is_recorded_with_raw_text_and_reason() -> None:
    bad_keys = _codebook_reply(("D0", "D1", "D2", "D3", "D4", "D5", "D6", "D8"))
    client = ScriptedClient([DRAFT_A, DRAFT_B, bad_keys, bad_keys, bad_keys])
    res = draft_codebook_llm(client, "m", FIELD, PAPERS, max_attempts=3)
    assert not res.valid and res.codebook is None
    assert res.raw_text == bad_keys
    assert "invalid after 3 attempts" in res.invalid_reason and "unknown D8" in res.invalid_reason
    assert len(res.calls) == 5 and all(c.raw_text == bad_keys for c in res.calls[2:])


def test_both_drafts_invalid_means_no_consolidation() -> None:
    client = ScriptedClient([RuntimeError("connection reset"), _draft(["only", "three", "items"])])
    res = draft_codebook_llm(client, "m", FIELD, PAPERS, max_attempts=1)
    assert not res.valid and res.drafts == (None, None)
    assert "request failed: RuntimeError: connection reset" in res.invalid_reason
    assert "3 directions" in res.invalid_reason
    assert len(client.requests) == 2


def test_hallucinated_exemplar_ids_are_invalid() -> None:
    reply = json.loads(_codebook_reply())
    reply["D2"]["exemplars"] = ["9999.99999"]
    client = ScriptedClient([DRAFT_A, DRAFT_B, json.dumps(reply)])
    res = draft_codebook_llm(client, "m", FIELD, PAPERS, max_attempts=1)
    assert not res.valid and "D2: exemplar ids not among the papers shown: 9999.99999" in res.invalid_reason


def test_papers_after_the_cutoff_are_refused() -> None:
    late = PAPERS.assign(date=["2023-01-15"] * 9 + ["2024-01-01"])
    with pytest.raises(ValueError, match="on or after the cutoff"):
        draft_codebook_llm(ScriptedClient([]), "m", FIELD, late, cutoff="2024-01-01")


CODEBOOK = Codebook(
    "f000",
    "speech recognition",
    "ASR.",
    tuple(Direction(k, f"name {k}", f"def {k}", f"inc {k}", f"exc {k}", ("2301.00001",)) for k in DIRECTION_KEYS),
)


def test_assign_llm_valid_invalid_then_valid_and_always_invalid() -> None:
    papers = PAPERS.head(3)
    replies = [
        '{"primary": "D2", "secondary": null, "type": "single"}',
        '{"primary": "D9", "secondary": null, "type": "single"}',
        '{"primary": "D1", "secondary": "D4", "type": "boundary"}',
        '{"primary": "D1", "secondary": null, "type": "boundary"}',
        '{"primary": "D1", "type": "single", "confidence": 0.9}',
        "I think D3.",
    ]
    client = ScriptedClient(replies)
    res = assign_llm(client, "m", CODEBOOK, papers, max_attempts=3)
    assert [r.arxiv_id for r in res] == IDS[:3]
    assert res[0].valid and res[0].assignment.primary == "D2" and len(res[0].calls) == 1
    assert res[1].valid and res[1].assignment.type is AssignmentType.BOUNDARY and res[1].assignment.secondary == "D4"
    assert "primary 'D9'" in res[1].calls[0].error and len(res[1].calls) == 2
    assert not res[2].valid and res[2].assignment is None and res[2].raw_text == "I think D3."
    errors = [c.error for c in res[2].calls]
    assert "secondary different" in errors[0] and "missing secondary" in errors[1] and "not valid JSON" in errors[2]
    prompt = client.requests[0]["messages"][0]["content"]
    assert "D7: name D7." in prompt and IDS[0] in prompt


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ({"primary": "other", "secondary": None, "type": "single"}, "needs a direction"),
        ({"primary": "D1", "secondary": None, "type": "other"}, "needs primary 'other'"),
        ({"primary": "D1", "secondary": "D2", "type": "single"}, "no secondary"),
        ({"primary": "D1", "secondary": "D1", "type": "bridge"}, "different from the primary"),
        ({"primary": "D1", "secondary": None, "type": "tie"}, "unknown type"),
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
        assert validate_assignment(obj, "x", "f").type.value == obj["type"]


def test_parse_json_reply_is_strict() -> None:
    assert parse_json_reply('{"a": 1}') == {"a": 1}
    assert parse_json_reply('```json\n{"a": 1}\n```') == {"a": 1}
    for bad in ("", "[1, 2]", 'Sure! {"a": 1}', '```json\n{"a": 1}\n``` trailing'):
        with pytest.raises(InvalidOutput):
            parse_json_reply(bad)
