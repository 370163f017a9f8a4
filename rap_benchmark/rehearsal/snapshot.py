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
from the seed; records are streamed, never held.

Run: ``python -m rap_benchmark.rehearsal.snapshot --scale 0.02 --out snapshot.jsonl``.
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


def _wrap(text: str, words_per_line: int = 11) -> str:
    """Hard-wrap like the snapshot (a newline plus two spaces between lines)."""
    words = text.split(" ")
    if len(words) <= words_per_line:
        return text
    return "\n  ".join(" ".join(words[i : i + words_per_line]) for i in range(0, len(words), words_per_line))


def _pick(rng: np.random.Generator, pool: np.ndarray, k: int) -> np.ndarray:
    """``k`` draws with replacement (``rng.choice`` without its per-call shape checks)."""
    return pool[rng.integers(0, len(pool), k)]


def _created(day: dt.date, secs: int) -> str:
    return (
        f"{_DAYS[day.weekday()]}, {day.day} {_MONTHS[day.month - 1]} {day.year} "
        f"{secs // 3600:02d}:{secs // 60 % 60:02d}:{secs % 60:02d} GMT"
    )


class _Writer:
    """Builds each record's text from the topic model (vectorised draws per month)."""

    def __init__(self, topics: Topics, rng: np.random.Generator) -> None:
        self.t = topics
        self.rng = rng
        self.words = np.array(topics.words, dtype=object)
        self.generic = np.array(GENERIC, dtype=object)
        self.physics = np.array(PHYSICS, dtype=object)

    def ml_text(self, field: int, direction: int, second: int | None, n_abs: int) -> tuple[str, str]:
        rng, t = self.rng, self.t
        fw = self.words[t.field_terms[field]]
        dw = self.words[t.direction_terms[field, direction]]
        pool = (
            np.concatenate([fw, dw, dw])
            if second is None
            else np.concatenate([fw, dw, self.words[t.field_terms[second]]])
        )
        title_words = [*_pick(rng, dw, 2), *_pick(rng, fw, 2), *_pick(rng, self.generic, int(rng.integers(2, 6)))]
        title = " ".join(title_words).capitalize()
        k = int(n_abs * 0.45)
        body = np.concatenate([_pick(rng, pool, k), _pick(rng, self.generic, n_abs - k)])
        rng.shuffle(body)
        sentences = [" ".join(body[i : i + 15]).capitalize() + "." for i in range(0, len(body), 15)]
        return title, " ".join(sentences)

    def other_text(self, n_abs: int) -> tuple[str, str]:
        rng = self.rng
        title = " ".join(_pick(rng, self.physics, int(rng.integers(5, 11)))).capitalize()
        body = _pick(rng, self.physics, n_abs)
        return title, " ".join(" ".join(body[i : i + 14]).capitalize() + "." for i in range(0, n_abs, 14))


def _record(
    arxiv_id: str, created: str, update: str, cats: str, title: str, abstract: str, rng: np.random.Generator
) -> bytes:
    n_auth = int(rng.integers(1, 7))
    picks = rng.integers(0, 1 << 30, size=n_auth)
    parsed = [[_LAST[p % len(_LAST)], _FIRST[(p >> 8) % len(_FIRST)], ""] for p in picks.tolist()]
    authors = ", ".join(f"{f} {last}" for last, f, _ in parsed)
    versions = [{"version": "v1", "created": created}]
    if rng.random() < 0.35:
        versions.append({"version": "v2", "created": created})  # a revision (same day is enough here)
    return orjson.dumps(
        {
            "id": arxiv_id,
            "submitter": f"{parsed[0][1]} {parsed[0][0]}",
            "authors": authors,
            "title": _wrap(title),
            "comments": f"{int(rng.integers(4, 40))} pages, {int(rng.integers(1, 12))} figures"
            if rng.random() < 0.7
            else None,
            "journal-ref": None,
            "doi": None,
            "report-no": None,
            "categories": cats,
            "license": "http://creativecommons.org/licenses/by/4.0/" if rng.random() < 0.5 else None,
            "abstract": "  " + _wrap(abstract) + "\n",
            "versions": versions,
            "update_date": update,
            "authors_parsed": parsed,
        }
    )


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
    """The snapshot's lines (bytes, with the newline), in id order."""
    rng = np.random.default_rng([seed, 17])
    plan = Plan.make(scale)
    n_fields = n_fields or max(6, int(round(300 * scale)))
    topics = Topics.make(n_fields, rng)
    w = _Writer(topics, rng)
    # legacy (old-style) ids: 1992-01 .. 2007-03, never in the four categories' frame
    per_month = np.bincount(rng.integers(0, 183, size=plan.legacy), minlength=183)
    for k, n in enumerate(per_month):
        y, m = 1992 + k // 12, 1 + k % 12
        counters: dict[str, int] = {}
        for _ in range(int(n)):
            arch = LEGACY_ARCHIVES[int(rng.integers(len(LEGACY_ARCHIVES)))]
            counters[arch] = counters.get(arch, 0) + 1
            day = dt.date(y, m, int(rng.integers(1, 29)))
            title, abstract = w.other_text(int(rng.integers(60, 140)))
            cat = {"math": "math.AP", "astro-ph": "astro-ph", "cond-mat": "cond-mat.str-el", "cs": "cs.DS"}.get(
                arch, arch
            )
            yield (
                _record(
                    f"{arch}/{y % 100:02d}{m:02d}{counters[arch]:03d}",
                    _created(day, int(rng.integers(0, 86400))),
                    day.isoformat(),
                    cat,
                    title,
                    abstract,
                    rng,
                )
                + b"\n"
            )
    for (y, m), total, n_ml in zip(plan.months, plan.totals, plan.ml, strict=True):
        total, n_ml = int(total), int(n_ml)
        is_ml = np.zeros(total, dtype=bool)
        is_ml[rng.choice(total, size=n_ml, replace=False)] = True
        fields = rng.choice(n_fields, size=total, p=topics.popularity)
        seconds = rng.choice(n_fields, size=total, p=topics.popularity)
        digits = 4 if y < 2015 else 5
        for i in range(total):
            day = dt.date(y, m, int(rng.integers(1, 29)))
            if is_ml[i]:
                f = int(fields[i])
                second = int(seconds[i]) if rng.random() < 0.15 else None
                title, abstract = w.ml_text(f, int(rng.integers(0, 8)), second, int(rng.integers(110, 200)))
                cats = [ML_CATS[f % 4]]
                if rng.random() < 0.45:
                    cats.append((ML_CATS + ML_CROSS)[int(rng.integers(len(ML_CATS) + len(ML_CROSS)))])
            else:
                title, abstract = w.other_text(int(rng.integers(80, 180)))
                cats = [OTHER_CATS[int(rng.integers(len(OTHER_CATS)))]]
            yield (
                _record(
                    f"{y % 100:02d}{m:02d}.{i + 1:0{digits}d}",
                    _created(day, int(rng.integers(0, 86400))),
                    day.isoformat(),
                    " ".join(dict.fromkeys(cats)),
                    title,
                    abstract,
                    rng,
                )
                + b"\n"
            )


def write_snapshot(path: str | Path, scale: float = 1.0, seed: int = 0, n_fields: int | None = None) -> Plan:
    """Stream the snapshot to ``path`` (gzip when it ends in .gz); return its plan (counts)."""
    path = Path(path)
    with atomic_open(path, "wb") as raw:
        _write_lines(raw, path.name.endswith(".gz"), generate(scale, seed, n_fields))
    return Plan.make(scale)


def _write_lines(raw: io.BufferedIOBase, gz: bool, lines: Iterator[bytes]) -> None:
    fh: io.BufferedIOBase = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3) if gz else raw  # type: ignore[assignment]
    try:
        buf: list[bytes] = []
        for line in lines:
            buf.append(line)
            if len(buf) >= 4096:
                fh.write(b"".join(buf))
                buf.clear()
        fh.write(b"".join(buf))
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
