"""``print_json``: the strict JSON summaries of ``rap diagnose``, ``rap sft`` and ``rap audit traces``,
written through ``core.canonical.to_plain`` (its ``finite=True`` turns infinities into null too)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from typing import Any

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from rap_benchmark.cli.run import print_json


def _printed(obj: Any) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_json(obj)
    return out.getvalue()


def test_numpy_and_pandas_values_print_as_json_values() -> None:
    """Regression: print_json made only Python floats strict, so a numpy count printed as the string
    ``"3"``, a numpy bool as ``"True"``, a float32 NaN as ``"nan"`` and pandas' NA as ``"<NA>"``."""
    summary = {
        "n": np.int64(3),
        "share": np.float32(0.5),
        "ok": np.bool_(True),
        "gaps": [pd.NA, pd.NaT, np.float32("nan"), float("inf"), -np.inf],
        "counts": np.array([1, 2]),
    }
    assert json.loads(_printed(summary)) == {
        "n": 3,
        "share": 0.5,
        "ok": True,
        "gaps": [None, None, None, None, None],
        "counts": [1, 2],
    }


def _strict(value: Any) -> Any:
    """The summary as it should print: NaN and infinities as null, tuples as lists."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.tuples(inner, inner) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(PLAIN)
def test_plain_summaries_print_byte_for_byte_as_before(value: Any) -> None:
    """Summaries of plain Python values (what the commands pass) print exactly as they did before
    print_json used to_plain: sorted keys, one-space indent, NaN and infinities as null."""
    assert _printed(value) == json.dumps(_strict(value), sort_keys=True, indent=1, allow_nan=False) + "\n"
