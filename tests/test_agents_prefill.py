"""The transformers backend's answer prefill, with a character-level fake tokenizer and a scripted
fake model (no weights): which turns are prefilled, what the model is asked to continue, the caps
and stop strings it gets, and what the turn records."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from rap_benchmark.agents.prompts import ANSWER_PREFILL  # noqa: E402
from rap_benchmark.agents.protocol import Request  # noqa: E402
from rap_benchmark.evaluation.scoring.parse import parse_answer  # noqa: E402

EOS = 0
ANSWER = ' 40, "D1": 20, "D2": 10, "D3": 10, "D4": 5, "D5": 5, "D6": 5, "D7": 5}'


class CharTokenizer:
    """One token per character (id = code point); id 0 is the end-of-sequence token."""

    eos_token_id = EOS

    def __init__(self, chat_template: str) -> None:
        self.chat_template = chat_template

    def _render(self, messages: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        text = "".join(f"<{m['role']}>{m['content']}</{m['role']}>" for m in messages)
        return text + ("<assistant>" if add_generation_prompt else "")

    def _ids(self, text: str) -> dict[str, Any]:
        ids = torch.tensor([[ord(c) for c in text]], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        *,
        add_generation_prompt: bool = False,
        tokenize: bool = True,
        return_tensors: str | None = None,
        return_dict: bool = False,
        tools: list[dict[str, Any]] | None = None,
    ) -> Any:
        text = self._render(messages, add_generation_prompt)
        return self._ids(text) if tokenize else text

    def __call__(self, text: str, *, return_tensors: str | None = None, add_special_tokens: bool = True) -> Any:
        assert not add_special_tokens, "the prefilled prompt must not gain special tokens"
        return self._ids(text)

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        return "".join(chr(int(i)) for i in ids if not (skip_special_tokens and int(i) == EOS))


class ScriptedLM:
    """Continues a prompt with ``script(prompt_text)``, honouring stop strings and the token cap."""

    def __init__(self, script: Callable[[str], str]) -> None:
        self.script = script
        self.calls: list[dict[str, Any]] = []
        self.config = type("Config", (), {"max_position_embeddings": 100_000})()

    def to(self, device: str) -> ScriptedLM:
        return self

    def eval(self) -> ScriptedLM:
        return self

    def generate(self, input_ids: Any, attention_mask: Any, **kw: Any) -> Any:
        prompt = "".join(chr(int(i)) for i in input_ids[0])
        self.calls.append({"prompt": prompt, **kw})
        text = self.script(prompt)
        for stop in kw.get("stop_strings") or ():
            if stop in text:
                text = text[: text.index(stop) + len(stop)]
        new = [ord(c) for c in text][: kw["max_new_tokens"]]
        return torch.cat([input_ids, torch.tensor([new], dtype=torch.long)], dim=1)


def make_backend(monkeypatch, script: Callable[[str], str], *, template: str = "", **kwargs: Any):
    import transformers

    from rap_benchmark.agents.transformers_backend import TransformersBackend

    lm = ScriptedLM(script)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: CharTokenizer(template))
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", lambda *a, **k: lm)
    return TransformersBackend("fake", model_name="fake-lm", **kwargs), lm


def request(*, tools: bool, tool_choice: str | None = None, max_tokens: int = 1000) -> Request:
    msgs = ({"role": "system", "content": "S"}, {"role": "user", "content": "U"})
    from rap_benchmark.agents.toolset import search_text_protocol

    schema = ({"type": "function", "function": {"name": "search"}},) if tools else None
    protocol = search_text_protocol() if tools else None
    return Request(msgs, schema, tool_choice if tools else None, max_tokens, text_protocol=protocol)


def complete(backend: Any, req: Request) -> Any:
    return asyncio.run(backend.complete(req, None))


def test_closed_book_turn_is_prefilled_and_continued_by_the_model(monkeypatch):
    backend, lm = make_backend(monkeypatch, lambda p: ANSWER + "\nThat is my answer.", max_new_tokens=8)
    assert backend.tool_protocol == "text" and backend.answer_prefill
    turn = complete(backend, request(tools=False))
    call = lm.calls[-1]
    assert call["prompt"].endswith('<assistant>{"D0": ')  # the model continues from the prefill
    assert call["stop_strings"] == ["}"] and call["do_sample"] is False
    assert call["max_new_tokens"] == 96  # answer_max_new_tokens replaces max_new_tokens=8 here
    assert turn.content == '{"D0": ' + ANSWER  # cut where the object closes
    assert turn.completion_tokens == len(ANSWER) and turn.finish_reason == "stop" and not turn.tool_calls
    assert turn.prefill == ANSWER_PREFILL and turn.attempts[0].endpoint == "cpu"
    parsed = parse_answer(turn.content)
    assert parsed.valid and parsed.weights[0] == pytest.approx(0.4)


def test_search_turns_are_not_prefilled_and_forced_turns_are(monkeypatch):
    def script(prompt: str) -> str:
        return ANSWER if prompt.endswith('{"D0": ') else '<search start_date="2024-01-01">asr</search> more'

    backend, lm = make_backend(monkeypatch, script, max_new_tokens=64)
    open_turn = complete(backend, request(tools=True, tool_choice="auto"))
    assert lm.calls[-1]["prompt"].endswith("<assistant>") and lm.calls[-1]["stop_strings"] == [
        "</search>",
        "<observation>",
    ]
    assert lm.calls[-1]["max_new_tokens"] == 64
    assert open_turn.finish_reason == "tool_calls" and open_turn.prefill is None
    assert json.loads(open_turn.tool_calls[0].arguments) == {"query": "asr", "start_date": "2024-01-01"}
    forced = complete(backend, request(tools=True, tool_choice="none"))
    assert lm.calls[-1]["prompt"].endswith('{"D0": ') and forced.content == '{"D0": ' + ANSWER
    assert not forced.tool_calls and parse_answer(forced.content).valid


def test_caps_and_truncation(monkeypatch):
    endless = ', "D8": 1' * 50
    backend, lm = make_backend(monkeypatch, lambda p: ANSWER[:-1] + endless, answer_max_new_tokens=None)
    turn = complete(backend, request(tools=False, max_tokens=30))
    assert lm.calls[-1]["max_new_tokens"] == 30  # never above the request's cap
    assert turn.finish_reason == "length" and turn.completion_tokens == 30
    assert parse_answer(turn.content).reason.startswith("truncated")


def test_prefill_defaults_off_for_native_tool_templates_and_can_be_switched(monkeypatch):
    template = "{% if tools %}...{% endif %}"
    backend, lm = make_backend(monkeypatch, lambda p: "plain", template=template)
    assert backend.tool_protocol == "hermes" and not backend.answer_prefill
    turn = complete(backend, request(tools=False))
    assert lm.calls[-1]["prompt"].endswith("<assistant>") and turn.content == "plain"
    assert lm.calls[-1]["stop_strings"] is None and turn.prefill is None
    on, lm_on = make_backend(monkeypatch, lambda p: ANSWER, template=template, answer_prefill=True)
    assert complete(on, request(tools=False)).content == '{"D0": ' + ANSWER
    off, _ = make_backend(monkeypatch, lambda p: "text", tool_protocol="text", answer_prefill=False)
    assert complete(off, request(tools=False)).content == "text"


def test_a_prefilled_unit_through_the_episode_loop(monkeypatch, mini):
    """A0 through run_episode: valid, and the trajectory shows which text was prefilled."""
    from rap_benchmark.agents.episode import Episode, run_episode
    from rap_benchmark.agents.prompts import condition_prompt, initial_messages
    from rap_benchmark.agents.protocol import EpisodeContext
    from rap_benchmark.core.dates import parse_date
    from rap_benchmark.core.records import Condition, Task

    answers = iter(['"many"}', ANSWER])  # an invalid answer first: the nudge turn is prefilled too
    backend, lm = make_backend(monkeypatch, lambda p: next(answers))
    field_id, origin = mini.field_ids[0], mini.spec.origins[-1]
    cb = mini.codebooks[field_id]
    ctx = EpisodeContext("fake-lm", field_id, parse_date(origin), Condition.A0, Task.FORECAST, cb, mini.spec)
    prompt = condition_prompt(cb, origin, Condition.A0, mini.spec)
    res = asyncio.run(
        run_episode(backend, ctx, Episode(initial_messages(prompt), None, max_tokens=1600, max_tool_calls=1))
    )
    assert res.valid and res.events == ["nudged: missing keys D1, D2, D3, D4, D5, D6, D7"]
    assert [m["content"] for m in res.messages if m["role"] == "assistant"] == ['{"D0": "many"}', '{"D0": ' + ANSWER]
    assert all(t["prefill"] == ANSWER_PREFILL for t in res.turns)
    assert all(c["prompt"].endswith('{"D0": ') for c in lm.calls) and len(lm.calls) == 2
