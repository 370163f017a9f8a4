"""The embedded offline CiteCast instance: generated tasks with model-drawn targets and a
crawl-dated corpus, built with no network.

Papers: the January 2026 (``2601.*``) papers of the RAP ``mini`` corpus
(:func:`rap_benchmark.pipeline.synth.generate_mini`), each in a field with a latent direction whose share
of the field's papers rises or falls month by month.

Targets (Semantic Scholar count on the snapshot day) follow a documented generative model::

    momentum_i = ln(mean share of the paper's direction, 2025-11..2026-01)
               - ln(mean share, 2025-05..2025-07)
               + ln(field volume ratio, same windows)                 (clipped to [-2, 2])
    fame_a     ~ N(0, 1) per author name;   F_i = max fame over the paper's authors
    quality_i  ~ N(0, 1)                    (latent; visible only through early reception)
    ln mu_i    = b0 + b_m momentum_i + b_a ln(n_authors_i) + b_f F_i + b_q quality_i
    t_i        ~ NegativeBinomial(shape k, mean mu_i)

with the coefficients of :class:`TargetModel`. An agent can research each driver before the
cutoff: topic momentum (field trend pages and the arXiv sub-corpus itself), author track
records (profile pages whose h-index follows fame), and early reception (news articles for
high-quality papers that quote a January citation count ~ Binomial(t_i, early_fraction)).

Corpus (``WebDocument`` crawls): arxiv, every mini paper from ``mini_from`` on (crawled on its v1
date) plus, given ``../shared/data/arxiv``, its papers in ``real_window`` (generated ids win); web,
author profiles (re-crawled after the cutoff with higher counts), field trend pages (two crawls
before the cutoff, one after) and, crawled only after it, citation trackers for the most-cited
papers (the bait that must never leak); news, early-reception articles (some crawled after the
cutoff), re-crawled in June 2026 with the then-current count.

The harvest side has withdrawn, missing and duplicate-id Semantic Scholar papers; the snapshot
goes through the real batch parser (:func:`~rap_benchmark.citecast.harvest.snapshot_citations`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rap_benchmark.citecast.harvest import HttpRequest, snapshot_citations
from rap_benchmark.citecast.instance import write_instance
from rap_benchmark.citecast.records import (
    DEFAULT_CUTOFF,
    DEFAULT_SNAPSHOT,
    CitationRecord,
    PaperMeta,
    SubCorpus,
    WebDocument,
)
from rap_benchmark.citecast.tasks import TaskSet, build_tasks
from rap_benchmark.citecast.webcorpus import WebCorpus
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.serial import to_dict

PROFILE_HOST = "https://profiles.example.org"
NEWS_HOST = "https://news.example.com"
TRENDS_HOST = "https://trends.example.net"
TRACKER_HOST = "https://citations.example.org"


@dataclass(frozen=True)
class TargetModel:
    """Coefficients of the target model (see the module docstring)."""

    b0: float = -0.2
    b_momentum: float = 1.0
    b_authors: float = 0.35
    b_fame: float = 0.6
    b_quality: float = 1.3
    nb_shape: float = 0.8
    early_fraction: float = 0.06  # share of the final count already visible in January
    news_quality: float = 0.9  # papers with quality above this get early-reception news


@dataclass(frozen=True)
class EmbeddedConfig:
    seed: int = 20260131
    n_tasks: int = 330  # 300 train / 30 test (the card's 2,000 / 200 proportion)
    cutoff: str = DEFAULT_CUTOFF.isoformat()
    snapshot_date: str = DEFAULT_SNAPSHOT.isoformat()
    mini_from: str = "2025-01-01"  # mini papers from this day on enter the arxiv sub-corpus
    real_window: tuple[str, str] = ("2025-12-01", "2026-03-01")  # [start, end) of shared papers used
    withdrawn_rate: float = 0.01
    missing_rate: float = 0.02
    duplicate_s2_rate: float = 0.005
    model: TargetModel = field(default_factory=TargetModel)


def _rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([seed, int(hashlib.sha256(stream.encode()).hexdigest()[:8], 16)])


def _slug(text: str) -> str:
    return "-".join("".join(ch.lower() if ch.isalnum() else " " for ch in text).split())


def _month_mean(shares: pd.DataFrame, field_id: str, months: list[str], col: str) -> float:
    sub = shares[(shares["field_id"] == field_id) & (shares["month"].isin(months))]
    return float(sub[col].mean()) if len(sub) else float("nan")


def _momentum(shares: pd.DataFrame, field_id: str, direction: str) -> float:
    recent = ["2025-11-01", "2025-12-01", "2026-01-01"]
    before = ["2025-05-01", "2025-06-01", "2025-07-01"]
    s1, s0 = _month_mean(shares, field_id, recent, direction), _month_mean(shares, field_id, before, direction)
    v1, v0 = _month_mean(shares, field_id, recent, "volume"), _month_mean(shares, field_id, before, "volume")
    m = np.log(max(s1, 1e-6) / max(s0, 1e-6)) + np.log(max(v1, 1e-6) / max(v0, 1e-6))
    return float(np.clip(m if np.isfinite(m) else 0.0, -2.0, 2.0))


@dataclass(frozen=True)
class Generated:
    papers: list[PaperMeta]
    latent: pd.DataFrame  # arxiv_id, field_id, direction, momentum, fame, quality, log_mu, target, early
    withdrawn: list[str]
    citations: list[CitationRecord]
    fame: dict[str, float]
    mini: Any  # the MiniCorpus


def generate_cohort(config: EmbeddedConfig) -> Generated:
    """The cohort, its latent drivers and targets, and its Semantic Scholar snapshot."""
    from rap_benchmark.core.spec import mini_spec
    from rap_benchmark.pipeline.synth import generate_mini

    mini = generate_mini(mini_spec().replace(seed=config.seed))
    papers_df = mini.papers[mini.papers["arxiv_id"].str.startswith("2601.")].sort_values("arxiv_id")
    truth = mini.truth.sort_values(["arxiv_id", "field_id"]).drop_duplicates("arxiv_id").set_index("arxiv_id")
    model = config.model
    names = sorted({a for authors in mini.papers["authors"] for a in authors})
    fame = dict(zip(names, _rng(config.seed, "fame").standard_normal(len(names)).tolist(), strict=True))
    rng = _rng(config.seed, "targets")
    papers, rows = [], []
    momentum_cache: dict[tuple[str, str], float] = {}
    for rec in papers_df.itertuples(index=False):
        tr = truth.loc[rec.arxiv_id]
        fb = mini.blueprints[tr.field_id]
        cats = list(rec.categories)
        primary = next((c for c in fb.categories if c in cats), cats[0])
        papers.append(
            PaperMeta(rec.arxiv_id, rec.title, rec.abstract, tuple(rec.authors), primary, parse_date(rec.date))
        )
        key = (tr.field_id, tr.true_direction)
        if key not in momentum_cache:
            momentum_cache[key] = _momentum(mini.shares, *key)
        f = max((fame[a] for a in rec.authors), default=0.0)
        q = float(rng.standard_normal())
        log_mu = (
            model.b0
            + model.b_momentum * momentum_cache[key]
            + model.b_authors * np.log(max(len(rec.authors), 1))
            + model.b_fame * f
            + model.b_quality * q
        )
        mu = float(np.exp(log_mu))
        t = int(rng.negative_binomial(model.nb_shape, model.nb_shape / (model.nb_shape + mu)))
        early = int(rng.binomial(t, model.early_fraction))
        rows.append((rec.arxiv_id, tr.field_id, tr.true_direction, momentum_cache[key], f, q, log_mu, t, early))
    latent = pd.DataFrame(
        rows, columns=["arxiv_id", "field_id", "direction", "momentum", "fame", "quality", "log_mu", "target", "early"]
    )
    # harvest-side realism: withdrawn, missing and duplicate-S2 papers
    hrng = _rng(config.seed, "harvest")
    ids = latent["arxiv_id"].tolist()
    u = hrng.random((len(ids), 3))
    withdrawn = [a for a, x in zip(ids, u[:, 0], strict=True) if x < config.withdrawn_rate]
    s2_rows: list[dict[str, Any] | None] = []
    for i, (aid, t) in enumerate(zip(ids, latent["target"], strict=True)):
        if u[i, 1] < config.missing_rate:
            s2_rows.append(None)
            continue
        twin = ids[i - 1] if i and u[i, 2] < config.duplicate_s2_rate else aid  # merged record in S2
        s2_rows.append(
            {
                "paperId": hashlib.sha1(f"s2:{twin}".encode()).hexdigest(),
                "title": papers[i].title,
                "citationCount": int(t),
            }
        )
    by_id = dict(zip(ids, s2_rows, strict=True))

    def s2_fetch(req: HttpRequest) -> bytes:  # answers batch requests like the real endpoint
        asked = [x.removeprefix("ARXIV:") for x in req.json_body["ids"]]
        return json.dumps([by_id.get(a) for a in asked]).encode()

    citations = snapshot_citations(s2_fetch, ids, parse_date(config.snapshot_date), delay_s=0)
    return Generated(papers, latent, withdrawn, citations, fame, mini)


def _paper_doc(
    arxiv_id: str, date: dt.date, title: str, authors: list[str], cats: list[str], abstract: str
) -> WebDocument:
    text = (
        f"arXiv:{arxiv_id} [{', '.join(cats)}]\nAuthors: {', '.join(authors)}\n"
        f"Submitted on {date.isoformat()}\n\nAbstract: {abstract}"
    )
    return WebDocument(f"https://arxiv.org/abs/{arxiv_id}", date, SubCorpus.ARXIV, title, text)


def _shares_at(shares: pd.DataFrame, field_id: str, month: str) -> pd.Series:
    sub = shares[(shares["field_id"] == field_id) & (shares["month"] <= month)].sort_values("month")
    return sub.iloc[-1]


def generate_documents(
    gen: Generated, config: EmbeddedConfig, arxiv_source: Path | None = None
) -> Iterator[WebDocument]:
    mini, latent, model = gen.mini, gen.latent.set_index("arxiv_id"), config.model
    rng = _rng(config.seed, "documents")
    cutoff = parse_date(config.cutoff)
    # arxiv: the generated papers
    mini_ids = set(mini.papers["arxiv_id"])
    frames = [mini.papers[mini.papers["date"] >= config.mini_from]]
    # arxiv: real papers (optional)
    if arxiv_source is not None and Path(arxiv_source).is_dir():
        import pyarrow.dataset as ds

        lo, hi = config.real_window
        files = sorted(str(f) for f in Path(arxiv_source).glob("*.parquet"))
        table = ds.dataset(files, format="parquet").to_table(
            columns=["arxiv_id", "title", "abstract", "authors", "categories", "date"],
            filter=(ds.field("date") >= lo) & (ds.field("date") < hi),
        )
        real = table.to_pandas().sort_values("arxiv_id")
        frames.append(real[~real["arxiv_id"].isin(mini_ids)])
    for frame in frames:
        for r in frame.itertuples(index=False):
            yield _paper_doc(r.arxiv_id, parse_date(r.date), r.title, list(r.authors), list(r.categories), r.abstract)
    # web: author profiles (before and after the cutoff)
    task_authors = sorted({a for p in gen.papers for a in p.authors})
    counts = pd.Series([a for authors in mini.papers["authors"] for a in authors]).value_counts()
    for name in task_authors:
        phi = gen.fame[name]
        h = int(round(np.exp(2.2 + 0.6 * phi)))
        cites = int(round(h * h * float(np.exp(1.2 + 0.3 * rng.standard_normal()))))
        url = f"{PROFILE_HOST}/{_slug(name)}"
        for day, grow in ((dt.date(2025, 11, 15), 1.0), (dt.date(2026, 7, 1), 1.35)):
            text = (
                f"{name}. Researcher profile. h-index {int(round(h * (1 + (grow - 1) / 3)))}; "
                f"{int(round(cites * grow)):,} total citations across {int(counts.get(name, 0))} indexed papers. "
                f"Research interests span machine learning, language and vision."
            )
            yield WebDocument(url, day, SubCorpus.WEB, f"{name} - research profile", text)
    # web: field trend pages (three crawls of one url)
    for fid, fb in sorted(mini.blueprints.items()):
        url = f"{TRENDS_HOST}/fields/{_slug(fb.name)}"
        for day in (dt.date(2025, 10, 2), dt.date(2026, 1, 5), dt.date(2026, 4, 2)):
            now = _shares_at(mini.shares, fid, (day.replace(day=1) - dt.timedelta(days=1)).replace(day=1).isoformat())
            then = _shares_at(
                mini.shares, fid, (day.replace(day=1) - dt.timedelta(days=190)).replace(day=1).isoformat()
            )
            lines = [f"Research trends in {fb.name} (monthly arXiv volume about {now['volume']:.0f} papers)."]
            for d in fb.directions:
                lines.append(
                    f"{d.name}: {100 * then[d.key]:.1f}% of papers six months ago, {100 * now[d.key]:.1f}% now."
                )
            yield WebDocument(url, day, SubCorpus.WEB, f"Trends: {fb.name}", "\n".join(lines))
    # news: early reception (and a June re-crawl of the same url)
    by_paper = {p.arxiv_id: p for p in gen.papers}
    for aid, row in latent.iterrows():
        p = by_paper[aid]
        if row["quality"] > model.news_quality:
            day = p.date + dt.timedelta(days=int(rng.integers(3, 21)))
            url = f"{NEWS_HOST}/{day.year}/{day.month:02d}/{_slug(p.title)[:60]}"
            early = int(row["early"])
            lead = f"A new preprint from {', '.join(p.authors[:3])} (arXiv:{aid}), '{p.title}', is drawing attention."
            buzz = (
                f" It has already been cited by {early} papers." if early else " Researchers are discussing it online."
            )
            yield WebDocument(url, day, SubCorpus.NEWS, p.title, lead + buzz + f" {p.abstract[:400]}")
            later = int(round(row["target"] * 0.75))
            yield WebDocument(
                url,
                dt.date(2026, 6, 15),
                SubCorpus.NEWS,
                p.title,
                lead + f" Update: it has now been cited by {later} papers.",
            )
    # web: citation trackers, crawled only after the cutoff (must never be served)
    for aid, row in latent[latent["target"] >= 26].iterrows():
        p = by_paper[aid]
        yield WebDocument(
            f"{TRACKER_HOST}/arxiv/{aid}",
            max(cutoff + dt.timedelta(days=1), dt.date(2026, 8, 1)),
            SubCorpus.WEB,
            f"{p.title} - citation tracker",
            f'{p.title} (arXiv:{aid}). Cited by {int(row["target"])}. "citationCount": {int(row["target"])}',
        )


def build_embedded(
    out_dir: str | Path,
    config: EmbeddedConfig = EmbeddedConfig(),  # noqa: B008 - frozen
    *,
    arxiv_source: str | Path | None = None,
    progress: bool = False,
) -> Path:
    """Generate the embedded instance into ``out_dir`` (see the module docstring)."""

    def say(msg: str) -> None:
        if progress:
            print(f"[citecast embedded] {msg}", file=sys.stderr)

    say("generating the cohort (mini corpus, latent drivers, targets, S2 snapshot)")
    gen = generate_cohort(config)
    task_set: TaskSet = build_tasks(gen.papers, gen.citations, gen.withdrawn, n_total=config.n_tasks)
    say(f"{len(task_set.tasks)} tasks from {task_set.n_eligible} eligible papers; building the corpus")
    source = Path(arxiv_source) if arxiv_source is not None else None
    corpus = WebCorpus(generate_documents(gen, config, source))
    provenance = {
        "instance": "embedded",
        "config": to_dict(config),
        "arxiv_source": "shared arXiv sample" if source is not None and source.is_dir() else None,
        "target_model": __doc__.split("Targets")[1].split("Corpus")[0].strip(),
    }
    say(f"{len(corpus)} crawls; writing")
    return write_instance(
        out_dir,
        task_set,
        corpus,
        cutoff=parse_date(config.cutoff),
        snapshot_date=parse_date(config.snapshot_date),
        provenance=provenance,
    )
