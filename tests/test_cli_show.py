"""``rap show``: the codebook of a field and exactly what an agent receives in one episode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rap_benchmark.agents import prompts
from rap_benchmark.cli import main


def test_show_prints_the_codebook(mini_dir: Path, mini, capsys) -> None:
    assert main(["show", str(mini_dir), "--field", "f003"]) == 0
    out = capsys.readouterr().out
    cb = mini.codebooks["f003"]
    assert out.startswith(f"f003  {cb.name}")
    for d in cb.directions:
        assert f"{d.key}. {d.name}" in out and d.exemplars[0] in out
    titles = mini.papers.set_index("arxiv_id")["title"]
    assert titles[cb.directions[0].exemplars[0]] in out  # titles looked up when not recorded


def test_show_episode_is_exactly_what_the_runner_sends(mini_dir: Path, mini, capsys) -> None:
    origin = mini.spec.origins[0]
    assert main(["show", str(mini_dir), "--field", "f003", "--origin", origin, "--condition", "A1", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    want = prompts.initial_messages(prompts.condition_prompt(mini.codebooks["f003"], origin, "A1", mini.spec))
    assert payload["messages"] == want
    (tool,) = payload["tools"]
    assert tool["function"]["name"] == "search" and payload["prompt_version"] == prompts.PROMPT_VERSION
    assert main(["show", str(mini_dir), "--field", "f003", "--origin", origin, "--condition", "A0"]) == 0
    text = capsys.readouterr().out
    assert "===== system =====" in text and "(none: closed book)" in text


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--field", "f999"], "no field 'f999'"),
        (["--field", "f003", "--origin", "2025-01-01"], "go together"),
        (["--field", "f003", "--origin", "1999-01-01", "--condition", "A1"], "not one of the instance's origins"),
        (["--field", "f003", "--origin", "2025-01-01", "--condition", "A9"], "unknown condition"),
    ],
)
def test_show_user_errors_are_one_line(mini_dir: Path, capsys, extra: list[str], message: str) -> None:
    assert main(["show", str(mini_dir), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rap show: ") and message in err and err.count("\n") == 1


def test_show_and_info_on_an_instance_without_fields_say_so(mini_dir: Path, tmp_path: Path, capsys) -> None:
    """Regression: ``rap show`` on a zero-field instance (an LLM build that kept no field) ended
    in an IndexError traceback."""
    import shutil

    import pandas as pd

    from rap_benchmark.core import schemas
    from rap_benchmark.core.artifacts import write_json, write_table
    from rap_benchmark.core.sums import SUMS_FILE, write_sums

    empty = tmp_path / "empty"
    shutil.copytree(mini_dir, empty, ignore=shutil.ignore_patterns(".cache", "truth.parquet", SUMS_FILE))
    write_json(empty / "codebooks.json", [])
    for name, schema in (
        ("assignments", schemas.ASSIGNMENTS),
        ("blocks", schemas.BLOCKS),
        ("episodes", schemas.EPISODES),
        ("search_manifest", schemas.SEARCH_MANIFEST),
    ):
        write_table(empty, name, pd.DataFrame({f.name: pd.Series([], dtype=object) for f in schema}))
    write_sums(empty)
    assert main(["show", str(empty), "--field", "f000"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no fields" in err and "Traceback" not in err
    assert main(["info", str(empty)]) == 0
    captured = capsys.readouterr()
    assert "fields             0" in captured.out and "has no fields" in captured.err
