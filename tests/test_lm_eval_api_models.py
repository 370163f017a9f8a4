"""The stock ``lm_eval`` CLI with API models against the scripted OpenAI-compatible server.

Regression (issue 16): every chat API model (``local-chat-completions --apply_chat_template``)
exited 0 with ``valid`` 0 and NaN: the round renderer added a string to lm-eval's ``JsonChatStr``
(``TypeError: can only concatenate tuple (not "str") to tuple``). Here both API model kinds run
a real search-and-answer loop, and the per-episode Spearman lm-eval reports equals ``rap score``'s
on the converted prediction file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lmeval_samples import samples_episode_metrics

pytest.importorskip("lm_eval")
pytest.importorskip("tenacity")  # lm-eval[api]

REPO = Path(__file__).resolve().parents[1]
LM_EVAL = str(Path(sys.executable).with_name("lm_eval"))


@pytest.fixture(scope="module")
def scripted_url():
    from rap_benchmark.testing.scripted_server import serve

    with serve(n_searches=2) as url:
        yield url


@pytest.fixture(scope="module")
def citecast_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rap_benchmark.integrations.lmeval.citecast_task import ensure_embedded

    return ensure_embedded(tmp_path_factory.mktemp("cache"))


def harness_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["RAP_CACHE_DIR"] = str(cache)
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    return env


def run_lm_eval(args: list[str], env: dict[str, str], cwd: Path) -> Path:
    out = cwd / "out"
    proc = subprocess.run(
        [
            LM_EVAL,
            *args,
            "--include_path",
            str(REPO / "eval_harness_tasks"),
            "--log_samples",
            "--output_path",
            str(out),
        ],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return out


def results_of(out: Path) -> tuple[dict, str]:
    (path,) = sorted(out.rglob("results_*.json"))
    text = path.read_text(encoding="utf-8")
    return json.loads(text), text


def samples_of(out: Path, task: str) -> list[dict]:
    from rap_benchmark.integrations.lmeval.samples import SAMPLES_NAME

    files = [p for p in out.rglob("samples_*.jsonl") if SAMPLES_NAME.match(p.name).group("task") == task]
    assert len(files) == 1
    return [json.loads(line) for line in files[0].read_text(encoding="utf-8").splitlines() if line.strip()]


def assert_scores_equal_rap_score(samples: list[dict], inst, tmp_path: Path) -> None:
    from rap_benchmark.evaluation.predictions import read_predictions, write_predictions
    from rap_benchmark.evaluation.scoring.score import score_predictions
    from rap_benchmark.integrations.lmeval.samples import predictions_from_samples

    preds = predictions_from_samples(samples, model="scripted")
    path = write_predictions(preds, tmp_path / "scripted.jsonl")
    scored = score_predictions(inst, read_predictions(path))
    ours = samples_episode_metrics(samples)
    merged = ours.merge(scored, on=["field_id", "origin", "condition"], suffixes=("_lm", "_rap"))
    assert len(merged) == len(samples) > 0
    a, b = merged["spearman_lm"].to_numpy(float), merged["spearman_rap"].to_numpy(float)
    assert np.isfinite(a).all()
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_chat_completions_run_search_loops_for_rap_and_citecast(
    scripted_url: str, mini_dir: Path, mini, citecast_dir: Path, tmp_path: Path
) -> None:
    meta = json.dumps({"instance_dir": str(mini_dir), "citecast_dir": str(citecast_dir)})
    out = run_lm_eval(
        [
            "--model",
            "local-chat-completions",
            "--model_args",
            f"model=scripted,base_url={scripted_url}/chat/completions",
            "--apply_chat_template",
            "--tasks",
            "rap_forecast,citecast",
            "--limit",
            "2",
            "--metadata",
            meta,
        ],
        harness_env(tmp_path / "cache"),
        tmp_path,
    )
    results, text = results_of(out)
    assert "NaN" not in text  # regression: the results JSON held a bare NaN
    assert results["results"]["rap_forecast"]["valid,none"] == 1.0
    assert results["results"]["citecast"]["valid,none"] == 1.0
    assert results["higher_is_better"]["rap_forecast"]["n_search_calls"] is None
    assert results["higher_is_better"]["citecast"]["n_tool_calls"] is None
    from rap_benchmark.integrations.lmeval.samples import unit_record

    rap = samples_of(out, "rap_forecast")
    for s in rap:
        rec = unit_record(s)
        assert rec["n_search_calls"] == 2 and rec["valid"], rec.get("invalid_reason")
        assert all(call["result_ids"] for call in rec["search_calls"])  # real observations came back
    assert_scores_equal_rap_score(rap, mini, tmp_path)
    for s in samples_of(out, "citecast"):
        rec = unit_record(s)
        assert rec["valid"] and rec["n_tool_calls"] == 2 and rec["reward"] is not None


def test_completions_api_runs_the_search_loop(scripted_url: str, mini_dir: Path, mini, tmp_path: Path) -> None:
    out = run_lm_eval(
        [
            "--model",
            "local-completions",
            "--model_args",
            f"model=scripted,base_url={scripted_url}/completions,tokenizer_backend=none",
            "--tasks",
            "rap_state",
            "--limit",
            "2",
            "--metadata",
            json.dumps({"instance_dir": str(mini_dir)}),
        ],
        harness_env(tmp_path / "cache"),
        tmp_path,
    )
    results, text = results_of(out)
    assert "NaN" not in text
    assert results["results"]["rap_state"]["valid,none"] == 1.0
    samples = samples_of(out, "rap_state")
    from rap_benchmark.integrations.lmeval.samples import unit_record

    assert all(unit_record(s)["n_search_calls"] == 2 for s in samples)
    assert_scores_equal_rap_score(samples, mini, tmp_path)


def test_chat_context_gets_no_string_prefill() -> None:
    """Regression: ``JsonChatStr + prefill`` raised TypeError in every episode of a chat API model."""
    from lm_eval.models.api_models import JsonChatStr

    from rap_benchmark.agents.prompts import ANSWER_PREFILL
    from rap_benchmark.agents.protocol import Request
    from rap_benchmark.integrations.lmeval.rounds import run_rounds

    seen: list = []

    def generate(batch):
        seen.extend(ctx for ctx, _ in batch)
        return ['{"D0": 1, "D1": 0, "D2": 0, "D3": 0, "D4": 0, "D5": 0, "D6": 0, "D7": 0}' for _ in batch]

    answer = Request(messages=({"role": "user", "content": "q"},), tools=None, tool_choice=None, max_tokens=64)
    results, _ = run_rounds(
        {"a": lambda backend: backend.complete(answer, None)},
        generate=generate,
        render=lambda r: JsonChatStr(json.dumps(list(r.messages))),
        base_kwargs={},
        answer_prefill=ANSWER_PREFILL,
    )
    assert isinstance(seen[0], JsonChatStr) and results["a"].prefill is None


def test_vllm_data_parallel_is_refused() -> None:
    """lm-eval's vllm with data_parallel_size > 1 would reload the model on every search round."""
    from rap_benchmark.integrations.lmeval.task import check_reusable

    fake = type("VLLM", (), {"__module__": "lm_eval.models.vllm_causallms", "data_parallel_size": 2})()
    with pytest.raises(ValueError, match="data_parallel_size"):
        check_reusable(fake)
    check_reusable(type("VLLM", (), {"__module__": "lm_eval.models.vllm_causallms", "data_parallel_size": 1})())
