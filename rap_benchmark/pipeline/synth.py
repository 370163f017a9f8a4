"""The embedded ``mini`` instance: a synthetic arXiv-like corpus generated from a seed (README: Instances).

Twelve invented ML fields, each with eight directions. Every direction has its own vocabulary;
every field has a topic vocabulary; all papers share a generic ML vocabulary. A paper's title and
abstract are filled from sentence templates whose direction slots draw from the paper's true
direction (and, for boundary papers, partly from a second direction), so a text instrument can
recover the latent label but not perfectly.

Dynamics per field (monthly, over ``[spec.date_start, spec.date_end)``):

* persistent direction shares (random base logits) plus a linear trend per direction;
* one emerging direction (logistic rise) and one fading direction (logistic fall);
* AR(1) noise on the logits (mean-reverting, so smoothing over windows helps: EWMA beats Recent
  on average, neither is perfect);
* growing monthly volume with multiplicative noise; Poisson counts, multinomial directions.

Some field pairs share most of the smaller field's papers (they form dependency blocks), others
share a few papers. Everything is a pure function of ``spec.seed``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import DIRECTION_KEYS, N_DIRECTIONS
from rap_benchmark.core.resources import DATA_DIR
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.pipeline.fields import FieldInfo

__all__ = [
    "BLUEPRINTS",
    "DirectionBlueprint",
    "FieldBlueprint",
    "MiniCorpus",
    "generate_mini",
]


@dataclass(frozen=True)
class DirectionBlueprint:
    """A latent direction: its written name and the words its papers use."""

    key: str  # D0..D7
    name: str
    words: tuple[str, ...]


@dataclass(frozen=True)
class FieldBlueprint:
    """A latent field: topic phrase, topic words, categories and its eight directions."""

    field_id: str
    name: str
    definition: str
    categories: tuple[str, ...]
    words: tuple[str, ...]
    directions: tuple[DirectionBlueprint, ...]


@dataclass(frozen=True)
class MiniCorpus:
    """What :func:`generate_mini` returns: ``papers`` (the ``papers.parquet`` columns, sorted by
    date and id), ``memberships``, ``truth`` (one ``true_direction`` per membership), the fields'
    info and blueprints, and ``shares`` (latent monthly direction shares and expected volume:
    field_id, month, D0..D7, volume)."""

    papers: pd.DataFrame
    memberships: pd.DataFrame
    truth: pd.DataFrame
    field_info: dict[str, FieldInfo]
    blueprints: dict[str, FieldBlueprint]
    shares: pd.DataFrame


# Vocabulary: ``data/mini_fields.json``, one object per field (name, definition, categories,
# words, and eight directions as "name: words"). Words are single tokens of
# rap_benchmark.core.text (no stop words); a direction's words are distinct within its field.
FIELDS_FILE = DATA_DIR / "mini_fields.json"

_SHARED_WORDS: tuple[str, ...] = tuple(
    """model models framework performance benchmark benchmarks dataset datasets experiments evaluation
    baseline baselines accuracy robust novel large scale training learning neural network networks
    task tasks data analysis improve improves improvement significant demonstrate extensive empirical
    study outperforms existing prior work challenge challenges setting settings key effective simple
    general strong competitive consistent practical theoretical insights design recent state art
    architecture module components objective loss fine across several diverse real world""".split()
)

_TEMPLATES: tuple[str, ...] = (
    "{FP} has advanced rapidly, yet {D} and {D} remain open {S}.",
    "We study {P} in the context of {FP}.",
    "We introduce a {S} {S} that couples {D} with {D} {D}.",
    "Our {S} relies on {D} {D} together with {F} {F}.",
    "Experiments on {F} {S} show that {D} {D} {S} {S} {S}.",
    "We further analyse {D} {D} under {F} {F} {S}.",
    "Code and {S} are released to support {S} {S} on {P}.",
    "Compared with {S} {S}, {D} {D} yields {S} {S} on {F} {F}.",
)
_TITLE_TEMPLATES: tuple[str, ...] = (
    "{P} for {FP}",
    "{D} {D}: {S} {P}",
    "Towards {S} {P} with {D} {D}",
    "Rethinking {D} {D} in {FP}",
)
# each template as literal text and slot names alternating ("{D} and {F}" -> "", "D", " and ", "F", "")
_SLOTS = {t: tuple(t.replace("}", "{").split("{")) for t in (*_TEMPLATES, *_TITLE_TEMPLATES)}
_LOW_EVIDENCE_TITLE = "Withdrawn submission"
_LOW_EVIDENCE_ABSTRACT = "Withdrawn: duplicate submission, see erratum."
_FIRST = tuple(
    "Alice Bo Chen Dara Eli Femi Gita Hiro Ines Jun Kofi Lena Mina Noor Omar Pia Quan Ravi Sara Tomas".split()
)
_LAST = tuple(
    "Abe Bauer Costa Diaz Eng Fischer Gupta Hall Ito Jensen Kim Li Moreau Nakamura Okafor Park Rossi Singh Tan Wang".split()
)

# Field pairs (parent index, child index, share of the child's papers also in the parent).
# Strong links form dependency blocks (overlap coefficient well above 0.60); weak ones do not.
_LINKS: tuple[tuple[int, int, float], ...] = (
    (3, 11, 0.78),  # alignment  <- safety (strong)
    (0, 1, 0.75),  # speech     <- translation (strong)
    (5, 10, 0.76),  # diffusion  <- vision-language (strong)
    (2, 4, 0.10),  # RAG        <- reasoning (weak)
    (6, 10, 0.08),  # detection  <- vision-language (weak)
    (8, 3, 0.07),  # RL         <- alignment (weak)
    (9, 7, 0.06),  # efficiency <- graphs (weak)
)
_CHILD_VOLUME = 0.62  # a strongly linked child field's volume relative to a plain field


def _parse_blueprints() -> tuple[FieldBlueprint, ...]:
    out = []
    for i, field in enumerate(json.loads(FIELDS_FILE.read_text(encoding="utf-8"))):
        directions = []
        for k, line in enumerate(field["directions"]):
            dname, _, dwords = line.partition(":")
            directions.append(DirectionBlueprint(DIRECTION_KEYS[k], dname.strip(), tuple(dwords.split())))
        if len(directions) != N_DIRECTIONS:
            raise AssertionError(f"blueprint {field['name']!r} has {len(directions)} directions")
        out.append(
            FieldBlueprint(
                field_id=f"f{i:03d}",
                name=field["name"],
                definition=field["definition"],
                categories=tuple(field["categories"].split()),
                words=tuple(field["words"].split()),
                directions=tuple(directions),
            )
        )
    return tuple(out)


BLUEPRINTS: tuple[FieldBlueprint, ...] = _parse_blueprints()


# --------------------------------------------------------------------------------------------
# Dynamics
# --------------------------------------------------------------------------------------------


def _months(spec: BenchmarkSpec) -> list[dt.date]:
    start = parse_date(spec.date_start).replace(day=1)
    end = parse_date(spec.date_end)
    months = []
    m = start
    while m < end:
        months.append(m)
        m = add_months(m, 1)
    return months


# Dynamics constants (logit scale; time in years).
BASE_SD = 1.0  # persistent direction levels
SLOPE_SD = 0.06  # linear trends
EMERGE_AMP = 1.8  # rise of the emerging direction
FADE_AMP = 1.5  # fall of the fading direction
SWITCH_WIDTH = 0.7  # logistic width of the rise and fall
QUARTER_SHOCK_SD = 0.50
QUARTER_SHOCK_PHI = 0.15
MONTH_AR_PHI = 0.45
MONTH_AR_SD = 0.15
SHARE_FLOOR = 0.01  # minimum monthly share of every direction


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _field_shares(rng: np.random.Generator, n_months: int, first_month_index: int) -> np.ndarray:
    """Monthly direction shares (n_months x 8) of one field; months start at calendar month
    ``first_month_index`` (0 = January)."""
    t = np.arange(n_months, dtype=np.float64) / 12.0
    base = rng.normal(0.0, BASE_SD, N_DIRECTIONS)
    slope = rng.normal(0.0, SLOPE_SD, N_DIRECTIONS)
    logits = base[None, :] + slope[None, :] * (t[:, None] - t.mean())
    emerging, fading = rng.choice(N_DIRECTIONS, size=2, replace=False)
    t_rise = rng.uniform(1.0, 3.2)
    t_fall = rng.uniform(0.8, 3.2)
    logits[:, emerging] += EMERGE_AMP * (_sigmoid((t - t_rise) / SWITCH_WIDTH) - 0.55)
    logits[:, fading] -= FADE_AMP * (_sigmoid((t - t_fall) / SWITCH_WIDTH) - 0.3)
    # quarterly shocks (mean-reverting between quarters: they make a single window noisy, so
    # smoothing over windows pays) plus small monthly AR(1) noise.
    quarter = (np.arange(n_months) + first_month_index) // 3  # calendar quarters
    quarter -= quarter[0]
    n_quarters = int(quarter[-1]) + 1
    shock = np.zeros((n_quarters, N_DIRECTIONS))
    shock[0] = rng.normal(0.0, QUARTER_SHOCK_SD, N_DIRECTIONS)
    for q in range(1, n_quarters):
        shock[q] = QUARTER_SHOCK_PHI * shock[q - 1] + rng.normal(0.0, QUARTER_SHOCK_SD, N_DIRECTIONS)
    logits += shock[quarter]
    phi, innov = MONTH_AR_PHI, MONTH_AR_SD
    ar = rng.normal(0.0, innov / np.sqrt(1 - phi**2), N_DIRECTIONS)
    for m in range(n_months):
        if m:
            ar = phi * ar + rng.normal(0.0, innov, N_DIRECTIONS)
        logits[m] += ar
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    # a floor keeps every direction visible before the codebook cutoff (a direction with no
    # pre-cutoff papers could not have been written into the codebook)
    return (1.0 - SHARE_FLOOR * N_DIRECTIONS) * e / e.sum(axis=1, keepdims=True) + SHARE_FLOOR


def _field_volume(rng: np.random.Generator, n_months: int, scale: float) -> np.ndarray:
    t = np.arange(n_months, dtype=np.float64) / 12.0
    base = rng.uniform(26.0, 46.0) * scale
    growth = rng.uniform(0.22, 0.36)
    noise = rng.lognormal(0.0, 0.10, n_months)
    return base * np.exp(growth * t) * noise


# --------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------


@dataclass
class _Membership:
    field: int
    direction: int
    secondary: int | None  # a second direction whose words the text mixes in
    mix: float  # share of direction slots drawn from the secondary
    weak: bool  # direction slots mostly filled with field words (an off-codebook paper)


class _Stream:
    """Uniform draws taken in bulk from the generator (one numpy call per paper, not per word)."""

    def __init__(self, rng: np.random.Generator, n: int = 512) -> None:
        self._rng = rng
        self._u = rng.random(n).tolist()
        self._i = 0

    def u(self) -> float:
        i = self._i
        if i == len(self._u):
            self._u = self._rng.random(len(self._u)).tolist()
            i = 0
        self._i = i + 1
        return self._u[i]

    def pick(self, items: Sequence[str]) -> str:
        return items[int(self.u() * len(items))]

    def index(self, n: int) -> int:
        return int(self.u() * n)


def _fill(template: str, st: _Stream, fb: FieldBlueprint, mem: _Membership, confusion: float) -> str:
    u, pick = st.u, st.pick
    secondary, mix, weak = mem.secondary, mem.mix, mem.weak
    out = []
    for i, part in enumerate(_SLOTS[template]):
        if not i % 2:
            out.append(part)
            continue
        d = mem.direction
        if secondary is not None and u() < mix:
            d = secondary
        if part in ("D", "P") and weak and u() < 0.8:
            out.append(pick(fb.words))
        elif part == "D":
            if u() < confusion:
                d = st.index(N_DIRECTIONS)
            out.append(pick(fb.directions[d].words))
        elif part == "P":
            out.append(fb.directions[d].name)
        elif part == "F":
            out.append(pick(fb.words))
        elif part == "FP":
            out.append(fb.name)
        elif part == "S":
            out.append(pick(_SHARED_WORDS))
        else:  # pragma: no cover - templates are fixed above
            raise AssertionError(part)
    text = "".join(out)
    return text[0].upper() + text[1:]


def _paper_text(
    rng: np.random.Generator, blueprints: tuple[FieldBlueprint, ...], mems: list[_Membership]
) -> tuple[str, str]:
    st = _Stream(rng)
    home = mems[0]
    title = _fill(_TITLE_TEMPLATES[st.index(len(_TITLE_TEMPLATES))], st, blueprints[home.field], home, 0.0)
    sentences = []
    n_sent = 4 + st.index(4)
    for k in range(n_sent):
        mem = mems[k % len(mems)]
        tmpl = _TEMPLATES[st.index(len(_TEMPLATES))]
        sentences.append(_fill(tmpl, st, blueprints[mem.field], mem, confusion=0.12))
    return title, " ".join(sentences)


# --------------------------------------------------------------------------------------------
# Generator
# --------------------------------------------------------------------------------------------


def generate_mini(spec: BenchmarkSpec) -> MiniCorpus:
    """Generate the mini corpus deterministically from ``spec.seed`` (see the module docstring)."""
    n_fields = spec.n_fields
    if not 1 <= n_fields <= len(BLUEPRINTS):
        raise ValueError(f"mini supports 1..{len(BLUEPRINTS)} fields, spec asks for {n_fields}")
    blueprints = BLUEPRINTS[:n_fields]
    rng = np.random.default_rng(spec.seed)
    months = _months(spec)
    n_months = len(months)
    start, end = parse_date(spec.date_start), parse_date(spec.date_end)

    links = [(p, c, f) for p, c, f in _LINKS if p < n_fields and c < n_fields]
    strong_child = {c for p, c, f in links if f >= 0.5}
    shares = np.stack([_field_shares(rng, n_months, months[0].month - 1) for _ in range(n_fields)])  # F x M x 8
    volume = np.stack(
        [_field_volume(rng, n_months, _CHILD_VOLUME if f in strong_child else 1.0) for f in range(n_fields)]
    )
    counts = rng.poisson(volume)  # F x M

    # papers: list of (month index, memberships); memberships of a field in a month are drawn
    # after its parents', so a child can adopt papers its parents already hold.
    papers: list[tuple[int, list[_Membership]]] = []
    order = _topological_fields(n_fields, links)
    by_field_month: dict[tuple[int, int], list[int]] = {}
    for f in order:
        parents = [(p, frac) for p, c, frac in links if c == f]
        for m in range(n_months):
            n = int(counts[f, m])
            chosen: list[int] = []
            for p, frac in parents:
                pool = [i for i in by_field_month.get((p, m), []) if i not in chosen]
                k = min(int(rng.binomial(n, frac)), len(pool), n - len(chosen))
                if k > 0:
                    chosen.extend(int(i) for i in rng.choice(pool, size=k, replace=False))
            new = n - len(chosen)
            for _ in range(new):
                papers.append((m, []))
                chosen.append(len(papers) - 1)
            dirs = rng.choice(N_DIRECTIONS, size=n, p=shares[f, m])
            for i, d in zip(chosen, dirs, strict=True):
                papers[i][1].append(_membership(rng, int(d), shares[f, m], f))
            by_field_month[(f, m)] = chosen

    return _assemble(rng, spec, blueprints, months, start, end, papers, shares, volume)


def _topological_fields(n_fields: int, links: list[tuple[int, int, float]]) -> list[int]:
    """Fields ordered so that every parent precedes its children (links form a DAG)."""
    order: list[int] = []
    remaining = list(range(n_fields))
    while remaining:
        progressed = False
        for f in list(remaining):
            if all(p in order for p, c, _ in links if c == f):
                order.append(f)
                remaining.remove(f)
                progressed = True
        if not progressed:
            raise AssertionError("field links contain a cycle")
    return order


def _membership(rng: np.random.Generator, direction: int, share: np.ndarray, field: int) -> _Membership:
    u = rng.random()
    weak = u < 0.004
    secondary: int | None = None
    mix = 0.0
    if not weak and u < 0.46:
        p = share.copy()
        p[direction] = 0.0
        secondary = int(rng.choice(N_DIRECTIONS, p=p / p.sum()))
        mix = 0.5 if u < 0.025 else float(rng.uniform(0.25, 0.48))
    return _Membership(field=field, direction=direction, secondary=secondary, mix=mix, weak=weak)


def _assemble(
    rng: np.random.Generator,
    spec: BenchmarkSpec,
    blueprints: tuple[FieldBlueprint, ...],
    months: list[dt.date],
    start: dt.date,
    end: dt.date,
    papers: list[tuple[int, list[_Membership]]],
    shares: np.ndarray,
    volume: np.ndarray,
) -> MiniCorpus:
    allowed = tuple(spec.categories)
    rows = []
    for m, mems in papers:
        first_day = max(months[m], start)
        last_day = min(add_months(months[m], 1), end)
        day = first_day + dt.timedelta(days=int(rng.integers((last_day - first_day).days)))
        if rng.random() < 0.0004:
            title, abstract = _LOW_EVIDENCE_TITLE, _LOW_EVIDENCE_ABSTRACT
        else:
            title, abstract = _paper_text(rng, blueprints, mems)
        cats: list[str] = []
        for mem in mems:
            own = [c for c in blueprints[mem.field].categories if c in allowed] or [allowed[0]]
            cats.extend(own[:1])
            if len(own) > 1 and rng.random() < 0.4:
                cats.append(own[int(rng.integers(1, len(own)))])
        n_auth = int(rng.integers(1, 7))
        authors = [
            f"{_FIRST[int(rng.integers(len(_FIRST)))]} {_LAST[int(rng.integers(len(_LAST)))]}" for _ in range(n_auth)
        ]
        rows.append((day, rng.random(), title, abstract, sorted(dict.fromkeys(cats)), authors, mems))

    rows.sort(key=lambda r: (r[0], r[1]))
    ids: list[str] = []
    per_month: dict[tuple[int, int], int] = {}
    for r in rows:
        key = (r[0].year, r[0].month)
        per_month[key] = per_month.get(key, 0) + 1
        ids.append(f"{key[0] % 100:02d}{key[1]:02d}.{per_month[key]:05d}")

    papers_df = pd.DataFrame(
        {
            "arxiv_id": ids,
            "date": [r[0].isoformat() for r in rows],
            "title": [r[2] for r in rows],
            "abstract": [r[3] for r in rows],
            "categories": [r[4] for r in rows],
            "authors": [r[5] for r in rows],
        }
    )
    truth_rows = [
        (pid, blueprints[mem.field].field_id, DIRECTION_KEYS[mem.direction])
        for pid, r in zip(ids, rows, strict=True)
        for mem in r[6]
    ]
    truth = (
        pd.DataFrame(truth_rows, columns=["arxiv_id", "field_id", "true_direction"])
        .sort_values(["field_id", "arxiv_id"], kind="stable")
        .reset_index(drop=True)
    )
    memberships = truth[["arxiv_id", "field_id"]].copy()
    field_info = {fb.field_id: FieldInfo(fb.field_id, fb.name, fb.definition) for fb in blueprints}
    share_rows = []
    for f, fb in enumerate(blueprints):
        for m, month in enumerate(months):
            share_rows.append((fb.field_id, month.isoformat(), *shares[f, m].tolist(), float(volume[f, m])))
    shares_df = pd.DataFrame(share_rows, columns=["field_id", "month", *DIRECTION_KEYS, "volume"])
    return MiniCorpus(
        papers=papers_df,
        memberships=memberships,
        truth=truth,
        field_info=field_info,
        blueprints={fb.field_id: fb for fb in blueprints},
        shares=shares_df,
    )
