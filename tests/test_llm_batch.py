"""Batch files as the LLM instrument's transport, and the compact construction.

Round trips through the three producers' line shapes (``vllm run-batch``: input order, failures
inline; OpenAI: shuffled, a separate error file; Anthropic Message Batches results), written by
the scripted server's batch runner from the same replies the HTTP path gets: the store and the
construction's output are the HTTP path's, byte for byte. Bad output files stop the build in one
line before anything is stored. The stock CLI runs two rounds end to end and builds the HTTP
build's instance."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from test_llm_instrument import CONFIG, SPEC, corpus, fingerprint

from rap_benchmark.core.errors import FileFormatError, InputError
from rap_benchmark.pipeline.instrument.llm import LLMSettings, PipelineConfig, RequestRefused, run_llm_instrument
from rap_benchmark.pipeline.instrument.llm.batch import STATE_FILE, WAITING_EXIT, BatchFolder, WaitingForReplies
from rap_benchmark.testing.batch_runner import FORMATS, run_batch
from rap_benchmark.testing.scripted_server import Faults, ScriptedApp, ServerThread

COMPACT = PipelineConfig(
    model="scripted-main",
    draft_models=("scripted-a", "scripted-b"),
    construction="compact",
    compact_papers=20,
    label_papers=10,
    label_batch=5,
)


def records(store: Path) -> list[bytes]:
    return sorted((store / "requests.jsonl").read_bytes().splitlines())


def http(tmp: Path, config: PipelineConfig, mode: str = "plain") -> tuple[Any, list[bytes]]:
    papers, memberships, candidates = corpus()
    with ServerThread(ScriptedApp(mode=mode)) as srv:
        result, _ = run_llm_instrument(
            papers, memberships, candidates, SPEC, config, LLMSettings((srv.url,), tmp, timeout_s=5.0)
        )
    return result, records(tmp)


def batch(
    tmp: Path, config: PipelineConfig, fmt: str, app: ScriptedApp | None = None, rounds: int = 30
) -> tuple[Any, list[bytes], list[str]]:
    """Run the construction over batch files to the end, the scripted runner answering each round
    in ``fmt``; (result, store lines, the waiting messages)."""
    papers, memberships, candidates = corpus()
    app = app or ScriptedApp()
    folder, said = tmp / "batch", []
    for _ in range(rounds):
        try:
            result, _ = run_llm_instrument(
                papers, memberships, candidates, SPEC, config, LLMSettings((), tmp / "store", batch_dir=folder)
            )
            return result, records(tmp / "store"), said
        except WaitingForReplies as waiting:
            said.append(str(waiting))
            n = len(json.loads((folder / STATE_FILE).read_text())["rounds"])
            run_batch(app, folder / f"round-{n:03d}.input.jsonl", folder / f"round-{n:03d}.output.jsonl", fmt, seed=n)
    raise AssertionError(f"no end after {rounds} rounds")


@pytest.mark.parametrize("fmt", FORMATS)
def test_compact_over_batch_files_is_the_http_build(tmp_path: Path, fmt: str) -> None:
    result, store = http(tmp_path / "http", COMPACT)
    result2, store2, said = batch(tmp_path / "b", COMPACT, fmt)
    assert fingerprint(result2) == fingerprint(result) and store2 == store
    assert len(said) == 2  # drafts, then the labels of more papers against each frozen draft
    assert all("\n" not in s and s.startswith(f"round {i + 1}: wrote") for i, s in enumerate(said))
    assert "vllm run-batch -i FILE" in said[0] and "rerun this command" in said[0]


def test_paper_construction_over_batch_files_is_the_http_build(tmp_path: Path) -> None:
    result, store = http(tmp_path / "http", CONFIG)
    result2, store2, said = batch(tmp_path / "b", CONFIG, "vllm")
    assert fingerprint(result2) == fingerprint(result) and store2 == store
    assert len(said) == 10  # names, merge, renames, programs, dedupe, drafts, absorb, revise, consolidate, assign


@pytest.mark.parametrize(
    ("config", "mode", "rounds"),
    [(COMPACT, "chatty", 2), (COMPACT, "renamed-keys", 4), (CONFIG, "think-parser", 12)],
    ids=["compact-chatty", "compact-renamed-keys", "paper-think-parser"],
)
def test_reply_styles_read_alike_over_http_and_batch(
    tmp_path: Path, config: PipelineConfig, mode: str, rounds: int
) -> None:
    """A reply style (fences; a renamed key, fixed on the retry that names it; reasoning behind a
    parser, which cuts the naming replies at their budget, asked again with a wider one) gives the
    same store either way: each re-ask is a request of the next round."""
    result, store = http(tmp_path / "http", config, mode)
    result2, store2, said = batch(tmp_path / "b", config, "anthropic", ScriptedApp(mode=mode))
    assert fingerprint(result2) == fingerprint(result) and store2 == store
    assert len(said) == rounds


def test_failed_lines_are_asked_again_and_nothing_answered_is(tmp_path: Path) -> None:
    """Failed lines (HTTP 503 inline from vLLM) become requests of the next round; an answered
    request never appears in a later round's file."""
    flaky = ScriptedApp(Faults(error_rate=0.3, seed=3))
    result, _, said = batch(tmp_path, COMPACT, "vllm", flaky)
    clean, _ = http(tmp_path / "http", COMPACT)
    assert fingerprint(result) == fingerprint(clean) and len(said) > 2
    seen: set[str] = set()
    answered: set[str] = set()
    for path in sorted((tmp_path / "batch").glob("round-*.input.jsonl")):
        keys = {orjson.loads(line)["custom_id"] for line in path.read_bytes().splitlines()}
        assert not keys & answered, f"{path.name} asks again for an answered request"
        seen |= keys
        out = path.with_name(path.name.replace(".input.", ".output."))
        for line in out.read_bytes().splitlines():
            row = orjson.loads(line)
            if row["error"] is None:
                answered.add(row["custom_id"])
    assert answered == seen


def test_a_refused_line_stops_the_build_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(RequestRefused) as err:
        batch(tmp_path, COMPACT, "vllm", ScriptedApp(mode="refuse"))
    assert "\n" not in str(err.value) and "maximum context length" in str(err.value)
    assert "round-001.output.jsonl:1" in str(err.value)


def _first_round(tmp: Path) -> Path:
    papers, memberships, candidates = corpus()
    with pytest.raises(WaitingForReplies):
        run_llm_instrument(
            papers, memberships, candidates, SPEC, COMPACT, LLMSettings((), tmp / "store", batch_dir=tmp / "batch")
        )
    return tmp / "batch"


def _rerun(tmp: Path) -> None:
    papers, memberships, candidates = corpus()
    run_llm_instrument(
        papers, memberships, candidates, SPEC, COMPACT, LLMSettings((), tmp / "store", batch_dir=tmp / "batch")
    )


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _write(path: Path, rows: list[dict[str, Any]], tail: bytes = b"") -> None:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows) + tail)


@pytest.mark.parametrize(
    ("damage", "error", "words"),
    [
        ("unknown", FileFormatError, "is no request written to"),
        ("duplicate", FileFormatError, "is answered twice"),
        ("torn", FileFormatError, "the last line is cut short"),
        ("other-build", InputError, "is the output of another build"),
        ("other-model", FileFormatError, "but the request asked for 'scripted-a'"),
        ("shape", FileFormatError, "neither an OpenAI/vLLM output line nor an Anthropic result"),
    ],
)
def test_bad_output_files_stop_the_build_in_one_line_before_anything_is_stored(
    tmp_path: Path, damage: str, error: type, words: str
) -> None:
    folder = _first_round(tmp_path)
    out = folder / "round-001.output.jsonl"
    run_batch(ScriptedApp(), folder / "round-001.input.jsonl", out, "vllm")
    rows = _lines(out)
    if damage == "unknown":
        rows[3]["custom_id"] = "0" * 64
        _write(out, rows)
    elif damage == "duplicate":
        _write(folder / "again.jsonl", rows[:1])
    elif damage == "torn":
        _write(out, rows[:-1], orjson.dumps(rows[-1])[:-40])
    elif damage == "other-build":
        for r in rows:
            r["custom_id"] = r["custom_id"][::-1]
        out.unlink()
        _write(folder / "someone-else.jsonl", rows)
    elif damage == "other-model":
        for r in rows:
            r["response"]["body"]["model"] = "another-model"
        _write(out, rows)
    elif damage == "shape":
        _write(out, [{"custom_id": rows[0]["custom_id"], "answer": "?"}, *rows[1:]])
    with pytest.raises(error) as err:
        _rerun(tmp_path)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "store" / "requests.jsonl").read_bytes()  # nothing half-written


def test_a_snapshot_of_the_asked_model_is_the_same_model() -> None:
    from rap_benchmark.pipeline.instrument.llm.batch import same_model

    assert same_model("gpt-4o", "gpt-4o-2024-08-06") and same_model("claude-sonnet-4-5", "claude-sonnet-4-5-20250929")
    assert not same_model("gpt-4o", "gpt-4o-mini") and not same_model("scripted-a", "scripted-b")


def test_a_folder_of_another_build_is_refused(tmp_path: Path) -> None:
    folder = _first_round(tmp_path)
    with pytest.raises(InputError, match="another build"):
        BatchFolder.open(folder, "f" * 64)


def test_rap_build_batch_two_rounds_end_to_end_builds_the_http_instance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The stock CLI: ``rap build --batch DIR`` exits 75 with one line per round, the output file
    goes into DIR (vLLM's, then OpenAI's), the rerun builds an instance whose SHA256SUMS is the
    HTTP build's; ``--dry-run`` states the rounds."""
    from arxiv_snapshot import write_snapshot

    from rap_benchmark.cli import main as rap
    from rap_benchmark.core.spec import BenchmarkSpec

    snap = tmp_path / "snapshot.jsonl"
    write_snapshot(snap, scale=0.002, seed=1, n_fields=3)
    spec = tmp_path / "spec.json"
    data = BenchmarkSpec().replace(name="tiny", n_fields=3, min_field_papers=40, n_dev_seed_fields=1).to_dict()
    spec.write_text(json.dumps(data))
    common = ["build", "--spec", str(spec), "--source", str(snap), "--quiet", "--instrument", "llm",
              "--construction", "compact", "--model", "scripted-main"]  # fmt: skip
    with ServerThread(ScriptedApp()) as srv:
        assert rap([*common, "--out", str(tmp_path / "http"), "--base-url", srv.url]) == 0
    capsys.readouterr()
    assert rap([*common, "--out", str(tmp_path / "dry"), "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert "rounds: 2" in dry, dry
    folder = tmp_path / "batch"
    argv = [*common, "--out", str(tmp_path / "b"), "--batch", str(folder)]
    for n, fmt in ((1, "vllm"), (2, "openai")):
        assert rap(argv) == WAITING_EXIT
        said = capsys.readouterr().out
        assert said.startswith(f"rap build: round {n}: wrote") and said.count("\n") == 1, said
        run_batch(ScriptedApp(), folder / f"round-{n:03d}.input.jsonl", folder / f"out-{n}.jsonl", fmt)
    assert rap(argv) == 0
    assert (tmp_path / "b" / "SHA256SUMS").read_bytes() == (tmp_path / "http" / "SHA256SUMS").read_bytes()
    from rap_benchmark.core.artifacts import load_instance

    inst = load_instance(tmp_path / "b")  # every table checked against its schema
    labels = inst.extras["model_labels"]
    assert set(labels["draft"]) == {"A", "B"} and set(inst.extras["parallel"]["slot"]) <= set(range(8))
    shared = labels.loc[labels["draft"] == "B", "arxiv_id"].isin(labels.loc[labels["draft"] == "A", "arxiv_id"])
    assert shared.sum() >= 10  # draft B's model also labelled the papers drawn for draft A


def test_the_compact_instrument_freezes_and_labels_papers_as_the_build_did(tmp_path: Path) -> None:
    """``rap build --construction compact --freeze-instrument`` writes an instrument (the field rule
    regrouped to the kept fields, the distilled labeller, its calibration) that gives every paper
    the build's memberships and labels: what ``rap extend`` labels new papers with."""
    from arxiv_snapshot import write_snapshot

    from rap_benchmark.cli import main as rap
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.spec import BenchmarkSpec
    from rap_benchmark.pipeline.instrument.frozen import load

    snap = tmp_path / "snapshot.jsonl"
    write_snapshot(snap, scale=0.002, seed=1, n_fields=3)
    spec = tmp_path / "spec.json"
    data = BenchmarkSpec().replace(name="tiny", n_fields=3, min_field_papers=40, n_dev_seed_fields=1).to_dict()
    spec.write_text(json.dumps(data))
    with ServerThread(ScriptedApp()) as srv:
        argv = ["build", "--spec", str(spec), "--source", str(snap), "--quiet", "--instrument", "llm",
                "--construction", "compact", "--model", "scripted-main", "--out", str(tmp_path / "b"),
                "--base-url", srv.url, "--freeze-instrument"]  # fmt: skip
        assert rap(argv) == 0
    inst = load_instance(tmp_path / "b")
    labelled = load(tmp_path / "b").label(inst.papers)
    columns = ["arxiv_id", "field_id", "primary", "secondary", "type"]
    same = labelled[columns].fillna("-").to_numpy() == inst.assignments[columns].fillna("-").to_numpy()
    assert len(labelled) == len(inst.assignments) and same.all()
