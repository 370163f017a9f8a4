"""Is each direction a research direction? The readers' ratings, and how far two readers agree.

Beside the human audit's sorting of papers (:mod:`rap_benchmark.audit.human`), a reader rates
every direction of every sampled field, read from its name, definition, boundaries and
exemplars, ``coherent``, ``partly`` or ``not a direction`` (:func:`direction_sheet`,
:func:`read_ratings`, :func:`rating_shares`); :func:`reader_agreement` compares two readers'
primaries on the same items. Intervals resample whole fields.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pandas as pd

from rap_benchmark.audit.intervals import Estimate, field_bootstrap, finite_mean
from rap_benchmark.core.records import Codebook

__all__ = [
    "RATINGS",
    "RATING_COLUMNS",
    "direction_sheet",
    "rating_shares",
    "reader_agreement",
    "read_ratings",
]

COHERENT, PARTLY, NOT_A_DIRECTION = "coherent", "partly", "not a direction"
RATINGS: tuple[str, ...] = (COHERENT, PARTLY, NOT_A_DIRECTION)
RATING_COLUMNS: tuple[str, ...] = (
    "field_id",
    "field_name",
    "field_definition",
    "key",
    "name",
    "definition",
    "inclusion",
    "exclusion",
    "exemplars",
    "rating",
)
"""The columns of ``directions.csv``; a reader fills ``rating`` with one of :data:`RATINGS`."""


def direction_sheet(
    codebooks: dict[str, Codebook],
    fields: Sequence[str],
    titles: Mapping[str, str] | None = None,
    hide: Collection[str] = (),
) -> pd.DataFrame:
    """One row per direction of each field in ``fields`` (in that order, D0..D7), ``rating`` blank.

    ``exemplars`` lists the exemplar papers by title, one a line (the codebook's titles, else
    ``titles[arxiv_id]``; never an id), leaving out the papers in ``hide`` (the audited items: an
    exemplar's direction is its frozen label).
    """
    titles = titles or {}
    rows = []
    for fid in fields:
        cb = codebooks[fid]
        for d in cb.directions:
            known = d.exemplar_titles or tuple(titles.get(a, "") for a in d.exemplars)
            shown = [t for a, t in zip(d.exemplars, known, strict=False) if t and a not in hide]
            texts = (d.key, d.name, d.definition, d.inclusion, d.exclusion, "\n".join(shown))
            rows.append((fid, cb.name, cb.definition, *texts, ""))  # RATING_COLUMNS
    return pd.DataFrame(rows, columns=list(RATING_COLUMNS))


def read_ratings(frame: pd.DataFrame) -> pd.DataFrame:
    """``field_id``, ``key``, ``rating`` of a returned sheet, ratings normalised (case, spaces).

    Unrated rows are left out; a rating outside :data:`RATINGS` or a direction rated twice raises
    ValueError naming it.
    """
    missing = [c for c in ("field_id", "key", "rating") if c not in frame.columns]
    if missing:
        raise ValueError(f"missing column(s) {', '.join(missing)} (expected field_id, key, rating)")
    out = frame.loc[:, ["field_id", "key", "rating"]].astype(str)
    out["rating"] = out["rating"].str.strip().str.lower().str.replace(r"\s+", " ", regex=True)
    out = out.loc[~out["rating"].isin(["", "nan", "none"])].reset_index(drop=True)
    bad = sorted(set(out["rating"]) - set(RATINGS))
    if bad:
        raise ValueError(f"unknown rating(s) {', '.join(map(repr, bad))} (use {', '.join(map(repr, RATINGS))})")
    twice = out.duplicated(["field_id", "key"], keep=False)
    if twice.any():
        r = out.loc[twice].iloc[0]
        raise ValueError(f"direction {r['field_id']} {r['key']} is rated more than once")
    return out


def _share(flags: np.ndarray) -> object:
    return lambda i: float(np.mean(flags[i])) if i.size else float("nan")


def rating_shares(ratings: Sequence[pd.DataFrame], *, n_resamples: int = 2000, seed: int = 0) -> dict[str, Estimate]:
    """Shares of directions by rating, field-resampled 95% intervals. ``ratings``: one reader's
    :func:`read_ratings` table (shares per rating) or two (coherent by both, not a direction by
    either, rated alike; only the directions both rated count)."""
    if not 1 <= len(ratings) <= 2:
        raise ValueError("rating_shares takes one or two readers' ratings")
    if len(ratings) == 1:
        r = ratings[0]
        stats = {
            "coherent": _share((r["rating"] == COHERENT).to_numpy()),
            "partly": _share((r["rating"] == PARTLY).to_numpy()),
            "not_a_direction": _share((r["rating"] == NOT_A_DIRECTION).to_numpy()),
        }
        return field_bootstrap(r["field_id"].to_numpy(), stats, n_resamples=n_resamples, seed=seed)
    both = ratings[0].merge(ratings[1], on=["field_id", "key"], suffixes=("_a", "_b"), validate="one_to_one")
    a, b = both["rating_a"].to_numpy(), both["rating_b"].to_numpy()
    stats = {
        "coherent_by_both": _share((a == COHERENT) & (b == COHERENT)),
        "not_a_direction_by_either": _share((a == NOT_A_DIRECTION) | (b == NOT_A_DIRECTION)),
        "readers_rate_alike": _share(a == b),
    }
    return field_bootstrap(both["field_id"].to_numpy(), stats, n_resamples=n_resamples, seed=seed)


def reader_agreement(
    key: pd.DataFrame, first: pd.DataFrame, second: pd.DataFrame, *, n_resamples: int = 2000, seed: int = 0
) -> dict[str, Estimate]:
    """How often two readers give the same primary (a direction or ``other``) to the same item.

    Items count when both readers named a primary; ``_single`` restricts to the frozen ``single``
    memberships and ``_others`` to the rest (boundary and bridge). Intervals resample fields.
    """
    cols = ["item_id", "primary"]
    df = (
        key[["item_id", "field_id", "type"]]
        .merge(first[cols], on="item_id")
        .merge(second[cols], on="item_id", suffixes=("_a", "_b"))
    )
    a = df["primary_a"].fillna("").astype(str).str.strip().to_numpy()
    b = df["primary_b"].fillna("").astype(str).str.strip().to_numpy()
    df = df.loc[(a != "") & (b != "")].reset_index(drop=True)
    same = (df["primary_a"].astype(str).str.strip() == df["primary_b"].astype(str).str.strip()).to_numpy(float)
    single = df["type"].astype(str).to_numpy() == "single"

    def mean_where(mask: np.ndarray) -> object:
        z = np.where(mask, same, np.nan)
        return lambda i: finite_mean(z[i])

    stats = {
        "readers_primary_agree": mean_where(np.ones(len(df), dtype=bool)),
        "readers_primary_agree_single": mean_where(single),
        "readers_primary_agree_others": mean_where(~single),
    }
    return field_bootstrap(df["field_id"].to_numpy(), stats, n_resamples=n_resamples, seed=seed)
