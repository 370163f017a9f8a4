"""Argument parsers shared by the ``rap`` commands: each refuses a bad value with a message that
names the flag, the value and what was expected (argparse turns it into ``rap <cmd>: ...``, exit 2)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

from rap_benchmark.core.errors import ArtifactError, InputError
from rap_benchmark.core.records import Split, parse_enum

E = TypeVar("E", bound=Enum)


def csv(text: str | None) -> list[str] | None:
    """``"a, b,,c"`` -> ``["a", "b", "c"]``; empty or None -> None (meaning: all)."""
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def enum_list(cls: type[E], text: str | None, flag: str) -> list[E]:
    """Comma-separated enum values (e.g. ``--conditions A0,A3``); none, or an unknown one, is refused by name."""
    values = csv(text)
    if not values:
        raise InputError(f"{flag}: give at least one of {', '.join(str(m.value) for m in cls)}")
    return [parse_enum(cls, v, what=f"{flag} value") for v in values]


def split_or_all(value: str) -> Split | None:
    """``--split test|dev|all``: the split, or None for every episode."""
    return None if value == "all" else parse_enum(Split, value)


def _number(kind: Callable[[str], float], low: float, inclusive: bool, what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if value != value or value < low or (value == low and not inclusive) or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    parse.__name__ = what  # argparse names the type in its messages
    return parse


positive_int = _number(int, 1, True, "a positive integer")
nonnegative_int = _number(int, 0, True, "an integer >= 0")
positive_float = _number(float, 0.0, False, "a number > 0")
nonnegative_float = _number(float, 0.0, True, "a number >= 0")


def tcp_port(text: str) -> int:
    """A TCP port: 0 (any free one) to 65535."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return value


def scoring_options(p: argparse.ArgumentParser) -> None:
    """``--split``, ``--resamples`` and ``--seed`` of rap score, rap report and rap leaderboard score."""
    p.add_argument("--split", choices=("test", "dev", "all"), default="test", help="episodes to score (default test)")
    p.add_argument("--resamples", type=positive_int, default=None, help="bootstrap resamples (default: the spec's)")
    p.add_argument("--seed", type=nonnegative_int, default=None, help="bootstrap seed (default: the spec's)")


def json_object(flag: str, text: str | None) -> dict[str, Any]:
    """The JSON object given to ``flag`` (``{}`` when none); anything else is refused by name."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{flag}: not JSON ({exc.msg} at column {exc.colno}): {text[:80]!r}") from None
    if not isinstance(value, dict):
        raise InputError(f"{flag}: expected a JSON object, got {type(value).__name__}")
    return value


def add_extra_body_args(p: Any, for_whom: str = "") -> None:
    """``--chat-template-kwargs`` and ``--extra-body`` (``rap build --instrument llm``, ``rap run``)."""
    p.add_argument(
        "--chat-template-kwargs",
        metavar="JSON",
        help=for_whom
        + "sent with every request, e.g. '{\"enable_thinking\": false}' to turn a Qwen3 model's thinking off",
    )
    p.add_argument(
        "--extra-body", metavar="JSON", help=for_whom + "further keys sent with every request (vLLM sampling options)"
    )


def extra_body(args: argparse.Namespace, setter: str) -> dict[str, Any]:
    """The keys sent with every request: --extra-body, and --chat-template-kwargs as its
    ``chat_template_kwargs`` (vLLM passes them to the model's chat template). A key that
    ``setter`` sets itself (the model, the messages, the budget...) is refused."""
    from rap_benchmark.llmclient.endpoints import check_extra_body

    extra = json_object("--extra-body", args.extra_body)
    kwargs = json_object("--chat-template-kwargs", args.chat_template_kwargs)
    if kwargs:
        if "chat_template_kwargs" in extra:
            raise InputError("give chat_template_kwargs once: --chat-template-kwargs or inside --extra-body")
        extra["chat_template_kwargs"] = kwargs
    check_extra_body(extra, setter)
    return extra


def existing_files(paths: Sequence[str | Path], what: str = "file") -> list[Path]:
    """The paths, each checked to be an existing file (a typo is refused before anything is written)."""
    out = [Path(p) for p in paths]
    missing = [str(p) for p in out if not p.is_file()]
    if missing:
        raise InputError(f"no such {what}: {', '.join(missing)}")
    return out


def prediction_files(paths: Sequence[str | Path]) -> list[Path]:
    """:func:`existing_files` for prediction files: a missing one is refused with where it most
    likely is (``did you mean runs/x/predictions.jsonl?``) or what writes one."""
    out = [Path(p) for p in paths]
    missing = [p for p in out if not p.is_file()]
    if missing:
        from rap_benchmark.evaluation.predictions.missing import not_a_prediction_file

        raise InputError("; ".join(not_a_prediction_file(p) for p in missing))
    return out


def run_folder(path: str | Path) -> Path:
    """A run folder written by ``rap run`` (it holds ``run.json``)."""
    from rap_benchmark.agents.store import RUN_FILE

    root = Path(path)
    if not (root / RUN_FILE).is_file():
        raise ArtifactError(f"{root} is not a run folder (no {RUN_FILE}; rap run --out writes one)")
    return root


def subcommands(
    group: argparse.ArgumentParser, dest: str, metavar: str = "ACTION", *, required: bool = True
) -> Callable[..., argparse.ArgumentParser]:
    """The subcommand adder of a command group (``add(name, help=..., ...)``): each subcommand's
    --help ends with the group's examples (its epilog) unless it is given its own."""
    action = group.add_subparsers(dest=dest, metavar=metavar, required=required)
    return lambda name, **kwargs: action.add_parser(name, **{"epilog": group.epilog, **kwargs})
