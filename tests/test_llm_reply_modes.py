"""Every stage of the LLM instrument against the reply styles of served models (the scripted
server's modes): fenced, chatty, Qwen3 thinking with and without vLLM's reasoning parser, cut at
the budget, renamed keys, HTTP 400. Either the result is the plain replies' result, or the run
stops with one line naming what went wrong."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_llm_instrument import CONFIG, fingerprint, run

from rap_benchmark.pipeline.instrument.llm import RequestRefused, StageFailed
from rap_benchmark.pipeline.instrument.llm.prompts import Stage
from rap_benchmark.testing.scripted_server import MODES, ScriptedApp, ServerThread

ALL_STAGES = {str(s) for s in Stage} - {str(Stage.COMPACT_DRAFT)}  # the paper construction's stages
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> str:
    with ServerThread(ScriptedApp(mode="plain")) as srv:
        result, _ = run(tmp_path_factory.mktemp("plain"), (srv.url,))
    return fingerprint(result)


def summary(store: Path) -> dict[str, Any]:
    return json.loads((store / "summary.json").read_text())


def records(store: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (store / "requests.jsonl").read_bytes().splitlines()]


@pytest.mark.parametrize(
    ("mode", "extra"),
    [("chatty", {}), ("think", {}), ("think-parser", {}), ("renamed-keys", {}), ("think", NO_THINKING)],
)
def test_every_stage_reads_the_mode_to_the_plain_result(
    tmp_path: Path, plain: str, mode: str, extra: dict[str, Any]
) -> None:
    config = CONFIG.__class__(**{**CONFIG.__dict__, "extra_body": extra})
    with ServerThread(ScriptedApp(mode=mode)) as srv:
        result, _ = run(tmp_path, (srv.url,), config=config)
    assert fingerprint(result) == plain
    stages = summary(tmp_path)["stages"]
    assert set(stages) == ALL_STAGES and all(v["requests"] > 0 for v in stages.values())
    thinking = mode.startswith("think") and not extra
    truncated = {k for k, v in stages.items() if v["truncated"]}
    # the smallest budget (naming, 200 tokens) cannot hold 260 tokens of reasoning; 8 labels' (580) can
    assert truncated == ({"field_name"} if thinking else set())
    retried = {k for k, v in stages.items() if v["retries"]}
    renamed = {"field_name", "programs", "draft", "absorb", "revise", "assign"}  # each reply with a renamed key
    assert retried == (truncated if thinking else renamed if mode == "renamed-keys" else set())
    recs = records(tmp_path)
    with_reasoning = [r for r in recs if r.get("reasoning")]
    assert bool(with_reasoning) == thinking
    assert all("<think>" not in (r["content"] or "") for r in recs)  # the answer is stored without it
    if extra:
        assert all(r.get("finish_reason") == "stop" for r in recs)


@pytest.mark.parametrize(
    ("mode", "extra"), [("chatty", {}), ("think", NO_THINKING), ("think-parser", {}), ("renamed-keys", {})]
)
def test_the_compact_construction_reads_every_mode_to_the_plain_result(
    tmp_path: Path, mode: str, extra: dict[str, Any]
) -> None:
    """The compact construction's validators hold every reply style to the same rules: a
    readable reply gives the plain replies' codebooks and labels; the renamed key is fixed by the
    retry that names it."""
    from test_llm_batch import COMPACT

    config = COMPACT.__class__(**{**COMPACT.__dict__, "extra_body": extra})
    with ServerThread(ScriptedApp()) as srv:
        plain_result, _ = run(tmp_path / "plain", (srv.url,), config=COMPACT)
    with ServerThread(ScriptedApp(mode=mode)) as srv:
        result, _ = run(tmp_path / mode, (srv.url,), config=config)
    assert fingerprint(result) == fingerprint(plain_result)
    stages = summary(tmp_path / mode)["stages"]
    assert set(stages) == {"compact_draft", "assign"}
    retried = {k for k, v in stages.items() if v["retries"]}
    cut = {k for k, v in stages.items() if v["truncated"]}
    assert retried == ({"compact_draft", "assign"} if mode == "renamed-keys" else cut)
    assert cut <= ({"assign"} if mode == "think-parser" else set())  # a short labels request can be cut: asked wider


@pytest.mark.parametrize(("mode", "error", "words"), [("truncated", StageFailed, "stage compact_draft lost"),
                                                      ("refuse", RequestRefused, "HTTP 400")])  # fmt: skip
def test_the_compact_construction_stops_in_one_line_on_cut_or_refused_replies(
    tmp_path: Path, mode: str, error: type, words: str
) -> None:
    from test_llm_batch import COMPACT

    with ServerThread(ScriptedApp(mode=mode)) as srv:
        with pytest.raises(error) as err:
            run(tmp_path, (srv.url,), config=COMPACT)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_retry_names_the_renamed_key_so_the_model_can_fix_it(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []
    app = ScriptedApp(mode="renamed-keys")
    original = app.reply_for

    def reply_for(body: bytes, *path: str) -> Any:
        seen.append(orjson.loads(body))
        return original(body, *path)

    app.reply_for = reply_for  # type: ignore[method-assign]
    with ServerThread(app) as srv:
        run(tmp_path, (srv.url,))
    retries = [b["messages"][-1]["content"] for b in seen if len(b["messages"]) == 3]
    labels = [m for m in retries if "labelling only" in m]
    assert labels and all(m.count("unexpected key 'arxiv_id'") == 1 for m in labels)
    assert all("not labelled" not in m for m in labels)  # one fault named once, not one line per paper


def test_replies_always_cut_at_the_budget_stop_at_the_first_stage(tmp_path: Path) -> None:
    with ServerThread(ScriptedApp(mode="truncated")) as srv:
        with pytest.raises(StageFailed) as err:
            run(tmp_path, (srv.url,))
    message = str(err.value)
    assert "\n" not in message and message.startswith("LLM instrument: stage field_name lost 3 of 3 units")
    assert "enable_thinking" in message  # the cut replies were reasoning: the fix is named
    stages = summary(tmp_path)["stages"]
    assert set(stages) == {"field_name"} and stages["field_name"]["truncated"] == 6  # each asked twice
    review = (tmp_path / "review.md").read_text()
    assert "stopped: after stage field_name" in review and "| field_name | 6 | 3 | 6 | 0 | 3 of 3 |" in review


def test_a_refused_request_stops_the_run_unless_the_offline_fallback_is_asked_for(tmp_path: Path) -> None:
    with ServerThread(ScriptedApp(mode="refuse")) as srv:
        with pytest.raises(RequestRefused) as err:
            run(tmp_path / "strict", (srv.url,))
        message = str(err.value)
        assert "\n" not in message and "HTTP 400" in message and "maximum context length" in message
        assert "--fallback offline" in message
        with pytest.raises(StageFailed, match="no field kept"):
            run(tmp_path / "fallback", (srv.url,), fallback="offline")
    stages = summary(tmp_path / "fallback")["stages"]
    assert stages["field_name"]["refused"] == 3 and summary(tmp_path / "fallback")["refused_requests"] > 3


def test_every_mode_is_tested() -> None:
    tested = {"plain", "chatty", "think", "think-parser", "renamed-keys", "truncated", "refuse"}
    assert tested == set(MODES)


def test_nothing_in_the_package_imports_the_testing_modules() -> None:
    package = Path(__file__).resolve().parents[1] / "rap_benchmark"
    offenders = []
    for path in sorted(package.rglob("*.py")):
        if "testing" in path.relative_to(package).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                if any(n.startswith("rap_benchmark.testing") for n in names):
                    offenders.append(str(path.relative_to(package)))
    assert not offenders


def test_rap_build_in_each_failing_mode_exits_in_one_line_and_writes_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stock CLI on a tiny synthetic snapshot: a thinking model behind vLLM's reasoning
    parser gives the plain replies' artifacts byte for byte; a server that refuses (HTTP 400) or
    cuts every reply makes ``rap build`` exit 2 in one line naming the cause, with no folder."""
    from arxiv_snapshot import write_snapshot

    from rap_benchmark.cli import main as rap
    from rap_benchmark.core.spec import BenchmarkSpec

    snap = tmp_path / "snapshot.jsonl"
    write_snapshot(snap, scale=0.002, seed=1, n_fields=3)
    spec = tmp_path / "spec.json"
    data = BenchmarkSpec().replace(name="tiny", n_fields=3, min_field_papers=40, n_dev_seed_fields=1).to_dict()
    spec.write_text(json.dumps(data))

    def build(mode: str, *extra: str) -> tuple[int, str, Path]:
        out = tmp_path / mode
        with ServerThread(ScriptedApp(mode=mode)) as srv:
            args = ["build", "--spec", str(spec), "--source", str(snap), "--out", str(out), "--quiet",
                    "--instrument", "llm", "--base-url", srv.url, "--model", "scripted-main", *extra]  # fmt: skip
            code = rap(args)
        return code, capsys.readouterr().err, out

    code, _, plain = build("plain")
    assert code == 0
    code, _, parsed = build("think-parser")
    assert code == 0 and (parsed / "SHA256SUMS").read_bytes() == (plain / "SHA256SUMS").read_bytes()
    assert json.loads((tmp_path / "think-parser.llm-store" / "summary.json").read_text())["truncated_replies"] > 0
    for mode, words in (("refuse", "HTTP 400"), ("truncated", "stage field_name lost")):
        code, err, out = build(mode)
        assert code == 2 and err.count("\n") == 1 and err.startswith("rap build: ") and words in err, err
        assert "Traceback" not in err and not out.exists()


def test_prompts_carry_phrases_categories_merged_names_and_whole_counts(tmp_path: Path) -> None:
    """Prompt set 2 (and 3): naming shows several distinctive phrases and the spec's categories; a merged
    field is named again from its members' names; the dedupe reply names each merged program;
    the revision counts every paper the draft placed, its sample and the absorbed; ``not_in_field``
    memberships are left out and counted, apart from ``other``."""
    from rap_benchmark.pipeline.instrument.llm.prompts import programs_in, task_of
    from rap_benchmark.pipeline.instrument.llm.standin import respond

    prompts: dict[str, list[str]] = {}
    out_of_field = "2301.00003"

    def script(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        task = str(task_of(prompt))
        prompts.setdefault(task, []).append(prompt)
        reply = orjson.loads(respond(messages, typical=False))
        if task == "programs_dedupe":
            (first, _), (second, _) = programs_in(prompt)[:2]
            reply = {"groups": [{"ids": [first, second], "name": "Merged program name", "description": "Both."}]}
        if task == "field_name" and "It merges candidate fields" in prompt:
            reply["name"] = "Streaming speech recognition research"
        if task == "assign":
            for label in reply["labels"]:
                if label["id"] == out_of_field:
                    label.update(primary="other", secondary=None, type="not_in_field")
        return orjson.dumps(reply).decode()

    with ServerThread(ScriptedApp(script=script)) as srv:
        result, entry = run(tmp_path, (srv.url,))
    naming = [p for p in prompts["field_name"] if "It merges" not in p]
    assert len(naming) == 3 and all("arXiv papers in cs.CL, cs.LG, cs.AI and cs.CV" in p for p in naming)
    terms = [p.split("most distinctive first: ", 1)[1].split(".\n", 1)[0] for p in naming]
    assert all(len(t.split("; ")) >= 3 for t in terms), terms  # several phrases, not one generic term
    (merge,) = [p for p in prompts["field_name"] if "It merges" in p]
    assert merge.count('"') >= 4  # both members' names quoted
    assert result.codebooks[1].name == "Streaming speech recognition research"  # renamed, not the lead's name
    assert any(p.name == "Merged program name" for r in result.reports for p in r.programs)
    revise = prompts["revise"][0]
    counts = [int(x) for x in re.findall(r" Papers: (\d+)$", revise, re.MULTILINE)]
    unplaced = int(revise.split("Papers that no direction holds (", 1)[1].split(" ", 1)[0])
    assert counts and sum(counts) + unplaced == 12 + 16  # the draft's sample and the absorbed papers
    assert entry["not_in_field"] == 1 and result.not_in_field == [{"field_id": "f000", "arxiv_id": out_of_field}]
    assert out_of_field not in set(result.assignments.loc[result.assignments["field_id"] == "f000", "arxiv_id"])
    assert entry["prompt_version"] == 3
    assert "judged not in the field and left out: 1" in (tmp_path / "review.md").read_text()


def test_the_one_client_serves_two_event_loops_in_turn() -> None:
    """``rap run`` and the instrument each run their own ``asyncio.run``; a pool closed after one
    makes fresh clients (and its slot condition) in the next."""
    import asyncio

    from rap_benchmark.llmclient.endpoints import EndpointPool, call_with_failover

    kwargs = {"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 20}

    async def once(pool: EndpointPool) -> str:
        response, _ = await call_with_failover(pool, kwargs, max_attempts=1, backoff=lambda n: 0.0)
        await pool.aclose()
        return response.choices[0].finish_reason

    with ServerThread(ScriptedApp()) as srv:
        pool = EndpointPool(srv.url, timeout_s=10.0)
        assert [asyncio.run(once(pool)) for _ in range(2)] == ["stop", "stop"]
