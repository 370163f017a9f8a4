"""The paper's human audit of the assignment instrument.

Three pieces, each pure over tables:

- ``design_sample``: per audited field, draws from the four construction cells (single vs
  boundary x before vs from the cutoff), population draws and retrieved non-primary draws
  (papers a direction's own query retrieves whose frozen primary is another direction). Returns
  the blind sheet (never the frozen label, stratum or scoring rule), a private key and the
  direction sheet (:mod:`rap_benchmark.audit.readability`).
- ``analyse``: joins annotations with the key; membership reproduction, exact primary match,
  match within the declared pair, corpus-reweighted estimates sum_c pi_c zbar_c (and the
  Forecast version over the cells from the cutoff), field-resampled intervals.
- ``tv_permutation_test``: the exchangeable-disagreement permutation null for the total-variation
  distance between two labellers' marginals over the eight direction slots.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rap_benchmark.audit.align import direction_index
from rap_benchmark.audit.intervals import Estimate, field_bootstrap, finite_mean
from rap_benchmark.audit.readability import RATINGS, direction_sheet
from rap_benchmark.core.fsio import atomic_path, atomic_write_text
from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS, Codebook

CELLS: tuple[str, ...] = ("single/pre", "single/post", "boundary/pre", "boundary/post")
SHEET_COLUMNS: tuple[str, ...] = (
    "item_id",
    "field_id",
    "field_name",
    "field_definition",
    "directions",
    "title",
    "abstract",
    "member",
    "primary",
    "secondary",
    "clarity",
    "confidence",
)
ANSWER_COLUMNS: tuple[str, ...] = ("member", "primary", "secondary", "clarity", "confidence")
KEY_COLUMNS: tuple[str, ...] = ("item_id", "field_id", "arxiv_id", "stratum", "cell", "primary", "secondary", "type")
"""The columns of ``key.private.csv`` (what :func:`analyse` reads back)."""


def cell_of(types: pd.Series, dates: pd.Series, cutoff: str) -> pd.Series:
    """The construction cell: ``single`` vs ``boundary`` (boundary and bridge) x pre/post cutoff."""
    kind = np.where(types.to_numpy() == "single", "single", "boundary")
    period = np.where(dates.to_numpy() < cutoff, "pre", "post")
    cell = pd.Series([f"{k}/{p}" for k, p in zip(kind, period, strict=True)], index=types.index)
    return cell.where(types.isin(["single", "boundary", "bridge"]))


def _item_id(salt: str, field_id: str, arxiv_id: str, stratum: str) -> str:
    return hashlib.sha256(f"{salt}|{field_id}|{arxiv_id}|{stratum}".encode()).hexdigest()[:12]


def _directions_text(cb: Codebook) -> str:
    return "\n".join(f"{d.key}: {d.name}. {d.definition}" for d in cb.directions)


@dataclass(frozen=True)
class AuditSample:
    sheet: pd.DataFrame  # blind: SHEET_COLUMNS only, answers blank
    key: pd.DataFrame  # private: item_id, field_id, arxiv_id, stratum, cell, primary, secondary, type
    directions: pd.DataFrame  # blind: every direction of the sampled fields, ``rating`` blank


def design_sample(
    papers: pd.DataFrame,
    assignments: pd.DataFrame,
    codebooks: dict[str, Codebook],
    fields: list[str],
    cutoff: str,
    *,
    per_cell: int = 1,
    population: int = 1,
    retrieved: int = 1,
    retrieve: Callable[[str, str], list[str]] | None = None,
    seed: int,
) -> AuditSample:
    """Draw the stratified sample. ``retrieve(field_id, query)`` returns ranked arxiv ids."""
    rng = np.random.default_rng(seed)
    paper = papers.set_index("arxiv_id")
    key_rows: list[tuple[object, ...]] = []  # KEY_COLUMNS without item_id
    for field_id in fields:
        rows = assignments[assignments["field_id"] == field_id].sort_values(["date", "arxiv_id"])
        rows = rows.assign(cell=cell_of(rows["type"], rows["date"], cutoff))
        taken: set[str] = set()

        def take(cands: pd.DataFrame, k: int, stratum: str, field_id: str = field_id, taken: set[str] = taken) -> None:
            cands = cands[~cands["arxiv_id"].isin(taken)]
            if cands.empty or k <= 0:
                return
            pick = cands.iloc[np.sort(rng.choice(len(cands), size=min(k, len(cands)), replace=False))]
            for r in pick.itertuples(index=False):
                taken.add(r.arxiv_id)
                key_rows.append((field_id, r.arxiv_id, stratum, r.cell, r.primary, r.secondary, r.type))

        for cell in CELLS:
            take(rows[rows["cell"] == cell], per_cell, f"cell:{cell}")
        take(rows, population, "population")
        if retrieve is not None and retrieved > 0:
            cb = codebooks[field_id]
            by_id = rows.set_index("arxiv_id")
            cands = []
            for d in cb.directions:
                for aid in retrieve(field_id, d.name):
                    if aid in by_id.index and by_id.at[aid, "primary"] != d.key:
                        cands.append(aid)
            cand_rows = rows[rows["arxiv_id"].isin(sorted(set(cands)))]
            take(cand_rows, retrieved, "retrieved_non_primary")
    key = pd.DataFrame(key_rows, columns=list(KEY_COLUMNS[1:]))
    salt = f"rap-audit-{seed}"
    key.insert(
        0,
        "item_id",
        [_item_id(salt, f, a, s) for f, a, s in zip(key["field_id"], key["arxiv_id"], key["stratum"], strict=True)],
    )
    # the annotator's order must not reveal strata: sort items by their opaque id
    key = key.sort_values("item_id", kind="stable").reset_index(drop=True)
    sheet = pd.DataFrame(
        {
            "item_id": key["item_id"],
            "field_id": key["field_id"],
            "field_name": [codebooks[f].name for f in key["field_id"]],
            "field_definition": [codebooks[f].definition for f in key["field_id"]],
            "directions": [_directions_text(codebooks[f]) for f in key["field_id"]],
            "title": [paper.at[a, "title"] for a in key["arxiv_id"]],
            "abstract": [paper.at[a, "abstract"] for a in key["arxiv_id"]],
        }
    )
    for col in ANSWER_COLUMNS:
        sheet[col] = ""
    return AuditSample(
        sheet=sheet[list(SHEET_COLUMNS)],
        key=key,
        directions=direction_sheet(codebooks, fields, paper["title"].to_dict(), hide=set(key["arxiv_id"])),
    )


def _ratings_html(directions: pd.DataFrame) -> str:
    """The direction-rating part of the form: each field's eight directions, one rating each."""
    options = "".join(f"<option>{html.escape(r)}</option>" for r in RATINGS)
    parts = []
    for fid, group in directions.groupby("field_id", sort=False):
        first = group.iloc[0]
        rows = "".join(
            f"""<div class="dir" data-field="{html.escape(fid)}" data-key="{html.escape(r.key)}">
<h3>{html.escape(r.key)}: {html.escape(r.name)}</h3><p>{html.escape(r.definition)}</p>
<p>{html.escape(r.inclusion)}</p><p>{html.escape(r.exclusion)}</p><pre>{html.escape(r.exemplars)}</pre>
<label>A research direction? <select name="rating"><option></option>{options}</select></label></div>"""
            for r in group.itertuples(index=False)
        )
        parts.append(
            f"""<section class="field"><h2>Field: {html.escape(first.field_name)}</h2>
<p>{html.escape(first.field_definition)}</p>{rows}</section>"""
        )
    return "".join(parts)


def sheet_html(sheet: pd.DataFrame, directions: pd.DataFrame | None = None) -> str:
    """A self-contained annotation form (no network): fill in, then download the answers CSV
    (and, with ``directions``, the direction ratings CSV)."""
    items = []
    for r in sheet.itertuples(index=False):
        options = "".join(f'<option value="{k}">{k}</option>' for k in (*DIRECTION_KEYS, "other"))
        items.append(
            f"""<section class="item" data-id="{html.escape(r.item_id)}">
<h2>{html.escape(r.title)}</h2><p class="abs">{html.escape(r.abstract)}</p>
<details open><summary>Field: {html.escape(r.field_name)}</summary><p>{html.escape(r.field_definition)}</p>
<pre>{html.escape(r.directions)}</pre></details>
<label>Member of the field? <select name="member"><option></option><option>yes</option><option>no</option></select></label>
<label>Primary <select name="primary"><option></option>{options}</select></label>
<label>Secondary (optional) <select name="secondary"><option></option>{options}</select></label>
<label>Directions clear? <select name="clarity"><option></option><option>clear</option><option>unclear</option></select></label>
<label>Confidence <select name="confidence"><option></option><option>high</option><option>medium</option><option>low</option></select></label>
</section>"""
        )
    script = """
function download(){
  const cols=["item_id","member","primary","secondary","clarity","confidence"];
  const lines=[cols.join(",")];
  document.querySelectorAll(".item").forEach(s=>{
    const row=[s.dataset.id];
    cols.slice(1).forEach(c=>row.push(s.querySelector(`[name=${c}]`).value));
    lines.push(row.join(","));
  });
  const a=document.createElement("a");
  a.href=URL.createObjectURL(new Blob([lines.join("\\n")+"\\n"],{type:"text/csv"}));
  a.download="annotations.csv"; a.click();
}
function downloadRatings(){
  const q=v=>'"'+String(v).replace(/"/g,'""')+'"';
  const lines=["field_id,key,rating"];
  document.querySelectorAll(".dir").forEach(d=>{
    lines.push([q(d.dataset.field),q(d.dataset.key),q(d.querySelector("[name=rating]").value)].join(","));
  });
  const a=document.createElement("a");
  a.href=URL.createObjectURL(new Blob([lines.join("\n")+"\n"],{type:"text/csv"}));
  a.download="ratings.csv"; a.click();
}"""
    rating_part = ""
    if directions is not None and len(directions):
        rating_part = f"""<h1>Part 1: the directions ({len(directions)})</h1>
<p>Rate each direction: <b>coherent</b> (one research programme a domain expert recognises and could
sort papers by), <b>partly</b>, or <b>not a direction</b>.</p>
{_ratings_html(directions)}
<button onclick="downloadRatings()">Download direction ratings (CSV)</button>
<h1>Part 2: the papers</h1>"""
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>RAP annotation sheet</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:auto}} .item{{border-bottom:1px solid #ccc;padding:1em 0}}
label{{display:block;margin:.3em 0}} pre{{white-space:pre-wrap;background:#f6f6f6;padding:.5em}}</style>
</head><body>{rating_part}<h1>RAP annotation sheet ({len(sheet)} items)</h1>
<p>Judge each paper from its title and abstract against the field and its eight written directions.</p>
{"".join(items)}
<button onclick="download()">Download answers (CSV)</button><script>{script}</script></body></html>
"""


def _reweighted(z: np.ndarray, cells: np.ndarray, pi: dict[str, float], keep: tuple[str, ...]) -> float:
    weights = {c: pi.get(c, 0.0) for c in keep if np.isfinite(z[cells == c]).any()}
    total = sum(weights.values())
    if total == 0:
        return float("nan")
    return float(sum(w * np.nanmean(z[cells == c]) for c, w in weights.items()) / total)


def corpus_cell_shares(assignments: pd.DataFrame, cutoff: str) -> dict[str, float]:
    """pi_c: each construction cell's share of frozen corpus memberships."""
    cells = cell_of(assignments["type"], assignments["date"], cutoff).dropna()
    return {c: float((cells == c).mean()) for c in CELLS}


def analyse(
    key: pd.DataFrame,
    answers: pd.DataFrame,
    pi: dict[str, float],
    *,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Estimate]:
    """Audit statistics with field-resampled percentile intervals.

    ``answers`` has item_id, member (yes/no), primary, secondary. Frozen-positive items are the
    cell strata (every key row is a frozen membership). On the items the reader accepts as
    members: ``exact_primary_match`` (the reader's primary is the frozen one), the same on
    ``single`` memberships (``exact_primary_match_single``), and ``within_pair_match``: on the
    memberships with a declared pair (boundary and bridge), the reader's primary is one of the two.
    """
    df = key.merge(answers[["item_id", *ANSWER_COLUMNS]], on="item_id", how="inner", validate="one_to_one")
    member = (df["member"].astype(str).str.lower() == "yes").to_numpy(dtype=float)
    accepted = member > 0
    # merge renamed the colliding columns: frozen labels are *_x, annotator's are *_y
    frozen = direction_index(df["primary_x"].to_numpy())
    frozen_sec = direction_index(df["secondary_x"].to_numpy())
    ann = direction_index(df["primary_y"].to_numpy())
    exact = np.where(accepted, (ann == frozen) & (frozen >= 0), np.nan).astype(float)
    declared_pair = frozen_sec >= 0
    in_pair = np.where(accepted & declared_pair, (ann == frozen) | (ann == frozen_sec), np.nan).astype(float)
    cells = df["cell"].fillna("").to_numpy()
    fields = df["field_id"].to_numpy()
    all_cells, post_cells = CELLS, tuple(c for c in CELLS if c.endswith("/post"))

    single = df["type"].astype(str).to_numpy() == "single"
    exact_single = np.where(single, exact, np.nan)
    stats: dict[str, Callable[[np.ndarray], float]] = {
        "membership_reproduction": lambda i: float(np.mean(member[i])) if i.size else float("nan"),
        "exact_primary_match": lambda i: finite_mean(exact[i]),
        "exact_primary_match_single": lambda i: finite_mean(exact_single[i]),
        "within_pair_match": lambda i: finite_mean(in_pair[i]),
        "exact_match_reweighted": lambda i: _reweighted(exact[i], cells[i], pi, all_cells),
        "exact_match_reweighted_forecast": lambda i: _reweighted(exact[i], cells[i], pi, post_cells),
        "membership_reweighted": lambda i: _reweighted(member[i], cells[i], pi, all_cells),
    }
    return field_bootstrap(fields, stats, n_resamples=n_resamples, seed=seed)


def marginals(labels: np.ndarray) -> np.ndarray:
    """Shares over the eight direction slots of integer labels 0..7."""
    return np.bincount(labels, minlength=N_DIRECTIONS) / max(len(labels), 1)


@dataclass(frozen=True)
class PermutationResult:
    tv: float
    p_value: float
    null_q95: float
    n_items: int
    n_permutations: int


def tv_permutation_test(a: np.ndarray, b: np.ndarray, *, n_permutations: int = 9999, seed: int) -> PermutationResult:
    """Exchangeable-disagreement null for TV(marginal(a), marginal(b)).

    Under the null the two labels of each paired item are exchangeable, so each pair is swapped
    with probability 1/2 independently. p = (1 + #{TV* >= TV}) / (1 + n_permutations).
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError("need two equal-length, non-empty label vectors")
    if n_permutations < 1:
        raise ValueError("n_permutations must be >= 1")
    if (a < 0).any() or (b < 0).any() or (a >= N_DIRECTIONS).any() or (b >= N_DIRECTIONS).any():
        raise ValueError("labels must be direction indices 0..7")
    n = a.size
    observed = 0.5 * np.abs(marginals(a) - marginals(b)).sum()
    rng = np.random.default_rng(seed)
    swap = rng.random((n_permutations, n)) < 0.5
    # per-permutation difference of counts: each swapped item moves its (a, b) contribution
    diff = np.bincount(a, minlength=N_DIRECTIONS) - np.bincount(b, minlength=N_DIRECTIONS)
    onehot = np.eye(N_DIRECTIONS)
    delta = 2.0 * (swap.astype(np.float64) @ (onehot[b] - onehot[a]))
    null = 0.5 * np.abs(diff[None, :] + delta).sum(axis=1) / n
    p = (1.0 + np.count_nonzero(null >= observed - 1e-12)) / (1.0 + n_permutations)
    return PermutationResult(float(observed), float(p), float(np.quantile(null, 0.95)), n, n_permutations)


def save_sample(sample: AuditSample, out_dir) -> dict[str, str]:
    """Write sheet.csv, sheet.html (blind) and key.private.csv (never shown to annotators)."""
    from pathlib import Path

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in (("sheet", sample.sheet), ("directions", sample.directions), ("key.private", sample.key)):
        with atomic_path(out / f"{name}.csv") as tmp:
            frame.to_csv(tmp, index=False)
    atomic_write_text(out / "sheet.html", sheet_html(sample.sheet, sample.directions))
    meta = {
        "n_items": len(sample.sheet),
        "n_directions": len(sample.directions),
        "fields": sorted(set(sample.directions["field_id"]) | set(sample.key["field_id"])),
    }
    atomic_write_text(out / "sample.json", json.dumps(meta, indent=1, sort_keys=True) + "\n")
    return {
        "sheet": str(out / "sheet.csv"),
        "directions": str(out / "directions.csv"),
        "form": str(out / "sheet.html"),
        "key": str(out / "key.private.csv"),
    }
