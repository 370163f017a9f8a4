"""Token cost from a price table (USD per 1M tokens; ``rap_benchmark/data/prices.json``).

A model missing from the table has an unknown cost (None), never zero. Models whose name starts
with one of the table's ``free_prefixes`` (reference agents, local in-process models) cost 0.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from rap_benchmark.core import resources
from rap_benchmark.core.errors import FileFormatError


@dataclass(frozen=True, slots=True)
class PriceTable:
    prices: dict[str, tuple[float, float]]  # model -> (input per 1M, output per 1M)
    free_prefixes: tuple[str, ...]
    as_of: str | None

    def cost_usd(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Cost of the tokens, or None when the model's price is unknown."""
        if model in self.prices:
            pin, pout = self.prices[model]
            return (prompt_tokens * pin + completion_tokens * pout) / 1_000_000
        if any(model.startswith(p) for p in self.free_prefixes):
            return 0.0
        return None


def _parse(data: dict[str, Any]) -> PriceTable:
    prices = {
        name: (float(p["input_per_1m"]), float(p["output_per_1m"])) for name, p in dict(data.get("models", {})).items()
    }
    return PriceTable(prices=prices, free_prefixes=tuple(data.get("free_prefixes", ())), as_of=data.get("as_of"))


@cache
def default_prices() -> PriceTable:
    text = (resources.DATA_DIR / "prices.json").read_text(encoding="utf-8")
    return _parse(json.loads(text))


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The packaged table, or a JSON file with the same layout."""
    if path is None:
        return default_prices()
    try:
        return _parse(json.loads(Path(path).read_text(encoding="utf-8")))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FileFormatError(path, f"not a JSON price table ({exc})") from exc
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise FileFormatError(
            path, 'a price table is {"models": {NAME: {"input_per_1m": X, "output_per_1m": Y}}, ...}'
        ) from exc
