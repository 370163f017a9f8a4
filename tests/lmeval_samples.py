"""lm-eval's own per-episode metric values, which the tests compare with the package's."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd


def samples_episode_metrics(samples: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """lm-eval's own per-episode metric values (``spearman`` etc.), one row per sample dict."""
    rows = []
    for s in samples:
        doc = s["doc"]
        row = {"condition": doc["condition"], "field_id": doc["field_id"], "origin": doc["origin"]}
        for name in ("spearman", "state_fidelity"):
            if name in s:
                value = s[name]
                row[name] = float("nan") if value[1] is None else float(value[1])
        rows.append(row)
    return pd.DataFrame(rows)
