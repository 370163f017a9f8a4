"""The ``rap`` command line, and its one error boundary.

Every module in this package that defines ``register(subparsers)`` adds its subcommands; heavy
imports live inside the command functions. :func:`main` turns a user mistake into one line,
``rap <cmd>: <message>``, and exit status 2: an argparse error (bad flag or value), any
:class:`~rap_benchmark.core.errors.UserError` the library raises (bad value, malformed file,
missing or tampered folder) and a path the operating system refuses. ``--debug`` anywhere on
the command line shows the traceback instead. Everything else is a bug and keeps its traceback.
A command that stopped part-way and kept its finished work (an endpoint that stopped answering:
:class:`~rap_benchmark.core.errors.StoppedEarly`, exit 75; Ctrl-C after a run kept its units:
:class:`~rap_benchmark.core.errors.Interrupted`, exit 130) ends its one line with the command
that resumes it.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import shlex
import sys
from typing import Any, NoReturn

from rap_benchmark.core.errors import Interrupted, StoppedEarly, UserError, one_line
from rap_benchmark.core.suggest import closest

EPILOG = """examples (each command's --help has more):
  rap demo                                      # build mini in ./rap-demo and run every step (~1 min)
  rap build --instance mini --out build/mini    # build an instance (arxiv-sample: reads ../shared/data/arxiv)
  rap verify build/mini                         # check every artifact against SHA256SUMS
  rap info build/mini                           # papers, fields, episodes, splits
  rap search build/mini --field f003 --origin 2025-01-01 "graph neural network"
  rap baselines build/mini --out preds/baselines.jsonl
  rap run build/mini --backend reference --conditions A0,A1 --out runs/ref
  rap score build/mini preds/baselines.jsonl runs/ref/predictions.jsonl
  rap report build/mini preds/baselines.jsonl --out report/   # report/report.html
  rap citecast build --instance embedded --out build/citecast

A user mistake prints one line, "rap <command>: <what is wrong>", and exits 2;
rap --debug <command> ... shows the traceback.
"""

RENAMED: dict[tuple[str, ...], tuple[str, ...]] = {
    ("export-hf",): ("hub", "export"),
    ("publish",): ("hub", "publish"),
    ("leaderboard", "export-hf"): ("hub", "export-board"),
    ("lm-eval-path",): ("harness", "lm-eval-path"),
    ("lm-eval-predictions",): ("harness", "lm-eval-predictions"),
    ("inspect-predictions",): ("harness", "inspect-predictions"),
    ("sft-export",): ("sft", "export"),
    ("sft-gate",): ("sft", "gate"),
    ("merge-runs",): ("runs", "merge"),
    ("search", "audit"): ("audit", "search"),
    ("diagnose", "trace-audit"): ("audit", "traces"),
}
"""Commands renamed in 1.1 (old words -> new words). The old names still run, with a one-line
notice on stderr, and are not listed in ``rap --help``; they go in :data:`OLD_NAMES_GO_IN`."""

OLD_NAMES_GO_IN = "1.2"

PATH_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)
"""Operating-system refusals of a path the user gave: reported like a UserError."""


class RapArgumentParser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line, ``rap <cmd>: <message>``, exit 2 (no usage block),
    and whose description and epilog (the examples) are printed as written. Every ``rap`` subcommand
    is one: ``add_subparsers`` makes children of the parent's class."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {one_line(message)} (see {self.prog} --help)\n")

    def parse_args(self, args: Any = None, namespace: Any = None) -> argparse.Namespace:  # type: ignore[override]
        """argparse's, except that words no parser took are refused by the (sub)command they were
        given to, with the option they are closest to: ``rap run: unrecognized argument
        --conditons; did you mean --conditions?`` (argparse blamed ``rap``, and suggested nothing)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            owner = self._command(getattr(parsed, "command_name", self.prog))
            owner.error(unrecognized(extras, owner))
        return parsed

    def _command(self, name: str) -> argparse.ArgumentParser:
        """The parser of the (sub)command ``name`` (``rap citecast run``), found from this one."""
        parser: argparse.ArgumentParser = self
        for word in name.split()[1:]:
            groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            if not groups or word not in groups[0].choices:
                break
            parser = groups[0].choices[word]
        return parser


def unrecognized(extras: list[str], parser: argparse.ArgumentParser) -> str:
    """What argparse could not place, each option with the closest one ``parser`` has. When an
    option is unknown, the words after it (most likely its value) are not listed as well."""
    options = [w.split("=", 1)[0] for w in extras if w.startswith("-") and w != "-"]
    known = [s for s in parser._option_string_actions if s.startswith("--")]
    close = {w: closest(w, known) for w in options}
    if len(options) == 1:
        (word,) = options
        return f"unrecognized argument {word}" + (f"; did you mean {close[word]}?" if close[word] else "")
    if options:
        said = [w + (f" (did you mean {close[w]}?)" if close[w] else "") for w in options]
        return f"unrecognized arguments {', '.join(said)}"
    return f"unrecognized argument{'s' if len(extras) > 1 else ''} {' '.join(extras)}"


def build_parser() -> argparse.ArgumentParser:
    parser = RapArgumentParser(
        prog="rap",
        description="RAP and CiteCast: research-forecasting benchmarks for LLM agents.",
        epilog=EPILOG,
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a user error")
    parser.add_argument("--version", action=_Version, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=RapArgumentParser)
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{mod.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    _name_commands(parser)
    return parser


class _Version(argparse.Action):
    """``--version``, with the line computed only when asked."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:  # noqa: A002
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_args: object) -> NoReturn:
        print(version_line())
        parser.exit(0)


def version_line() -> str:
    """``rap --version``: the package's version, then the benchmark version (what a score means)
    that new builds get, beside mini's, and CiteCast's version. A built instance keeps the version
    it was built under; ``rap info``, reports, boards and run folders name it."""
    from rap_benchmark.core.spec import BENCHMARK_VERSION, CITECAST_VERSION, MINI_VERSION, package_version

    return (
        f"rap_benchmark package {package_version()}; benchmark version {BENCHMARK_VERSION} for new builds "
        f"(mini {MINI_VERSION}; rap info DIR names a build's); CiteCast {CITECAST_VERSION}"
    )


def _name_commands(parser: argparse.ArgumentParser) -> None:
    """Every (sub)command records its full name (``rap citecast serve``) for the error line."""
    parser.set_defaults(command_name=parser.prog)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _name_commands(child)


def renamed(argv: list[str]) -> list[str]:
    """``argv`` with an old command name replaced by its new one (and a one-line notice on stderr)."""
    for old, new in RENAMED.items():
        if tuple(argv[: len(old)]) == old:
            print(
                f"rap {' '.join(old)} is now rap {' '.join(new)}; the old name goes in {OLD_NAMES_GO_IN}",
                file=sys.stderr,
            )
            return [*new, *argv[len(old) :]]
    return argv


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror}: {exc.filename}" if exc.filename else exc.strerror
    return str(exc) or type(exc).__name__


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # accepted anywhere: rap --debug run ... or rap run ... --debug
    argv = renamed([a for a in argv if a != "--debug"])
    parser = build_parser()
    args = parser.parse_args(argv)
    args.debug = debug
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    prog = args.command_name
    try:
        return int(args.func(args) or 0)
    except Interrupted as exc:  # Ctrl-C after the command kept its finished work
        _end_progress_bars()
        print(f"{prog}: interrupted; {one_line(str(exc))}; {resume(argv)}", file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (rap info DIR | head): stop quietly, as a shell tool does
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's exit-time flush must not raise again
        return 141  # 128 + SIGPIPE
    except (UserError, *PATH_ERRORS) as exc:
        if args.debug:
            raise
        _end_progress_bars()
        if isinstance(exc, StoppedEarly):
            print(f"{prog}: {one_line(_describe(exc))}; {resume(argv)}", file=sys.stderr)
            return exc.exit_status
        print(f"{prog}: {one_line(_describe(exc))}", file=sys.stderr)
        return 2


def resume(argv: list[str]) -> str:
    """The words that end a stopped command's line: the command that resumes it, as typed."""
    return f"the same command resumes: {shlex.join(['rap', *argv])}"


def _end_progress_bars() -> None:
    """Clear progress bars a user error interrupted, so the error line is not glued to a bar."""
    tqdm_module = sys.modules.get("tqdm.std")
    bars = getattr(getattr(tqdm_module, "tqdm", None), "_instances", None)
    if bars:
        for bar in list(bars):
            bar.leave = False
            bar.close()


if __name__ == "__main__":
    raise SystemExit(main())
