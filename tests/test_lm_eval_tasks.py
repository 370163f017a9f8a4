"""The RAP lm-eval tasks: the lm-eval 0.4.13 internals they rely on, the batched search rounds,
and an end-to-end ``simple_evaluate`` with a scripted model whose per-episode Spearman must equal
what ``rap score``'s scorer computes from the converted prediction file."""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from lmeval_samples import samples_episode_metrics

lm_eval = pytest.importorskip("lm_eval")
from lm_eval.api.model import LM  # noqa: E402
from lm_eval.api.task import TaskConfig  # noqa: E402

from rap_benchmark.agents.protocol import Request  # noqa: E402
from rap_benchmark.agents.toolset import search_text_protocol  # noqa: E402
from rap_benchmark.core.records import DIRECTION_KEYS, Condition  # noqa: E402
from rap_benchmark.integrations.lmeval import harness  # noqa: E402
from rap_benchmark.integrations.lmeval.rounds import generation_kwargs  # noqa: E402
from rap_benchmark.integrations.lmeval.samples import unit_record  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


# -- pinned internals ---------------------------------------------------------------------------


def test_lm_eval_version_is_the_pinned_one() -> None:
    from importlib.metadata import version

    assert version("lm_eval") == harness.LM_EVAL_VERSION


def test_evaluator_internals_the_task_relies_on() -> None:
    """RapTask finds the model via ``chat_template.__self__`` or the evaluator's local ``lm``, and
    continues the episodes in ``apply_filters`` after the first batched generate_until."""
    from lm_eval import evaluator
    from lm_eval.api.task import ConfigurableTask, Task

    src = inspect.getsource(evaluator.evaluate)
    # the one internal: without --apply_chat_template the model is the evaluate frame's local `lm`
    assert "lm" in inspect.signature(evaluator.evaluate).parameters
    from rap_benchmark.integrations.lmeval.task import evaluator_lm

    assert evaluator_lm() is None  # outside an evaluation there is none to find
    assert 'chat_template=getattr(lm, "apply_chat_template", None)' in src
    run = src.index("resps = getattr(lm, reqtype)(cloned_reqs)")
    filt = src.index("task.apply_filters()")
    proc = src.index("task.process_results(")
    assert run < filt < proc
    assert "req.filtered_resps[filter_key] for req in requests" in src
    assert '"resps": [req.resps for req in requests]' in src
    params = inspect.signature(Task.build_all_requests).parameters
    assert {"chat_template", "apply_chat_template"} <= set(params)
    params = inspect.signature(ConfigurableTask.fewshot_context).parameters
    assert list(params)[1:7] == [
        "doc",
        "num_fewshot",
        "system_instruction",
        "apply_chat_template",
        "fewshot_as_multiturn",
        "chat_template",
    ]
    cfg_fields = set(TaskConfig.__dataclass_fields__)
    assert {"custom_dataset", "metric_list", "generation_kwargs", "metadata", "test_split"} <= cfg_fields
    from lm_eval.tasks._factory import _ctor_accepts_config

    from rap_benchmark.integrations.lmeval.task import RapTask

    assert _ctor_accepts_config(RapTask)
    from lm_eval.api.instance import Instance

    assert {"request_type", "doc", "arguments", "idx", "metadata", "resps", "filtered_resps"} <= set(
        Instance.__dataclass_fields__
    )


def test_shipped_task_folder_is_generated_and_current() -> None:
    folder = REPO / "eval_harness_tasks"
    assert harness.is_current(folder), (
        "eval_harness_tasks/ is stale: run `rap harness lm-eval-path --write eval_harness_tasks`"
    )
    assert harness.task_path() == folder
    names = {p.stem for p in folder.glob("*.yaml")}
    assert names == {*harness.TASKS, harness.GROUP}


def test_task_path_materialises_when_no_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAP_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(harness, "repo_task_dir", lambda: tmp_path / "absent")
    path = harness.task_path()
    assert path.parent == tmp_path and harness.is_current(path)


def test_task_index_registers_all_tasks_and_the_group() -> None:
    """Regression: ``rap`` was a tag, so ``--tasks rap`` printed no aggregate row."""
    from lm_eval.tasks._index import Kind, TaskIndex

    index = TaskIndex.build([REPO / "eval_harness_tasks"])
    for name in harness.TASKS:
        assert index[name].kind is Kind.PY_TASK
    assert index[harness.GROUP].kind is Kind.GROUP
    import yaml

    group = yaml.safe_load((REPO / "eval_harness_tasks" / f"{harness.GROUP}.yaml").read_text(encoding="utf-8"))
    assert group["task"] == list(harness.RAP_TASKS)
    assert {m["metric"] for m in group["aggregate_metric_list"]} == {"spearman", "valid"}


# -- protocol and rounds --------------------------------------------------------------------


def test_restore_stop_only_closes_an_open_search_tag() -> None:
    restore_stop = search_text_protocol().restore_stop
    assert restore_stop("<search>graph nets") == "<search>graph nets</search>"
    assert restore_stop('x <search start_date="2023-10-01">q') == 'x <search start_date="2023-10-01">q</search>'
    assert restore_stop("<search>a</search> then") == "<search>a</search> then"
    assert restore_stop('{"D0": 100}') == '{"D0": 100}'


def test_generation_kwargs_follow_the_request_state() -> None:
    base = {"until": ["</search>", "<observation>", "END"], "max_gen_toks": 64, "do_sample": False}
    protocol = search_text_protocol()
    open_ = Request(messages=(), tools=({},), tool_choice="auto", max_tokens=1800, text_protocol=protocol)
    forced = Request(messages=(), tools=({},), tool_choice="none", max_tokens=1800, text_protocol=protocol)
    closed = Request(messages=(), tools=None, tool_choice=None, max_tokens=32)
    assert generation_kwargs(open_, base)["until"] == ["</search>", "<observation>", "END"]
    assert "</search>" not in generation_kwargs(forced, base)["until"]
    assert generation_kwargs(closed, base)["max_gen_toks"] == 32
    assert generation_kwargs(open_, base)["max_gen_toks"] == 64


# -- scripted model, end to end -----------------------------------------------------------


def _answer(ctx: str) -> str:
    digest = hashlib.sha256(ctx.encode()).digest()
    weights = {k: int(b) % 50 for k, b in zip(DIRECTION_KEYS, digest, strict=False)}
    return "Final answer: " + json.dumps(weights)


class ScriptedLM(LM):
    """Searches once per episode (twice for one field), then answers with weights hashed from the
    full context; one episode answers badly. Records every batch it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[list[str]] = []

    def apply_chat_template(self, chat_history, add_generation_prompt=True) -> str:
        text = "".join(f"<|{m['role']}|>{m['content']}\n" for m in chat_history)
        return text + ("<|assistant|>" if add_generation_prompt else "")

    @property
    def tokenizer_name(self) -> str:
        return "scripted"

    def chat_template(self, chat_template=False):
        return "scripted"

    def loglikelihood(self, requests):
        raise NotImplementedError

    def loglikelihood_rolling(self, requests):
        raise NotImplementedError

    def generate_until(self, requests):
        ctxs = [r.args[0] for r in requests]
        self.batches.append(ctxs)
        out = []
        for ctx, r in zip(ctxs, requests, strict=True):
            assert r.args[1]["do_sample"] is False
            origin = re.search(r"Forecast origin T: (\d{4}-\d\d-\d\d)", ctx).group(1)
            n_obs = ctx.count("<observation>\n")  # the protocol text itself names the tag once
            if n_obs == 0:
                out.append("I will search. <search>learning methods")  # stop sequence stripped, as lm-eval does
            elif n_obs == 1 and origin == "2024-07-01":
                out.append('<search start_date="2024-02-01">model data')
            elif origin == "2025-01-01":
                out.append("I am not sure.")  # invalid twice: nudged once, then the unit is invalid
            else:
                out.append(_answer(ctx))
        return out


@pytest.fixture(scope="module")
def scripted_run(mini_dir: Path):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    lm = ScriptedLM()
    meta = {"instance_dir": str(mini_dir), "split": "all", "max_search_calls": 3}
    tm = TaskManager(include_path=str(REPO / "eval_harness_tasks"), metadata=meta)
    res = simple_evaluate(
        model=lm,
        tasks=["rap_forecast"],
        task_manager=tm,
        apply_chat_template=True,
        limit=5,
        log_samples=True,
        bootstrap_iters=0,
    )
    return lm, res


def test_search_rounds_are_batched_and_observations_real(scripted_run, mini) -> None:
    lm, res = scripted_run
    samples = res["samples"]["rap_forecast"]
    assert len(samples) == 5
    # round 1: all five first turns in one batch; then at most one batch per further round
    assert len(lm.batches[0]) == 5
    assert all(len(b) <= 5 for b in lm.batches[1:]) and len(lm.batches) <= 5
    from rap_benchmark.bm25 import SearchEngine
    from rap_benchmark.bm25.tool import make_search_tool

    engine = SearchEngine.from_instance(mini)
    for s in samples:
        rec = unit_record(s)
        doc = s["doc"]
        assert rec["n_search_calls"] >= 1
        first = rec["search_calls"][0]
        assert first["query"] == "learning methods"
        tool = make_search_tool(engine, doc["field_id"], doc["origin"], Condition.A1.regime)
        assert first["result_ids"] == [r["arxiv_id"] for r in tool("learning methods")["results"]]
        assert s["filtered_resps"][0] == rec["answer_text"]


def test_the_results_name_the_instances_benchmark_version_and_the_package(scripted_run, mini) -> None:
    """Regression (issue 36): lm-eval's results gave every RAP task version 1.1.0 (the YAML's) while a
    run on mini, whose scores mean benchmark version 1.0.0, said 1.0.0 everywhere else."""
    from rap_benchmark.core.spec import package_version

    _, res = scripted_run
    assert res["versions"]["rap_forecast"] == mini.spec.version
    meta = res["configs"]["rap_forecast"]["metadata"]
    assert (meta["benchmark_version"], meta["package_version"]) == (mini.spec.version, package_version())


def test_per_episode_spearman_equals_rap_score(scripted_run, mini, tmp_path: Path) -> None:
    from rap_benchmark.evaluation.predictions import read_predictions, validate_predictions, write_predictions
    from rap_benchmark.evaluation.scoring.aggregate import field_macro
    from rap_benchmark.evaluation.scoring.score import score_predictions
    from rap_benchmark.integrations.lmeval.samples import predictions_from_samples

    _, res = scripted_run
    samples = json.loads(json.dumps(res["samples"]["rap_forecast"], default=str))  # as logged on disk
    preds = predictions_from_samples(samples, model="scripted")
    path = write_predictions(preds, tmp_path / "scripted.jsonl")
    report = validate_predictions(path, mini, split=None)
    assert report.scorable
    scored = score_predictions(mini, read_predictions(path))
    ours = samples_episode_metrics(samples)
    merged = ours.merge(scored, on=["field_id", "origin", "condition"], suffixes=("_lm", "_rap"))
    assert len(merged) == 5
    assert (~preds["valid"]).sum() >= 1  # the scripted invalid episode stays invalid in both
    a, b = merged["spearman_lm"].to_numpy(), merged["spearman_rap"].to_numpy()
    assert np.array_equal(np.isnan(a), np.isnan(b))
    np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=0, atol=1e-12)
    agg = res["results"]["rap_forecast"]["spearman,none"]
    expected = field_macro(scored["spearman"].to_numpy(), scored["field_id"].to_numpy())
    assert math.isclose(agg, expected, abs_tol=1e-12) or (math.isnan(agg) and math.isnan(expected))


def test_answer_prefill_opens_only_answer_turns_and_is_recorded() -> None:
    from rap_benchmark.agents.prompts import ANSWER_PREFILL
    from rap_benchmark.integrations.lmeval.rounds import run_rounds

    seen: list[str] = []

    def generate(batch):
        seen.extend(ctx for ctx, _ in batch)
        return ['0.5, "D1": 0.5}' if ctx.endswith(ANSWER_PREFILL) else "<search>x" for ctx, _ in batch]

    answer = Request(messages=({"role": "user", "content": "q"},), tools=None, tool_choice=None, max_tokens=64)
    searching = Request(
        messages=({"role": "user", "content": "q"},),
        tools=({},),
        tool_choice="auto",
        max_tokens=64,
        text_protocol=search_text_protocol(),
    )

    def loop(request):
        return lambda backend: backend.complete(request, None)

    results, rounds = run_rounds(
        {"a": loop(answer), "s": loop(searching)},
        generate=generate,
        render=lambda r: "CTX:",
        base_kwargs={"max_gen_toks": 64},
        answer_prefill=ANSWER_PREFILL,
    )
    assert rounds == 1 and sorted(seen) == sorted(["CTX:" + ANSWER_PREFILL, "CTX:"])
    assert results["a"].content == ANSWER_PREFILL + '0.5, "D1": 0.5}' and results["a"].prefill == ANSWER_PREFILL
    assert results["s"].prefill is None and results["s"].tool_calls
    off, _ = run_rounds({"a": loop(answer)}, generate=generate, render=lambda r: "CTX:", base_kwargs={})
    assert off["a"].prefill is None and off["a"].content == "<search>x"  # no prefill, and no tools: kept as written


def test_placeholder_metrics_are_named_and_survive_pickling() -> None:
    """lm-eval names each metric by its function; a serialised task config must find the same function."""
    import pickle

    from rap_benchmark.integrations.lmeval import citecast_task, task

    for module, name in [
        (task, "spearman"),
        (task, "state_fidelity"),
        (task, "valid"),
        (task, "n_search_calls"),
        (citecast_task, "reward"),
        (citecast_task, "n_tool_calls"),
    ]:
        fn = getattr(module, f"{name}_metric")
        assert fn.__name__ == name and fn(references=[1], predictions=[2]) is None
        assert pickle.loads(pickle.dumps(fn)) is fn
