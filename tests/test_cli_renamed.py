"""Commands renamed into groups (``rap export-hf`` -> ``rap hub export``, ...) still run under their
old names for one minor version: the same parser, a one-line notice on stderr, and no listing in
``rap --help``."""

from __future__ import annotations

import argparse

import pytest

from rap_benchmark.cli import OLD_NAMES_GO_IN, RENAMED, build_parser, main, renamed

# argv after the command words: a valid call of each command (argparse needs its required args)
TAILS = {
    ("export-hf",): ["build/mini", "--out", "hub/"],
    ("publish",): ["hub/", "--org", "rap", "--tag", "v1.0.0"],
    ("leaderboard", "export-hf"): ["board/", "--out", "hub/"],
    ("lm-eval-path",): [],
    ("lm-eval-predictions",): ["out/", "--out", "p.jsonl"],
    ("inspect-predictions",): ["logs/", "--out", "p.jsonl"],
    ("sft-export",): ["build/mini", "runs/t", "--out", "s.jsonl"],
    ("sft-gate",): ["build/mini", "runs/a", "runs/b"],
    ("merge-runs",): ["runs/m", "runs/s0"],
    ("search", "audit"): ["build/mini", "calls.jsonl"],
    ("diagnose", "trace-audit"): ["build/mini", "runs/r", "--out", "t.csv"],
}


def test_every_old_name_has_a_call():
    assert set(TAILS) == set(RENAMED)


@pytest.mark.parametrize("old", list(RENAMED), ids=[" ".join(o) for o in RENAMED])
def test_old_name_parses_as_the_new_one_with_a_notice(old, capsys):
    new = RENAMED[old]
    argv = renamed([*old, *TAILS[old]])
    assert argv == [*new, *TAILS[old]]
    err = capsys.readouterr().err
    assert err == f"rap {' '.join(old)} is now rap {' '.join(new)}; the old name goes in {OLD_NAMES_GO_IN}\n"
    old_args = build_parser().parse_args(argv)
    new_args = build_parser().parse_args([*new, *TAILS[old]])
    assert old_args.func is new_args.func
    assert old_args.command_name == "rap " + " ".join(new)


def test_old_names_are_not_listed():
    parser = build_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    help_text = parser.format_help()
    for old in RENAMED:
        if len(old) == 1:
            assert old[0] not in top.choices
            assert f"    {old[0]} " not in help_text
    for new in RENAMED.values():
        assert new[0] in top.choices


def test_old_name_runs_end_to_end(capsys):
    """``rap lm-eval-path`` still prints the task folder, after the one-line notice."""
    assert main(["lm-eval-path"]) == 0
    out = capsys.readouterr()
    assert out.err == f"rap lm-eval-path is now rap harness lm-eval-path; the old name goes in {OLD_NAMES_GO_IN}\n"
    assert main(["harness", "lm-eval-path"]) == 0
    assert capsys.readouterr().out == out.out


def test_new_names_print_no_notice(capsys):
    assert main(["harness", "lm-eval-path"]) == 0
    assert capsys.readouterr().err == ""
