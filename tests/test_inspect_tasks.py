"""Inspect AI tasks: every RAP condition and CiteCast with native tool calls, against Inspect's
``mockllm`` and against the scripted OpenAI-compatible server through the stock ``inspect eval``
CLI; the logs convert to prediction files whose scores ``rap score`` reproduces."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("inspect_ai")
from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.log import read_eval_log  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from rap_benchmark.core.records import Condition  # noqa: E402
from rap_benchmark.integrations.inspect import citecast, log_predictions, rap_forecast, rap_state  # noqa: E402
from rap_benchmark.integrations.inspect.logs import served_model_name  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
INSPECT = str(Path(sys.executable).with_name("inspect"))
ANSWER = '{"D0": 10, "D1": 20, "D2": 5, "D3": 5, "D4": 30, "D5": 10, "D6": 10, "D7": 10}'
MOCK = "mockllm/model"


def _usage(o: ModelOutput) -> ModelOutput:
    o.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)  # mockllm would count with tiktoken
    return o


def mock_model(outputs: list[ModelOutput]):
    return get_model(MOCK, custom_outputs=[_usage(o) for o in outputs])


def eval_one_sample(task, outputs: list[ModelOutput], tmp_path: Path):
    """Run ``task`` on one sample against ``mockllm`` replaying ``outputs``; (log, its sample)."""
    (log,) = inspect_eval(task, model=mock_model(outputs), limit=1, log_dir=str(tmp_path / "logs"), display="none")
    (sample,) = read_eval_log(log.location).samples
    return log, sample


def tool_calls(sample) -> list:
    """The assistant's tool calls in a logged sample, in order."""
    return [c for m in sample.messages if m.role == "assistant" for c in (m.tool_calls or [])]


def entry_point_installed() -> bool:
    """Whether the stock ``inspect`` CLI, started outside this checkout, names this checkout's tasks
    ``rap_benchmark/...``: Inspect finds them by entry point and prefixes the package name only for
    an installed or editable package. Asked of a fresh interpreter outside the repository, as the
    CLI runs: from the repository root (``python -m pytest`` puts it first on ``sys.path``) the
    ``rap_benchmark.egg-info`` that setuptools leaves there shadows the editable install's
    metadata, which made this check fail, and the test skip, on every clean clone (CI included)."""
    import tempfile

    code = (
        "from importlib.metadata import entry_points\n"
        "from inspect_ai._util.package import package_is_installed_editable as e, "
        "package_path_is_in_site_packages as s\n"
        "import rap_benchmark\n"
        "ok = any(ep.name == 'rap_benchmark' for ep in entry_points(group='inspect_ai'))\n"
        "ok = ok and (e('rap_benchmark') or s(rap_benchmark.__file__))\n"
        "print(rap_benchmark.__file__ if ok else '')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tempfile.gettempdir(), env=env, capture_output=True, text=True
    )
    found = proc.stdout.strip()
    return proc.returncode == 0 and bool(found) and Path(found).resolve().parent == (REPO / "rap_benchmark").resolve()


needs_install = pytest.mark.skipif(
    not entry_point_installed(),
    reason="this checkout is not pip-installed (-e) in this interpreter (Inspect finds tasks by entry point)",
)


@pytest.fixture(scope="module")
def citecast_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rap_benchmark.integrations.citecast_source import ensure_embedded

    return ensure_embedded(tmp_path_factory.mktemp("cache"))


def test_served_model_name() -> None:
    assert served_model_name("vllm/Qwen/Qwen3-4B") == "Qwen/Qwen3-4B"
    assert served_model_name("openai-api/scripted/my-org/my-model") == "my-org/my-model"
    assert served_model_name("openai/gpt-4o") == "gpt-4o"


@pytest.mark.parametrize("condition", [c.value for c in Condition])
def test_mockllm_runs_each_condition_with_search_tool_calls(condition: str, mini_dir: Path, mini, tmp_path) -> None:
    cond = Condition(condition)
    outputs = [] if cond.regime is None else [ModelOutput.for_tool_call(MOCK, "search", {"query": "learning methods"})]
    outputs.append(ModelOutput.from_content(MOCK, ANSWER))
    make = rap_state if cond.task.value == "state" else rap_forecast
    log, sample = eval_one_sample(make(condition=condition, instance_dir=str(mini_dir)), outputs, tmp_path)
    assert log.status == "success", log.error
    calls = tool_calls(sample)
    tool_results = [m for m in sample.messages if m.role == "tool"]
    record = sample.store["rap_record"]
    if cond.regime is None:
        assert not calls and not tool_results and record["n_search_calls"] == 0
    else:
        assert [c.function for c in calls] == ["search"] and len(tool_results) == 1
        (call,) = record["search_calls"]
        from rap_benchmark.bm25 import SearchEngine
        from rap_benchmark.bm25.tool import make_search_tool

        tool = make_search_tool(
            SearchEngine.from_instance(mini), sample.metadata["field_id"], sample.metadata["origin"], cond.regime
        )
        assert json.loads(tool_results[0].text) == tool("learning methods")  # the same Search tool function
        assert call["result_ids"] == [r["arxiv_id"] for r in tool("learning methods")["results"]]
    assert sample.scores["rap_state_scorer" if cond.task.value == "state" else "rap_scorer"].value["valid"] == 1.0


def test_mockllm_search_budget_forces_the_answer(mini_dir: Path, tmp_path) -> None:
    """The runner's cap: after max_search_calls calls the search tool is closed and the answer forced."""
    outputs = [ModelOutput.for_tool_call(MOCK, "search", {"query": f"q{i}"}) for i in range(2)]
    outputs.append(ModelOutput.from_content(MOCK, ANSWER))
    _, sample = eval_one_sample(
        rap_forecast(condition="A1", instance_dir=str(mini_dir), max_search_calls=2), outputs, tmp_path
    )
    record = sample.store["rap_record"]
    assert record["n_search_calls"] == 2 and any(e.startswith("forced_answer") for e in record["events"])
    assert record["valid"]


def test_mockllm_runs_citecast_with_environment_tools(citecast_dir: Path, tmp_path) -> None:
    from rap_benchmark.citecast.env import CiteCastEnv

    env = CiteCastEnv.from_instance(citecast_dir)
    task_id = env.task_ids("test")[0]
    title = env.tasks[task_id].paper.title
    outputs = [
        ModelOutput.for_tool_call(MOCK, "web_search", {"query": title}),
        ModelOutput.for_tool_call(MOCK, "submit_prediction", {"prediction": 7, "justification": "mock"}),
    ]
    log, sample = eval_one_sample(citecast(citecast_dir=str(citecast_dir)), outputs, tmp_path)
    assert log.status == "success", log.error
    assert sample.id == task_id
    calls = [c.function for c in tool_calls(sample)]
    assert calls == ["web_search", "submit_prediction"]
    score = sample.scores["citecast_scorer"].value
    assert score["valid"] == 1.0 and score["n_tool_calls"] == 1.0  # web calls; the submission is the answer
    from rap_benchmark.citecast.reward import reward

    assert score["reward"] == pytest.approx(reward(7, env.tasks[task_id].target))


def _env(tmp_path: Path, url: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # the installed (editable) package, as a user runs it; see entry_point_installed
    env["RAP_CACHE_DIR"] = str(tmp_path / "cache")
    env.pop("RAP_INSTANCE_DIR", None)
    env["SCRIPTED_BASE_URL"] = url
    env["SCRIPTED_API_KEY"] = "unused"
    return env


def inspect_cli(args: list[str], env: dict[str, str], cwd: Path) -> Path:
    logs = cwd / "logs"
    cmd = [INSPECT, "eval", *args, "--model", "openai-api/scripted/scripted", "--log-dir", str(logs)]
    proc = subprocess.run(cmd + ["--display", "plain"], env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return logs


@needs_install
def test_inspect_cli_every_condition_and_citecast_against_scripted_server(
    mini_dir: Path, mini, citecast_dir: Path, tmp_path: Path
) -> None:
    from rap_benchmark.evaluation.scoring.score import score_predictions
    from rap_benchmark.testing.scripted_server import serve

    with serve(n_searches=2) as url:
        env = _env(tmp_path, url)
        where = ["-T", f"instance_dir={mini_dir}", "-T", f"citecast_dir={citecast_dir}", "--limit", "2"]
        # the defaults (rap_forecast: A1, rap_state: A2) and citecast in one run, then A0, A3, A4
        logs = inspect_cli(
            ["rap_benchmark/rap_forecast", "rap_benchmark/rap_state", "rap_benchmark/citecast", *where], env, tmp_path
        )
        for task, cond in (("rap_forecast", "A0"), ("rap_forecast", "A3"), ("rap_state", "A4")):
            inspect_cli([f"rap_benchmark/{task}", "-T", f"condition={cond}", *where], env, tmp_path)
    rap_logs, citecast_logs = [], []
    for path in sorted(logs.glob("*.eval")):
        log = read_eval_log(str(path))
        assert log.status == "success"
        (citecast_logs if log.eval.task.endswith("citecast") else rap_logs).append(log)
    assert len(rap_logs) == 5 and len(citecast_logs) == 1
    for log in rap_logs:
        for s in log.samples:
            calls = tool_calls(s)
            assert len(calls) == (0 if s.metadata["condition"] == "A0" else 2)  # tool calls in the log
    for s in citecast_logs[0].samples:
        calls = [c.function for c in tool_calls(s)]
        assert calls == ["web_search", "web_search", "submit_prediction"]
        assert s.scores["citecast_scorer"].value["valid"] == 1.0
    # the converter and rap score reproduce Inspect's per-episode Spearman
    preds = log_predictions([logs])
    assert set(preds["model"]) == {"scripted"} and preds["valid"].all() and len(preds) == 10
    scored = score_predictions(mini, preds).set_index(["condition", "field_id", "origin"])
    for log in rap_logs:
        scorer = "rap_state_scorer" if log.eval.task.endswith("rap_state") else "rap_scorer"
        for s in log.samples:
            m = s.metadata
            ours = s.scores[scorer].value["spearman"]
            theirs = scored.loc[(m["condition"], m["field_id"], m["origin"]), "spearman"]
            assert np.isclose(ours, theirs, rtol=0, atol=1e-12)
    out = tmp_path / "preds" / "scripted.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "rap_benchmark", "harness", "inspect-predictions", str(logs), "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    meta = json.loads(out.with_name(out.name + ".meta.json").read_text(encoding="utf-8"))
    assert meta["model"] == "scripted" and meta["manifest_hash"] == mini.manifest_hash
    assert meta["conditions"] == ["A0", "A1", "A2", "A3", "A4"]
