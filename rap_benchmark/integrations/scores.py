"""One episode's metrics, for every harness (lm-eval, Inspect).

A RAP answer is parsed with the scorer's parser and scored with the scorer's Spearman, so a harness
reports exactly what ``rap score`` computes from the converted prediction file; a CiteCast episode
reports what its environment recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from rap_benchmark.core.records import Task, parse_enum
from rap_benchmark.evaluation.scoring import parse_answer, spearman


def episode_metrics(doc: dict[str, Any], answer: str | None) -> dict[str, Any]:
    """The per-episode metrics of a final answer (what ``process_results`` returns).

    ``spearman`` and ``state_fidelity`` are ``(field_id, value)`` pairs, present only when the
    value is defined (a valid answer and a non-constant target): the scorer leaves undefined
    episodes out of the field-macro mean, and lm-eval aggregates each metric over the documents
    that produced it, so both see the same values and no NaN is written."""
    parsed = parse_answer(answer)
    fid = doc["field_id"]

    def rho_with(target: Any) -> float:
        if not parsed.valid or parsed.weights is None or target is None:
            return float("nan")
        p = np.asarray(parsed.weights, dtype=np.float64)[None, :]
        return float(spearman(p, np.asarray(target, dtype=np.float64)[None, :])[0])

    rho, fidelity = rho_with(doc.get("y")), rho_with(doc.get("x"))
    out: dict[str, Any] = {}
    if np.isfinite(rho):
        out["spearman"] = (fid, rho)
    if parse_enum(Task, doc["task"]) is Task.STATE and np.isfinite(fidelity):
        out["state_fidelity"] = (fid, fidelity)
    out["valid"] = 1.0 if parsed.valid else 0.0
    return out


def citecast_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """The per-task metrics of a CiteCast episode record: the environment's reward (0 without an
    accepted submission), validity and the number of web calls."""
    valid = bool(record.get("valid"))
    reward = record.get("reward")
    return {
        "reward": float(reward) if valid and reward is not None else 0.0,
        "valid": 1.0 if valid else 0.0,
        "n_tool_calls": float(record.get("n_tool_calls", 0)),
    }
