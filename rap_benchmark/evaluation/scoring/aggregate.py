"""The paper's field-macro aggregation: average episodes within a field, then average fields.

NaN episode values (invalid predictions, undefined scores) are left out of their field's mean; a
field with no finite value is left out of the macro average. Masked tracks (Forecast-Strict,
SFT) pass only their eligible cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True, slots=True)
class FieldTable:
    """Per-field sums and counts of the finite episode values, fields sorted by id."""

    field_ids: NDArray[np.str_]
    sums: NDArray[np.float64]
    counts: NDArray[np.int64]

    @property
    def means(self) -> NDArray[np.float64]:
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums / self.counts

    @property
    def has_data(self) -> NDArray[np.bool_]:
        return self.counts > 0


def field_table(values: ArrayLike, field_ids: ArrayLike) -> FieldTable:
    """Group episode values by field: sums and counts over finite values (vectorised)."""
    vals = np.asarray(values, dtype=np.float64).ravel()
    fids = np.asarray(field_ids).astype(str).ravel()
    if vals.shape != fids.shape:
        raise ValueError(f"values and field_ids differ in length: {vals.shape[0]} vs {fids.shape[0]}")
    uniq, inv = np.unique(fids, return_inverse=True)
    ok = np.isfinite(vals)
    sums = np.bincount(inv, weights=np.where(ok, vals, 0.0), minlength=uniq.size)
    counts = np.bincount(inv, weights=ok.astype(np.float64), minlength=uniq.size).astype(np.int64)
    return FieldTable(field_ids=uniq, sums=sums, counts=counts)


def field_macro(values: ArrayLike, field_ids: ArrayLike) -> float:
    """Mean within field over finite values, then mean across fields; NaN when nothing is finite."""
    table = field_table(values, field_ids)
    keep = table.has_data
    if not keep.any():
        return float("nan")
    return float(table.means[keep].mean())
