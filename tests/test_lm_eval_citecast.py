"""The lm-eval ``citecast`` task: the text tool protocol, and an end-to-end ``simple_evaluate`` with
a scripted model that searches, fetches and submits through the in-process environment. Rewards
are checked against the CiteCast reward of the server-side targets, read independently."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

lm_eval = pytest.importorskip("lm_eval")
from lm_eval.api.model import LM  # noqa: E402

from rap_benchmark.agents.citecast import CITECAST_TEXT_PROTOCOL, force_submit  # noqa: E402
from rap_benchmark.citecast.env import SessionClosed  # noqa: E402
from rap_benchmark.citecast.instance import load_instance  # noqa: E402
from rap_benchmark.citecast.reward import reward  # noqa: E402
from rap_benchmark.citecast.tools import BackdatedWeb  # noqa: E402
from rap_benchmark.core.sums import verify  # noqa: E402
from rap_benchmark.integrations.lmeval import harness  # noqa: E402
from rap_benchmark.integrations.lmeval.samples import unit_record  # noqa: E402
from rap_benchmark.tools import parse_integer  # noqa: E402

TEXT_STOPS = CITECAST_TEXT_PROTOCOL.tool_turn_stops
restore_text_stop = CITECAST_TEXT_PROTOCOL.restore_stop
parse_text_action = CITECAST_TEXT_PROTOCOL.parse

REPO = Path(__file__).resolve().parents[1]
LIMIT = 6
MAX_TOOL_CALLS = 3


# -- the text protocol --------------------------------------------------------------------------


def test_restore_text_stop_closes_only_an_open_tag() -> None:
    assert restore_text_stop("hmm <web_search>graph nets") == "hmm <web_search>graph nets</web_search>"
    assert restore_text_stop("<web_fetch>https://a.b/c") == "<web_fetch>https://a.b/c</web_fetch>"
    assert restore_text_stop("so <submit>12") == "so <submit>12</submit>"
    assert restore_text_stop("<submit>12</submit> done") == "<submit>12</submit> done"
    assert restore_text_stop("no tag at all") == "no tag at all"
    assert restore_text_stop("<search>rap tag</search>") == "<search>rap tag</search>"


def test_parse_text_action_takes_the_first_complete_tag() -> None:
    a = parse_text_action("Looks niche.\n<submit> 7 </submit><web_search>x</web_search>")
    assert a is not None and (a.tag, a.tool) == ("submit", "submit_prediction")
    assert a.arguments == {"prediction": 7, "justification": "Looks niche."}
    b = parse_text_action("<web_fetch>https://arxiv.org/abs/2601.00001</web_fetch>")
    assert b is not None and b.tool == "web_fetch" and b.arguments == {"url": "https://arxiv.org/abs/2601.00001"}
    assert parse_text_action("<web_search>unclosed") is None
    assert parse_text_action('{"prediction": 3}') is None
    assert set(TEXT_STOPS) == {"</web_search>", "</web_fetch>", "</submit>", "<observation>"}


@given(st.integers(min_value=0, max_value=10**12))
def test_parse_integer_reads_every_integer_spelling(n: int) -> None:
    assert parse_integer(str(n)) == n
    assert parse_integer(f" {n:,} ") == n
    assert parse_integer(f"{n}.0") == n
    assert parse_integer(f"-{n}") == -n


@pytest.mark.parametrize("body", ["", "about 12", "12.5", "1e3", "twelve", "1,23", "12 citations", "nan"])
def test_parse_integer_refuses_non_integers(body: str) -> None:
    assert parse_integer(body) is None


# -- the task folder --------------------------------------------------------------------------


def test_citecast_is_generated_into_the_task_folder() -> None:
    from lm_eval.tasks._index import Kind, TaskIndex

    assert harness.CITECAST_TASK in harness.TASKS
    folder = REPO / "eval_harness_tasks"
    assert harness.is_current(folder)
    text = (folder / "citecast.yaml").read_text(encoding="utf-8")
    assert "class: !function rap_tasks.CiteCastTask" in text
    index = TaskIndex.build([folder])
    assert index["citecast"].kind is Kind.PY_TASK
    assert "citecast" not in (REPO / "eval_harness_tasks" / "rap.yaml").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def citecast_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rap_benchmark.integrations.lmeval.citecast_task import ensure_embedded

    return ensure_embedded(tmp_path_factory.mktemp("cache"))


def test_embedded_instance_is_built_once_and_found(citecast_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rap_benchmark.integrations.lmeval import citecast_task

    assert verify(citecast_dir) == []
    stamp = (citecast_dir / "SHA256SUMS").stat().st_mtime_ns
    assert citecast_task.ensure_embedded(citecast_dir.parents[1]) == citecast_dir
    assert (citecast_dir / "SHA256SUMS").stat().st_mtime_ns == stamp  # reused, not rebuilt
    monkeypatch.delenv(citecast_task.CITECAST_DIR_ENV, raising=False)
    assert citecast_task.citecast_dir({"citecast_dir": str(citecast_dir)}) == citecast_dir
    assert citecast_task.citecast_dir({"instance_dir": str(citecast_dir)}) == citecast_dir
    monkeypatch.setenv(citecast_task.CITECAST_DIR_ENV, str(citecast_dir))
    assert citecast_task.citecast_dir({"instance_dir": "somewhere/else"}) == citecast_dir
    monkeypatch.delenv(citecast_task.CITECAST_DIR_ENV)
    monkeypatch.setenv("RAP_CACHE_DIR", str(citecast_dir.parents[1]))
    assert citecast_task.citecast_dir({"instance_dir": str(citecast_dir.parent)}) == citecast_dir  # not CiteCast


# -- scripted model, end to end -----------------------------------------------------------


class ScriptedLM(LM):
    """Plays a role per arXiv id (found in the context):

    * ``normal``: searches the title, fetches the first hit, submits a number hashed from the context;
    * ``refused``: submits -3 (the environment refuses it), then 4;
    * ``invalid``: replies without a tag, then submits words (invalid: no reward);
    * ``greedy``: searches until the budget is spent, then submits 5.

    Replies end where lm-eval's stop sequences would cut them (the closing tag stripped)."""

    def __init__(self, roles: dict[str, str]) -> None:
        super().__init__()
        self.roles = roles
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
            assert set(r.args[1]["until"]) == set(TEXT_STOPS)
            out.append(self.reply(ctx))
        return out

    def reply(self, ctx: str) -> str:
        aid = re.search(r"arXiv id: (\S+)", ctx).group(1)
        title = re.search(r"Title: (.*)", ctx).group(1)
        role = self.roles[aid]
        turns = ctx.count("<|assistant|>") - 1  # replies so far (the last marker is the generation prompt)
        observations = re.findall(r"<observation>\n(.*?)\n</observation>", ctx, flags=re.DOTALL)
        if role == "greedy":
            if force_submit(MAX_TOOL_CALLS) in ctx:
                return "Out of calls. <submit>5"
            return f"<web_search>{title} part {turns}"
        if turns == 0:
            return f"First I look the paper up. <web_search>{title}"
        if role == "normal":
            if turns == 1:
                hits = json.loads(observations[0])
                return f"<web_fetch>{hits[0]['url']}" if hits else "<submit>1"
            return f"Few signals; modest uptake. <submit>{len(ctx) % 37}"
        if role == "refused":
            return "<submit>-3" if turns == 1 else "Then four. <submit>4"
        assert role == "invalid"
        return "I think it will be cited a dozen times." if turns == 1 else "<submit>a dozen"


@pytest.fixture(scope="module")
def scripted_run(citecast_dir: Path):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from rap_benchmark.integrations.lmeval.citecast_task import citecast_docs, citecast_env

    meta = {"citecast_dir": str(citecast_dir), "split": "test", "max_tool_calls": MAX_TOOL_CALLS}
    env = citecast_env(meta)
    ids = [d["task_id"] for d in citecast_docs(env, "test")][:LIMIT]
    roles = dict.fromkeys((env.tasks[t].paper.arxiv_id for t in ids), "normal")
    for tid, role in zip(ids, ["refused", "invalid", "greedy"], strict=False):
        roles[env.tasks[tid].paper.arxiv_id] = role
    lm = ScriptedLM(roles)
    tm = TaskManager(include_path=str(REPO / "eval_harness_tasks"), metadata=meta)
    res = simple_evaluate(
        model=lm,
        tasks=["citecast"],
        task_manager=tm,
        apply_chat_template=True,
        limit=LIMIT,
        log_samples=True,
        bootstrap_iters=0,
    )
    samples = json.loads(json.dumps(res["samples"]["citecast"], default=str))  # as logged on disk
    records = {s["doc"]["task_id"]: unit_record(s) for s in samples}
    return lm, res, samples, records, roles, env


def _role(rec: dict, env, roles: dict[str, str]) -> str:
    return roles[env.tasks[rec["task_id"]].paper.arxiv_id]


def test_rounds_are_batched_and_first_replies_reused(scripted_run) -> None:
    lm, _, samples, records, _, _ = scripted_run
    assert len(samples) == LIMIT
    assert len(lm.batches[0]) == LIMIT and all("<|assistant|>" not in c[:-13] for c in lm.batches[0])
    # later rounds only continue episodes: none repeats a first-turn context
    assert all(ctx.count("<|assistant|>") >= 2 for b in lm.batches[1:] for ctx in b)
    # greedy: 1 first round + MAX_TOOL_CALLS - 1 more searches + the forced submission
    assert len(lm.batches) == MAX_TOOL_CALLS + 1
    assert sum(len(b) for b in lm.batches) == sum(len(r["turns"]) for r in records.values())


def test_tool_calls_run_through_the_backdated_environment(scripted_run, citecast_dir: Path) -> None:
    _, _, _, records, roles, env = scripted_run
    inst = load_instance(citecast_dir)
    web = BackdatedWeb(inst.corpus.view(inst.cutoff))  # an independent view at the instance's cutoff
    normal = [r for r in records.values() if _role(r, env, roles) == "normal"]
    assert normal
    for rec in normal:
        title = inst.tasks[rec["task_id"]].paper.title
        assert [c["name"] for c in rec["tool_calls"]] == ["web_search", "web_fetch", "submit_prediction"]
        assert json.loads(rec["tool_calls"][0]["arguments"]) == {"query": title}
        obs = [m["content"] for m in rec["messages"] if m["role"] == "tool"]
        hits = json.loads(obs[0])
        assert hits == web.search(title)
        page = json.loads(obs[1])
        assert page == web.fetch(hits[0]["url"]) and page["crawl_date"] <= inst.cutoff.isoformat()
        assert json.loads(rec["tool_calls"][2]["arguments"])["justification"] == "Few signals; modest uptake."


def test_reward_is_the_citecast_reward_of_the_server_target(scripted_run, citecast_dir: Path) -> None:
    _, res, samples, records, roles, env = scripted_run
    targets = {t.task_id: t.target for t in load_instance(citecast_dir).tasks.values()}
    expected = []
    for s in samples:
        rec = records[s["doc"]["task_id"]]
        assert set(s["doc"]) == {"task_id", "split"}  # nothing about the target is logged
        if rec["valid"]:
            r = reward(rec["prediction"], targets[rec["task_id"]])
            assert s["reward"] == pytest.approx(r, abs=1e-15) and rec["reward"] == s["reward"]
            assert env.state(rec["session_id"])["reward"] == s["reward"]
        expected.append(s["reward"])
    out = res["results"]["citecast"]
    assert math.isclose(out["reward,none"], sum(expected) / len(expected), abs_tol=1e-12)
    assert math.isclose(out["valid,none"], (LIMIT - 1) / LIMIT, abs_tol=1e-12)
    n_calls = [records[s["doc"]["task_id"]]["n_tool_calls"] for s in samples]
    assert math.isclose(out["n_tool_calls,none"], sum(n_calls) / LIMIT, abs_tol=1e-12)


def test_a_second_submission_is_refused(scripted_run) -> None:
    _, _, _, records, _, env = scripted_run
    for rec in (r for r in records.values() if r["valid"]):
        with pytest.raises(SessionClosed):
            env.call(rec["session_id"], "submit_prediction", {"prediction": 0, "justification": "again"})
        assert env.state(rec["session_id"])["prediction"] == rec["prediction"]


def test_refused_submission_is_the_environments_and_can_be_corrected(scripted_run) -> None:
    _, _, _, records, roles, env = scripted_run
    (rec,) = [r for r in records.values() if _role(r, env, roles) == "refused"]
    submits = [c for c in rec["tool_calls"] if c["name"] == "submit_prediction"]
    assert [c["error"] is None for c in submits] == [False, True]
    assert "nonnegative" in submits[0]["error"]
    assert rec["valid"] and rec["prediction"] == 4


def test_unparseable_final_answer_scores_zero_and_is_invalid(scripted_run) -> None:
    _, _, samples, records, roles, env = scripted_run
    (rec,) = [r for r in records.values() if _role(r, env, roles) == "invalid"]
    (sample,) = [s for s in samples if s["doc"]["task_id"] == rec["task_id"]]
    assert not rec["valid"] and rec["prediction"] is None and rec["reward"] is None
    assert rec["invalid_reason"] == "invalid_answer" and "prediction must be an integer" in rec["invalid_detail"]
    assert sample["reward"] == 0.0 and sample["valid"] == 0.0
    assert sample["filtered_resps"][0] == "<submit>a dozen</submit>"
    assert env.state(rec["session_id"])["done"] is False  # nothing was submitted


def test_budget_forces_the_submission(scripted_run) -> None:
    _, _, _, records, roles, env = scripted_run
    (rec,) = [r for r in records.values() if _role(r, env, roles) == "greedy"]
    assert rec["n_tool_calls"] == MAX_TOOL_CALLS and rec["valid"] and rec["prediction"] == 5
    assert rec["events"] == [f"forced_answer after {MAX_TOOL_CALLS} calls"]
