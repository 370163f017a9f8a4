"""Every ``rap`` command's ``--help`` ends with worked examples, and every example is a valid
invocation (issue 11: ``rap --help`` showed 4 examples where the README promised worked examples
for every command)."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Iterator

import pytest

from rap_benchmark.cli import build_parser


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("rap",)) -> Iterator[tuple[str, ...]]:
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def _parser_for(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path[1:]:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _examples(help_text: str) -> list[str]:
    """The ``rap ...`` lines of a help text (continuations joined, comments, redirections and
    ``-> result`` notes cut); lines with a ``...`` placeholder are left out."""
    lines = []
    for line in help_text.replace("\\\n", " ").splitlines():
        text = line.strip()
        if not text.startswith("rap ") or "..." in text:
            continue
        for cut in (" -> ", " > ", " | "):
            text = text.split(cut)[0]
        lines.append(text)
    return lines


COMMANDS = list(_commands(build_parser()))


def test_every_command_is_listed():
    names = {" ".join(c) for c in COMMANDS}
    assert {"rap run", "rap score", "rap search", "rap demo", "rap citecast serve", "rap audit truth"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_help_has_worked_examples_of_the_command(path: tuple[str, ...]):
    text = _parser_for(path).format_help()
    assert any(line.strip().lower().startswith(("examples", "example:")) for line in text.splitlines()), text
    own = [e for e in _examples(text) if e == " ".join(path) or e.startswith(" ".join(path) + " ")]
    assert own, f"{' '.join(path)} --help shows no example of {' '.join(path)}"


def test_top_level_help_shows_the_newcomer_path():
    examples = _examples(build_parser().format_help())
    shown = {shlex.split(e)[1] for e in examples}
    assert {"demo", "build", "verify", "search", "run", "score", "report"} <= shown


def test_every_example_parses():
    """Each example in any help text is accepted by the parser as written (flags, choices, values)."""
    seen: set[str] = set()
    for path in COMMANDS:
        seen.update(_examples(_parser_for(path).epilog or ""))
    assert len(seen) >= 40
    for example in sorted(seen):
        argv = shlex.split(example, comments=True)[1:]
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # pragma: no cover - the failure message names the example
            pytest.fail(f"example does not parse ({exc.code}): {example}")
        assert callable(getattr(args, "func", None)), example


def _undocumented(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[str]:
    """The options, positionals and subcommands of ``parser`` and of every command below it that
    say nothing: no help text (an alias hidden with ``argparse.SUPPRESS`` is silent on purpose), or
    a ``%(default)s`` on an option without a default ("default: None")."""
    if "(default: None)" in parser.format_help():
        yield f"{' '.join(path)}: a help text says (default: None)"
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if not (choice.help or "").strip():
                    yield f"{' '.join(path)} {choice.dest} (subcommand)"
            for name, sub in action.choices.items():
                yield from _undocumented(sub, (*path, name))
        elif action.help != argparse.SUPPRESS and not (action.help or "").strip():
            yield f"{' '.join(path)} {'/'.join(action.option_strings) or '<' + action.dest + '>'}"


def test_every_option_and_positional_says_what_it_is():
    """Regression: ``rap audit sample --help`` listed ``dir``, ``--fields FIELDS``, ``--per-cell
    PER_CELL``, ``--population POPULATION``... with no word of explanation, and about 40 options and
    positionals across ``rap`` were like that."""
    missing = list(_undocumented(build_parser(), ("rap",)))
    assert not missing, "no help text: " + "; ".join(missing)
