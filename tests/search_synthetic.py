"""Generated corpora with realistic token statistics, for search tests and benchmarks.

Token streams are Zipfian: each paper mixes a global Zipf(1.05) background vocabulary with its
home field's own topical vocabulary (Zipf(1.0) over a field-specific subset), lengths are
log-normal around ~110 tokens (a title plus an abstract after stop-word removal), monthly volume
grows over time, field sizes are skewed and papers belong to one home field plus a Poisson number
of further fields. Words are pronounceable letter strings that the shared tokenizer keeps intact.
Everything is a pure function of the arguments (seeded ``numpy.random.Generator``).
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.schemas import MEMBERSHIPS
from rap_benchmark.core.spec import BenchmarkSpec
from rap_benchmark.core.text import STOPWORDS

_CONSONANTS = "bcdfghklmnprstvz"
_VOWELS = "aeiou"


def pseudo_words(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct pronounceable words (2-3 consonant-vowel syllables), none a stop word."""
    syllables = [c + v for c, v in itertools.product(_CONSONANTS, _VOWELS)]
    words = ["".join(s) for s in itertools.product(syllables, repeat=2)]
    if n > len(words) - 100:
        words += ["".join(s) for s in itertools.product(syllables, repeat=3)]
    words = [w for w in words if w not in STOPWORDS]
    if n > len(words):
        raise ValueError(f"at most {len(words)} words available")
    picked = rng.choice(len(words), size=n, replace=False)
    return [words[i] for i in picked]


def _zipf_cdf(n: int, s: float) -> np.ndarray:
    w = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** s
    cdf = np.cumsum(w)
    return cdf / cdf[-1]


@dataclass(frozen=True)
class SyntheticInstance:
    """Instance-like bundle accepted by ``SearchEngine.from_instance`` (no artifact folder)."""

    papers: pd.DataFrame
    assignments: pd.DataFrame
    spec: BenchmarkSpec
    root: Path | None = None

    @property
    def memberships(self) -> pd.DataFrame:
        return self.assignments[MEMBERSHIPS.names]


def zipf_corpus(
    n_papers: int,
    n_fields: int,
    *,
    seed: int,
    vocab_size: int = 50_000,
    mean_tokens: float = 110.0,
    topic_share: float = 0.35,
    topic_vocab: int = 1_500,
    extra_memberships: float = 0.6,
    date_start: str = "2022-06-01",
    date_end: str = "2026-07-01",
    growth: float = 3.0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A generated corpus: ``(papers, assignments)`` with the artifact tables' columns.

    ``growth`` is the ratio of the last month's expected volume to the first's.
    """
    rng = np.random.default_rng(seed)
    vocab = np.asarray(pseudo_words(vocab_size, rng), dtype=object)

    # dates: months with exponentially growing volume, days 1..28
    start, end = parse_date(date_start), parse_date(date_end)
    months = []
    m = start.replace(day=1)
    while m < end:
        months.append(m)
        m = add_months(m, 1)
    w = np.exp(np.log(growth) * np.arange(len(months)) / max(len(months) - 1, 1))
    month_of = np.sort(rng.choice(len(months), size=n_papers, p=w / w.sum()))
    day_of = rng.integers(1, 29, size=n_papers)
    dates = [months[mi] + dt.timedelta(days=int(d) - 1) for mi, d in zip(month_of, day_of, strict=True)]
    order = sorted(range(n_papers), key=lambda i: (dates[i], i))
    dates = [dates[i] for i in order]
    month_sorted = month_of[order]
    counters: dict[int, int] = {}
    ids = []
    for mi in month_sorted.tolist():
        counters[mi] = counters.get(mi, 0) + 1
        ms = months[mi]
        ids.append(f"{ms.year % 100:02d}{ms.month:02d}.{counters[mi]:05d}")

    # fields: skewed sizes; home field plus Poisson extra memberships
    fw = 1.0 / (np.arange(n_fields) + 5.0) ** 0.8
    fw = fw[rng.permutation(n_fields)]
    home = rng.choice(n_fields, size=n_papers, p=fw / fw.sum())
    n_extra = np.minimum(rng.poisson(extra_memberships, size=n_papers), n_fields - 1)
    member_paper = [np.arange(n_papers)]
    member_field = [home]
    for r in range(1, int(n_extra.max(initial=0)) + 1):
        who = np.flatnonzero(n_extra >= r)
        member_paper.append(who)
        member_field.append((home[who] + rng.integers(1, n_fields, size=len(who)) * r) % n_fields)
    paper_col = np.concatenate(member_paper)
    field_col = np.concatenate(member_field)

    # tokens: background Zipf mixed with the home field's topical Zipf
    lengths = np.maximum(5, rng.lognormal(np.log(mean_tokens) - 0.06, 0.35, size=n_papers).astype(np.int64))
    total = int(lengths.sum())
    owner = np.repeat(np.arange(n_papers), lengths)
    background = np.searchsorted(_zipf_cdf(vocab_size, 1.05), rng.random(total))
    topics = np.stack([rng.choice(vocab_size, size=topic_vocab, replace=False) for _ in range(n_fields)])
    topical = topics[home[owner], np.searchsorted(_zipf_cdf(topic_vocab, 1.0), rng.random(total))]
    tokens = np.where(rng.random(total) < topic_share, topical, np.minimum(background, vocab_size - 1))
    words = vocab[tokens]
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    titles, abstracts = [], []
    for i in range(n_papers):
        doc = words[offsets[i] : offsets[i + 1]]
        n_title = min(8, len(doc) // 4 + 1)
        titles.append(" ".join(doc[:n_title]).capitalize())
        abstracts.append(" ".join(doc[n_title:]).capitalize() + ".")
    papers = pd.DataFrame(
        {
            "arxiv_id": ids,
            "date": [d.isoformat() for d in dates],
            "title": [titles[i] for i in order],
            "abstract": [abstracts[i] for i in order],
            "categories": [["cs.LG"]] * n_papers,
            "authors": [[]] * n_papers,
        }
    )
    position = np.empty(n_papers, dtype=np.int64)
    position[np.asarray(order)] = np.arange(n_papers)
    assign = pd.DataFrame({"row": position[paper_col], "field_id": [f"F{f:03d}" for f in field_col]})
    assign = assign.drop_duplicates().sort_values(["field_id", "row"], kind="stable")
    assignments = pd.DataFrame(
        {
            "arxiv_id": papers["arxiv_id"].to_numpy()[assign["row"].to_numpy()],
            "field_id": assign["field_id"].to_numpy(),
            "date": papers["date"].to_numpy()[assign["row"].to_numpy()],
            "primary": "D0",
            "secondary": None,
            "type": "single",
        }
    )
    return papers, assignments


def synthetic_instance(
    n_papers: int = 3_000, n_fields: int = 4, *, seed: int = 0, spec: BenchmarkSpec | None = None, **kwargs
) -> SyntheticInstance:
    """A small Instance-like object over a generated corpus (default spec: the paper's)."""
    papers, assignments = zipf_corpus(n_papers, n_fields, seed=seed, **kwargs)
    return SyntheticInstance(papers=papers, assignments=assignments, spec=spec or BenchmarkSpec())


def manifest_problems(engine: Any, manifest: pd.DataFrame) -> list[str]:
    """Check search_manifest rows (bounds, n_papers, shard_hash) against the universes ``engine``
    serves, with the package's one universe check."""
    from rap_benchmark.bm25.engine import universe_problems
    from rap_benchmark.bm25.index import DAY_MIN
    from rap_benchmark.core.dates import to_days
    from rap_benchmark.core.sums import shard_hash

    problems, served = [], []
    for row in manifest.itertuples(index=False):
        lo, hi = engine.universe_days(row.origin, row.regime)
        if lo != DAY_MIN and to_days(parse_date(row.start)) != lo:
            problems.append(f"{row.field_id}@{row.origin}/{row.regime}: start {row.start} differs")
        if to_days(parse_date(row.end)) != hi:
            problems.append(f"{row.field_id}@{row.origin}/{row.regime}: end {row.end} differs")
        ids = engine.universe_ids(row.field_id, row.origin, row.regime)
        served.append((row.field_id, row.origin, row.regime, len(ids), shard_hash(ids)))
    frame = pd.DataFrame(served, columns=["field_id", "origin", "regime", "n_papers", "shard_hash"])
    return problems + universe_problems(frame, manifest)
