"""Token counts without the served model's tokenizer: a pre-tokeniser count.

Byte-pair tokenisers split text into words (with their leading space), digit groups and
punctuation runs, and rarely split a common English word further, so counting those pieces
approximates their token counts on English prose and JSON. The dry run estimates with it and the
rehearsal's scripted server reports usage with it. :func:`tokenizer_counters` counts exactly with
the served model's tokenizer (``rap build --dry-run --tokenizer NAME_OR_PATH``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rap_benchmark.core.errors import InputError

_PIECE = re.compile(r" ?[A-Za-z]+| ?[0-9]{1,3}| ?[^\sA-Za-z0-9]+|\s+")
MESSAGE_OVERHEAD = 4  # role and separators per chat message
REPLY_PRIMING = 3


def count_tokens(text: str) -> int:
    """Approximate token count of ``text``."""
    return len(_PIECE.findall(text))


def count_prompt_tokens(messages: list[dict[str, str]]) -> int:
    """Approximate prompt tokens of a chat request (OpenAI's per-message accounting)."""
    return sum(count_tokens(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REPLY_PRIMING


PromptCounter = Callable[[list[dict[str, str]]], int]
TextCounter = Callable[[str], int]


def tokenizer_counters(name_or_path: str) -> tuple[PromptCounter, TextCounter]:
    """(prompt counter, text counter) from a Hugging Face tokenizer (a local folder, or a Hub
    name already in the local cache). Prompts go through the tokenizer's chat template when it
    has one, else the per-message accounting above."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise InputError("--tokenizer needs transformers: pip install 'rap_benchmark[llm]'") from exc

    tok = AutoTokenizer.from_pretrained(name_or_path)

    def text(content: str) -> int:
        return len(tok.encode(content, add_special_tokens=False))

    def prompt(messages: list[dict[str, str]]) -> int:
        if getattr(tok, "chat_template", None):
            return len(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))
        return sum(text(m["content"]) + MESSAGE_OVERHEAD for m in messages) + REPLY_PRIMING

    return prompt, text
