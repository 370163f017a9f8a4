"""A synthetic arXiv metadata snapshot in the real JSON-lines format, at the paper's scale.

One JSON object per line with the public snapshot's keys (``id, submitter, authors, title,
comments, journal-ref, doi, report-no, categories, license, abstract, versions, update_date,
authors_parsed``), its id styles (``hep-th/9901001`` before April 2007, ``0704.0001`` after,
five-digit numbers from 2015), its date format (``Mon, 2 Apr 2007 19:18:42 GMT``), wrapped
titles and abstracts with the snapshot's leading spaces, and records in id order.

At ``scale=1`` there are about 2.4 million records, 356,357 of them in the paper's frame
(first version in [2022-06-01, 2026-07-01) and a cs.CL/cs.LG/cs.AI/cs.CV category). Papers in
the four categories (also before the frame) are written from a latent topic model: a field
(Zipf popularity, about 300 fields at scale 1) with its own terms and eight directions with
theirs, so the offline field and codebook steps find structure. Everything is deterministic
from the seed; records are streamed a month at a time.

Test and benchmark data, kept with the tests (``benchmarks/full_build.py`` runs it for the
full-size rehearsal): ``python tests/arxiv_snapshot.py --scale 0.02 --out snapshot.jsonl``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import io
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from rap_benchmark.core.fsio import atomic_open

PAPER_FRAME = 356_357
TOTAL_RECORDS = 2_400_000
LEGACY_SHARE = 0.06  # old-style ids, before April 2007
FIRST_NEW = (2007, 4)
LAST = (2026, 6)
FRAME_START = (2022, 6)
FRAME_END = (2026, 7)
ML_CATS = ("cs.LG", "cs.CV", "cs.CL", "cs.AI")
ML_CROSS = ("stat.ML", "cs.RO", "eess.IV", "eess.AS", "cs.IR", "cs.NE", "cs.HC", "cs.SD")
OTHER_CATS = (
    "hep-th", "hep-ph", "math.AP", "math.PR", "math.CO", "astro-ph.GA", "astro-ph.CO", "cond-mat.str-el",
    "cond-mat.mtrl-sci", "quant-ph", "physics.optics", "gr-qc", "econ.EM", "q-bio.NC", "cs.CR", "cs.DS", "cs.NI",
    "math.NT", "stat.ME", "nucl-th",
)  # fmt: skip
LEGACY_ARCHIVES = ("hep-th", "hep-ph", "math", "astro-ph", "cond-mat", "quant-ph", "gr-qc", "nucl-th", "cs")
GENERIC = (
    "we propose a novel method that improves performance on standard benchmarks while reducing cost our approach "
    "combines ideas from prior work and achieves state of the art results experiments show consistent gains across "
    "tasks and settings we also analyse the behaviour of the model and release code data and trained models this "
    "enables further research on robust efficient and scalable systems in practice results demonstrate strong "
    "generalisation under distribution shift and limited supervision with fewer parameters and faster inference"
).split()
PHYSICS = (
    "we study the dynamics of the system in the presence of strong coupling and derive exact solutions for the "
    "spectrum the results agree with numerical simulations and observational data we discuss implications for "
    "the phase diagram symmetry breaking boundary conditions and the asymptotic behaviour of correlation functions"
).split()
_SYLL = (
    "ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge gi go ka ke ki ko la le li lo lu ma me mi mo "
    "mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo za ze zi zo"
).split()
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_FIRST = ("A.", "B.", "C.", "D.", "E.", "F.", "G.", "H.", "J.", "K.", "L.", "M.", "N.", "P.", "R.", "S.", "T.", "Y.")
_LAST = (
    "Zhang Wang Li Liu Chen Yang Smith Garcia Muller Rossi Kim Park Singh Kumar Nguyen Tanaka Silva Novak Cohen "
    "Ivanov Dubois Jensen Okafor Haddad Larsen Moreau Schmidt Costa Sato Patel"
).split()


def _months() -> list[tuple[int, int]]:
    out = []
    y, m = FIRST_NEW
    while (y, m) <= LAST:
        out.append((y, m))
        y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    return out


@dataclass(frozen=True)
class Topics:
    """The latent topic model of the ML papers: field and direction terms (pseudo-words)."""

    field_terms: np.ndarray  # (n_fields, 10) indices into words
    direction_terms: np.ndarray  # (n_fields, 8, 6)
    popularity: np.ndarray  # (n_fields,) probabilities
    words: tuple[str, ...]

    @classmethod
    def make(cls, n_fields: int, rng: np.random.Generator) -> Topics:
        n_words = n_fields * 40 + 400
        words: list[str] = []
        seen: set[str] = set()
        while len(words) < n_words:
            w = "".join(rng.choice(_SYLL, size=int(rng.integers(2, 5))))
            if w not in seen:
                seen.add(w)
                words.append(w)
        field_terms = rng.integers(0, n_words, size=(n_fields, 10))
        direction_terms = rng.integers(0, n_words, size=(n_fields, 8, 6))
        pop = 1.0 / np.arange(1, n_fields + 1) ** 0.6
        return cls(field_terms, direction_terms, pop / pop.sum(), tuple(words))


WRAP = 11  # words per abstract line: the snapshot hard-wraps with a newline and two spaces
_SEPS = (" ", "\n  ", "")  # between words, at a wrap, after the last word


class _Vocab:
    """Every word the snapshot writes, each in its twelve spellings (plain or capitalised, with or
    without a closing full stop, followed by a space, a wrap or nothing), so that a text is one
    ``str.join`` over table entries chosen by vectorised index arithmetic."""

    def __init__(self, topics: Topics) -> None:
        self.words = (*topics.words, *GENERIC, *PHYSICS)
        self.generic = np.arange(len(GENERIC)) + len(topics.words)
        self.physics = np.arange(len(PHYSICS)) + len(topics.words) + len(GENERIC)
        self.table = np.array(
            [
                (w.capitalize() if cap else w) + ("." if dot else "") + sep
                for w in self.words
                for cap in (False, True)
                for dot in (False, True)
                for sep in _SEPS
            ],
            dtype=object,
        )

    def texts(self, words: np.ndarray, lengths: np.ndarray, sentence: int | None) -> list[str]:
        """Join ``words`` (flat vocabulary indices) into one text per record of ``lengths`` words:
        capitalised sentences of ``sentence`` words closed by full stops, hard-wrapped every
        :data:`WRAP` words (``sentence=None``: a title, one capitalised run, no stop, no wrap)."""
        ends = np.cumsum(lengths)
        starts = ends - lengths
        pos = np.arange(len(words)) - np.repeat(starts, lengths)
        last = pos == np.repeat(lengths, lengths) - 1
        if sentence is None:
            cap, dot, sep = pos == 0, np.zeros_like(last), np.where(last, 2, 0)
        else:
            cap, dot = pos % sentence == 0, (pos % sentence == sentence - 1) | last
            sep = np.where(last, 2, np.where(pos % WRAP == WRAP - 1, 1, 0))
        spelled = self.table[words * 12 + cap * 6 + dot * 3 + sep].tolist()
        return ["".join(spelled[a:b]) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _pick(rng: np.random.Generator, pools: np.ndarray, sizes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``counts[i]`` draws with replacement from row ``i`` of ``pools`` (its first ``sizes[i]``
    entries), flattened in record order."""
    rows = np.repeat(np.arange(len(counts)), counts)
    return pools[rows, (rng.random(len(rows)) * sizes[rows]).astype(np.int64)]


def _shuffled_within(rng: np.random.Generator, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values`` with each record's run (``rows``: its record number, ascending) in random order."""
    return values[np.lexsort((rng.random(len(values)), rows))]


def _created(day: dt.date, secs: int) -> str:
    return (
        f"{_DAYS[day.weekday()]}, {day.day} {_MONTHS[day.month - 1]} {day.year} "
        f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d} GMT"
    )


def _ml_texts(
    rng: np.random.Generator, v: _Vocab, t: Topics, fields: np.ndarray, seconds: np.ndarray
) -> tuple[list[str], list[str]]:
    """Titles and abstracts of ML papers: a direction's and the field's terms among generic words,
    15% of them also drawing on a second field's terms."""
    n = len(fields)
    direction = rng.integers(0, 8, n)
    second = np.where(rng.random(n) < 0.15, seconds, -1)
    n_abs = rng.integers(110, 200, n)
    n_generic_title = rng.integers(2, 6, n)
    fw = t.field_terms[fields]  # (n, 10)
    dw = t.direction_terms[fields, direction]  # (n, 6)
    other = np.where((second >= 0)[:, None], t.field_terms[np.maximum(second, 0)][:, :6], dw)
    pools = np.concatenate([fw, dw, other, t.field_terms[np.maximum(second, 0)][:, 6:]], axis=1)
    sizes = np.where(second >= 0, 26, 22)
    title = np.concatenate(
        [
            _pick(rng, dw, np.full(n, 6), np.full(n, 2)).reshape(n, 2),
            _pick(rng, fw, np.full(n, 10), np.full(n, 2)).reshape(n, 2),
        ],
        axis=1,
    )
    generic = v.generic[None, :]
    title_generic = _pick(rng, np.broadcast_to(generic, (n, len(GENERIC))), np.full(n, len(GENERIC)), n_generic_title)
    title_rows = np.repeat(np.arange(n), n_generic_title)
    title_words = np.concatenate([title.ravel(), title_generic])
    title_rows = np.concatenate([np.repeat(np.arange(n), 4), title_rows])
    title_words = title_words[np.argsort(title_rows, kind="stable")]
    k = (n_abs * 0.45).astype(np.int64)
    topical = _pick(rng, pools, sizes, k)
    plain = _pick(rng, np.broadcast_to(generic, (n, len(GENERIC))), np.full(n, len(GENERIC)), n_abs - k)
    rows = np.concatenate([np.repeat(np.arange(n), k), np.repeat(np.arange(n), n_abs - k)])
    body = _shuffled_within(rng, np.concatenate([topical, plain]), rows)
    return v.texts(title_words, 4 + n_generic_title, None), v.texts(body, n_abs, 15)


def _other_texts(rng: np.random.Generator, v: _Vocab, n_abs: np.ndarray) -> tuple[list[str], list[str]]:
    """Titles and abstracts of papers outside the four categories (physics-like boilerplate)."""
    n = len(n_abs)
    n_title = rng.integers(5, 11, n)
    physics = np.broadcast_to(v.physics[None, :], (n, len(PHYSICS)))
    sizes = np.full(n, len(PHYSICS))
    titles = _pick(rng, physics, sizes, n_title)
    return v.texts(titles, n_title, None), v.texts(_pick(rng, physics, sizes, n_abs), n_abs, 14)


def _records(
    rng: np.random.Generator,
    ids: list[str],
    days: list[dt.date],
    cats: list[str],
    titles: list[str],
    abstracts: list[str],
) -> bytes:
    """The JSON lines of one batch of records (authors, comments, licence, versions drawn here)."""
    n = len(ids)
    n_auth = rng.integers(1, 7, n)
    picks = rng.integers(0, 1 << 30, int(n_auth.sum())).tolist()
    secs = rng.integers(0, 86400, n).tolist()
    revised = (rng.random(n) < 0.35).tolist()
    commented = (rng.random(n) < 0.7).tolist()
    pages, figures = rng.integers(4, 40, n).tolist(), rng.integers(1, 12, n).tolist()
    licensed = (rng.random(n) < 0.5).tolist()
    lines = []
    at = 0
    for i, (n_a, day) in enumerate(zip(n_auth.tolist(), days, strict=True)):
        parsed = [[_LAST[p % len(_LAST)], _FIRST[(p >> 8) % len(_FIRST)], ""] for p in picks[at : at + n_a]]
        at += n_a
        created = _created(day, secs[i])
        versions = [{"version": "v1", "created": created}]
        if revised[i]:
            versions.append({"version": "v2", "created": created})  # a revision (same day is enough here)
        lines.append(
            orjson.dumps(
                {
                    "id": ids[i],
                    "submitter": f"{parsed[0][1]} {parsed[0][0]}",
                    "authors": ", ".join(f"{f} {last}" for last, f, _ in parsed),
                    "title": titles[i],
                    "comments": f"{pages[i]} pages, {figures[i]} figures" if commented[i] else None,
                    "journal-ref": None,
                    "doi": None,
                    "report-no": None,
                    "categories": cats[i],
                    "license": "http://creativecommons.org/licenses/by/4.0/" if licensed[i] else None,
                    "abstract": "  " + abstracts[i] + "\n",
                    "versions": versions,
                    "update_date": day.isoformat(),
                    "authors_parsed": parsed,
                }
            )
        )
    lines.append(b"")
    return b"\n".join(lines)


@dataclass(frozen=True)
class Plan:
    """How many records each month gets, and how many of them are ML papers."""

    months: list[tuple[int, int]]
    totals: np.ndarray
    ml: np.ndarray
    legacy: int

    @classmethod
    def make(cls, scale: float) -> Plan:
        months = _months()
        idx = np.arange(len(months), dtype=np.float64)
        weights = 2500 + 14500 * idx / (len(months) - 1)
        n_new = TOTAL_RECORDS * (1 - LEGACY_SHARE) * scale
        totals = np.floor(weights / weights.sum() * n_new + 0.5).astype(np.int64)
        in_frame = np.array([FRAME_START <= m < FRAME_END for m in months])
        target = int(round(PAPER_FRAME * scale))
        share_in = target / max(int(totals[in_frame].sum()), 1)
        ml = np.where(in_frame, 0, np.floor(totals * (0.04 + 0.30 * idx / len(months)))).astype(np.int64)
        frame_totals = totals[in_frame]
        frame_ml = np.floor(frame_totals * share_in).astype(np.int64)
        frame_ml[-1] += target - int(frame_ml.sum())  # exactly the target in frame
        ml[in_frame] = np.minimum(frame_ml, frame_totals)
        legacy = int(round(TOTAL_RECORDS * LEGACY_SHARE * scale))
        return cls(months, totals, ml, legacy)

    @property
    def n_records(self) -> int:
        return int(self.totals.sum()) + self.legacy

    @property
    def n_in_frame(self) -> int:
        return int(sum(ml for m, ml in zip(self.months, self.ml, strict=True) if FRAME_START <= m < FRAME_END))


def generate(scale: float = 1.0, seed: int = 0, n_fields: int | None = None) -> Iterator[bytes]:
    """The snapshot's lines in id order, in chunks of whole lines (bytes, each line with its newline)."""
    rng = np.random.default_rng([seed, 17])
    plan = Plan.make(scale)
    n_fields = n_fields or max(6, int(round(300 * scale)))
    topics = Topics.make(n_fields, rng)
    v = _Vocab(topics)
    legacy_cat = {"math": "math.AP", "astro-ph": "astro-ph", "cond-mat": "cond-mat.str-el", "cs": "cs.DS"}
    # legacy (old-style) ids: 1992-01 .. 2007-03, never in the four categories' frame
    per_month = np.bincount(rng.integers(0, 183, size=plan.legacy), minlength=183)
    for k, n in enumerate(per_month.tolist()):
        if not n:
            continue
        y, m = 1992 + k // 12, 1 + k % 12
        counters: dict[str, int] = {}
        ids, cats = [], []
        for a in rng.integers(0, len(LEGACY_ARCHIVES), n).tolist():
            arch = LEGACY_ARCHIVES[a]
            counters[arch] = counters.get(arch, 0) + 1
            ids.append(f"{arch}/{y % 100:02d}{m:02d}{counters[arch]:03d}")
            cats.append(legacy_cat.get(arch, arch))
        days = [dt.date(y, m, d) for d in rng.integers(1, 29, n).tolist()]
        titles, abstracts = _other_texts(rng, v, rng.integers(60, 140, n))
        yield _records(rng, ids, days, cats, titles, abstracts)
    all_cats = ML_CATS + ML_CROSS
    for (y, m), total, n_ml in zip(plan.months, plan.totals.tolist(), plan.ml.tolist(), strict=True):
        is_ml = np.zeros(total, dtype=bool)
        is_ml[rng.choice(total, size=n_ml, replace=False)] = True
        fields = rng.choice(n_fields, size=total, p=topics.popularity)
        seconds = rng.choice(n_fields, size=total, p=topics.popularity)
        ml_at, other_at = np.flatnonzero(is_ml), np.flatnonzero(~is_ml)
        titles: list[str] = [""] * total
        abstracts: list[str] = [""] * total
        cats: list[str] = [""] * total
        ml_titles, ml_abstracts = _ml_texts(rng, v, topics, fields[ml_at], seconds[ml_at])
        cross = np.where(rng.random(len(ml_at)) < 0.45, rng.integers(0, len(all_cats), len(ml_at)), -1)
        for i, f, c, title, abstract in zip(
            ml_at.tolist(), fields[ml_at].tolist(), cross.tolist(), ml_titles, ml_abstracts, strict=True
        ):
            primary = ML_CATS[f % 4]
            titles[i], abstracts[i] = title, abstract
            cats[i] = primary if c < 0 or all_cats[c] == primary else f"{primary} {all_cats[c]}"
        other_titles, other_abstracts = _other_texts(rng, v, rng.integers(80, 180, len(other_at)))
        other_cats = rng.integers(0, len(OTHER_CATS), len(other_at)).tolist()
        for i, c, title, abstract in zip(other_at.tolist(), other_cats, other_titles, other_abstracts, strict=True):
            titles[i], abstracts[i], cats[i] = title, abstract, OTHER_CATS[c]
        digits = 4 if y < 2015 else 5
        ids = [f"{y % 100:02d}{m:02d}.{i:0{digits}d}" for i in range(1, total + 1)]
        days = [dt.date(y, m, d) for d in rng.integers(1, 29, total).tolist()]
        yield _records(rng, ids, days, cats, titles, abstracts)


def write_snapshot(path: str | Path, scale: float = 1.0, seed: int = 0, n_fields: int | None = None) -> Plan:
    """Stream the snapshot to ``path`` (gzip when it ends in .gz); return its plan (counts)."""
    path = Path(path)
    with atomic_open(path, "wb") as raw:
        _write_lines(raw, path.name.endswith(".gz"), generate(scale, seed, n_fields))
    return Plan.make(scale)


def _write_lines(raw: io.BufferedIOBase, gz: bool, lines: Iterator[bytes]) -> None:
    fh: io.BufferedIOBase = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3) if gz else raw  # type: ignore[assignment]
    try:
        for chunk in lines:
            fh.write(chunk)
    finally:
        if gz:
            fh.close()  # writes the gzip trailer; the atomic writer closes and renames the file


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output .jsonl (or .jsonl.gz)")
    p.add_argument("--scale", type=float, default=1.0, help="1.0 = the paper's scale (about 2.4M records)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fields", type=int, help="latent fields of the ML papers (default 300 x scale)")
    args = p.parse_args(argv)
    plan = write_snapshot(args.out, args.scale, args.seed, args.fields)
    print(orjson.dumps({"records": plan.n_records, "in_frame": plan.n_in_frame}).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
