"""The one argument checker: an agent's arguments against a tool function's typed signature.

:func:`check_arguments` refuses, with a message that names the tool and the problem, arguments
that are not a JSON object, unknown or missing arguments, and values of the wrong JSON type. It
returns the arguments ready to call the function with: integral floats (``12.0``, which some
models' JSON encoders emit) become ints; booleans are never numbers. What a value means (a
nonnegative prediction, a date) is the tool's own business: the tool raises ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rap_benchmark.tools.schema import Param, tool_params


class ToolArgumentError(ValueError):
    """A tool was called with unknown, missing or invalid arguments."""


def _value(tool: str, p: Param, value: Any) -> Any:
    if value is None:
        if p.nullable:
            return None
        raise ToolArgumentError(f"{tool}: {p.name} must be {p.json_type}, got null")
    if p.py_type is int:
        if isinstance(value, float) and math.isfinite(value) and value == int(value):
            return int(value)
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif p.py_type is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, p.py_type)
    if not ok:
        raise ToolArgumentError(
            f"{tool}: {p.name} must be {_article(p.json_type)}, got {type(value).__name__} {value!r}"
        )
    return value


def _article(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"


def check_arguments(fn: Callable[..., Any], arguments: Any, *, name: str | None = None) -> dict[str, Any]:
    """``arguments`` checked against ``fn``'s signature (see the module docstring); raises
    :class:`ToolArgumentError`."""
    tool = name or fn.__name__
    if not isinstance(arguments, dict):
        raise ToolArgumentError(f"{tool}: expected a JSON object of arguments, got {type(arguments).__name__}")
    params = tool_params(fn)
    names = [p.name for p in params]
    unknown = sorted(set(arguments) - set(names))
    if unknown:
        raise ToolArgumentError(f"{tool}: unknown argument(s) {', '.join(unknown)} (allowed: {', '.join(names)})")
    missing = [p.name for p in params if p.required and p.name not in arguments]
    if missing:
        raise ToolArgumentError(f"{tool}: missing argument(s) {', '.join(missing)}")
    return {p.name: _value(tool, p, arguments[p.name]) for p in params if p.name in arguments}
