"""Temporal exposure masks (the paper's temporal exposure masks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rap_benchmark.core.spec import PAPER_ORIGINS
from rap_benchmark.evaluation.scoring.exposure import (
    UnknownModelError,
    effective_date,
    exposure_masks,
    load_registry,
    strict_lookup,
)


def test_paper_gpt55_only_last_origin_is_forecast_strict_and_none_joint_strict() -> None:
    """The paper: under GPT-5.5's 2025-12-01 cutoff only the 2026-01 origin is fully strict,
    and no origin supports a Joint-Strict claim."""
    masks = exposure_masks(None, ["gpt-5.5"], PAPER_ORIGINS)
    assert masks["forecast_strict"].tolist() == [False, False, False, False, True]
    assert not masks["joint_strict"].any()
    assert set(masks["basis"]) == {"knowledge_cutoff"}


def test_month_precision_cutoff_counts_the_whole_month() -> None:
    assert effective_date("2023-12").isoformat() == "2024-01-01"
    assert effective_date("2024-06-15").isoformat() == "2024-06-15"
    masks = exposure_masks(None, ["Llama-3.1-8B-Instruct"], PAPER_ORIGINS)
    assert masks["forecast_strict"].all()  # T = 2024-01-01 is on the exposure date: strict
    assert masks["joint_strict"].tolist() == [False, True, True, True, True]


def test_release_date_used_when_no_cutoff() -> None:
    masks = exposure_masks(None, ["Qwen/Qwen2.5-7B-Instruct"], PAPER_ORIGINS)
    assert set(masks["basis"]) == {"release_date"}
    assert masks["exposure_date"].iloc[0] == "2024-09-19"
    assert masks["forecast_strict"].tolist() == [False, False, True, True, True]
    assert masks["joint_strict"].tolist() == [False, False, False, True, True]


def test_joint_strict_implies_forecast_strict() -> None:
    reg = load_registry()
    models = [e.model for e in reg.entries]
    masks = exposure_masks(reg, models, PAPER_ORIGINS)
    assert len(masks) == len(models) * len(PAPER_ORIGINS)
    assert (~masks["joint_strict"] | masks["forecast_strict"]).all()
    assert all(e.source for e in reg.entries)


def test_unknown_model_is_a_clear_error() -> None:
    with pytest.raises(UnknownModelError, match="'my-model' is not in the exposure registry"):
        exposure_masks(None, ["my-model"], PAPER_ORIGINS)


def test_registry_file_json_and_yaml(tmp_path: Path) -> None:
    entries = [{"model": "m1", "knowledge_cutoff": "2024-06-30", "source": "vendor page"}]
    (tmp_path / "r.json").write_text(json.dumps(entries), encoding="utf-8")
    (tmp_path / "r.yaml").write_text(
        "models:\n  - model: m1\n    release_date: '2024-07'\n    source: model card\n", encoding="utf-8"
    )
    a = exposure_masks(tmp_path / "r.json", ["m1"], ["2024-07-01", "2025-01-01"])
    b = exposure_masks(tmp_path / "r.yaml", ["m1"], ["2024-07-01", "2025-01-01"])
    assert a["forecast_strict"].tolist() == [True, True] and a["joint_strict"].tolist() == [False, True]
    assert b["forecast_strict"].tolist() == [False, True] and b["basis"].iloc[0] == "release_date"
    lookup = strict_lookup(a, "joint_strict")
    assert lookup == {("m1", "2024-07-01"): False, ("m1", "2025-01-01"): True}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"model": "m", "source": "s"}, "needs knowledge_cutoff or release_date"),
        ({"model": "m", "release_date": "2024-01-01"}, "'source' is required"),
        ({"model": "m", "release_date": "2024-01-01", "source": "s", "cutof": "x"}, "unknown keys cutof"),
        ({"model": "m", "release_date": "Jan 2024", "source": "s"}, "expected YYYY-MM-DD or YYYY-MM"),
    ],
)
def test_bad_entries_rejected(entry: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        exposure_masks([entry], ["m"], PAPER_ORIGINS)


def test_duplicate_names_rejected() -> None:
    entries = [
        {"model": "a", "release_date": "2024-01-01", "source": "s"},
        {"model": "b", "aliases": ["a"], "release_date": "2024-01-01", "source": "s"},
    ]
    with pytest.raises(ValueError, match="used by a and b"):
        exposure_masks(entries, ["a"], PAPER_ORIGINS)
