"""Parse a model's final answer into eight weights on the simplex (the paper's answer parser).

The answer is a JSON object with exactly the keys ``D0``..``D7`` whose values are nonnegative
percentages that should sum to 100. A valid answer has exactly those keys, finite nonnegative
numeric values and a positive total; its weights are renormalised to sum to 1 (so harmless
deviations from 100 do not invalidate it). Everything else is invalid with a precise reason;
invalid units are kept and reported, never scored.

Where the object is looked for, in order:

1. the last fenced code block marked ``json`` (```json ... ```), when the text has one
   (the search below then runs inside that block only);
2. the last top-level JSON object in the text (objects nested inside another object are part of
   that object, not candidates of their own).

An object that is opened after the last complete one but never closed (the model ran out of
tokens while writing it) makes the answer ``truncated``, even if an earlier draft was complete.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rap_benchmark.core.records import DIRECTION_KEYS

_FENCE = re.compile(r"```[ \t]*json[ \t]*\r?\n?(.*?)```", re.DOTALL | re.IGNORECASE)
_OPEN_FENCE = re.compile(r"```[ \t]*json\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """The parser's verdict on one answer.

    ``weights`` are renormalised to sum to 1, in the order D0..D7, and are None when the answer is
    invalid. ``raw`` is the JSON object found (None when none was found); ``reason`` says why an
    answer is invalid (None when valid).
    """

    valid: bool
    weights: tuple[float, ...] | None
    raw: dict[str, Any] | None
    reason: str | None


class DuplicateKey(ValueError):
    """A JSON object repeats ``key``: which value is meant is ambiguous, so the object is refused."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of strict JSON: the object, or :class:`DuplicateKey` on a repeated key."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=no_duplicate_keys)


def _invalid(reason: str, raw: dict[str, Any] | None = None) -> ParsedAnswer:
    return ParsedAnswer(valid=False, weights=None, raw=raw, reason=reason)


def _is_truncation(text: str, err: json.JSONDecodeError) -> bool:
    """A decode error caused by the text ending, not by a malformed character."""
    return err.msg.startswith("Unterminated string") or err.pos >= len(text.rstrip())


def _last_object(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The last top-level JSON object in ``text``, or (None, reason)."""
    found: dict[str, Any] | None = None
    duplicate: str | None = None
    truncated_after_last = False
    pos = text.find("{")
    while pos != -1:
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except DuplicateKey as exc:
            duplicate = exc.key
            found = None
            truncated_after_last = False
            # skip past this object: find its end with a tolerant decoder
            try:
                _, end = json.JSONDecoder().raw_decode(text, pos)
            except json.JSONDecodeError:
                end = pos + 1
            pos = text.find("{", end)
            continue
        except json.JSONDecodeError as exc:
            if _is_truncation(text, exc):
                truncated_after_last = True
                break
            pos = text.find("{", pos + 1)
            continue
        if isinstance(obj, dict):
            found, duplicate, truncated_after_last = obj, None, False
        pos = text.find("{", end)
    if truncated_after_last:
        return None, "truncated: the last JSON object is not closed (output cut off?)"
    if found is None and duplicate is not None:
        return None, f"duplicate key {duplicate!r} in the answer object"
    if found is None:
        return None, "no JSON object found in the answer"
    return found, None


def parse_answer(text: str | None) -> ParsedAnswer:
    """Parse a model's final answer text (see the module docstring for the rules).

    >>> parse_answer('Answer: {"D0": 50, "D1": 50, "D2": 0, "D3": 0, "D4": 0, "D5": 0, "D6": 0, "D7": 0}').weights
    (0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    """
    if text is None or not str(text).strip():
        return _invalid("empty answer")
    text = str(text)
    fences = list(_FENCE.finditer(text))
    if fences:
        if _OPEN_FENCE.search(text, fences[-1].end()):
            return _invalid("truncated: the last fenced json block is not closed")
        text = fences[-1].group(1)
    obj, reason = _last_object(text)
    if obj is None:
        return _invalid(reason or "no JSON object found in the answer")
    return parse_weights(obj)


MAX_WEIGHT = 1e9
"""Weights are percentages: a weight beyond this (e.g. 1e308, whose sum overflows) is out of range."""


def weight_fault(values: Sequence[Any]) -> tuple[str, str] | None:
    """Why ``values`` are not eight usable weights, or None: the package's one weight rule.

    Usable: eight real numbers (not bools, not strings), finite, nonnegative, at most
    ``MAX_WEIGHT``, with a positive total. The answer parser, the prediction-file validator and
    the agents' unit check all ask this. Returns (what, detail): ``what`` names the fault without
    the value, as the validator tallies it ("have a negative weight"); ``detail`` names the weight
    ("D3 is negative: -1.0").
    """
    if len(values) != len(DIRECTION_KEYS):
        return "give fewer than eight weights", f"{len(values)} weights, not eight"
    for key, value in zip(DIRECTION_KEYS, values, strict=True):
        if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.integer | np.floating):
            return f"have a non-numeric {key}", f"{key} is not a number: {value!r}"
        if isinstance(value, float | np.floating) and math.isnan(value):  # an int may be too large for a float
            return "have a NaN weight", f"{key} is NaN"
        if isinstance(value, float | np.floating) and math.isinf(value):
            return "have an infinite weight", f"{key} is infinite"
        if abs(value) > MAX_WEIGHT:
            return f"have a weight beyond +-{MAX_WEIGHT:g} (out of range)", f"{key} is beyond +-{MAX_WEIGHT:g}"
        if value < 0:
            return "have a negative weight", f"{key} is negative: {float(value)!r}"
    if not math.fsum(values) > 0:
        return "all weights are zero", "the weights sum to zero"
    return None


def parse_weights(mapping: Mapping[str, Any]) -> ParsedAnswer:
    """Validate a mapping of direction weights (exactly the keys D0..D7, :func:`weight_fault`)
    and renormalise it to the simplex."""
    raw = dict(mapping)
    missing = [k for k in DIRECTION_KEYS if k not in raw]
    extra = sorted(str(k) for k in set(raw) - set(DIRECTION_KEYS))
    parts = [f"{what} keys {', '.join(keys)}" for what, keys in (("missing", missing), ("extra", extra)) if keys]
    if parts:
        return _invalid("; ".join(parts), raw)
    values = [raw[key] for key in DIRECTION_KEYS]
    fault = weight_fault(values)
    if fault is not None:
        return _invalid(fault[1], raw)
    total = math.fsum(values)
    return ParsedAnswer(valid=True, weights=tuple(float(v) / total for v in values), raw=raw, reason=None)
