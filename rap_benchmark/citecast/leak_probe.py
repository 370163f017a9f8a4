"""The leak probe: can the backdated tools reveal the answer?

For the N most-cited tasks, search through an environment client (the title, and the title +
" citations"), fetch every returned url, and scan every text for citation figures ("cited by 12",
``"citationCount": 12``, ...). A figure in a text about the paper (carrying its arXiv id or
normalised title) at or above the band's lower bound is a leak. The probe uses an agent's tools,
never submits, and closes its sessions.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rap_benchmark.citecast.client import EnvClient
from rap_benchmark.citecast.records import CiteTask
from rap_benchmark.citecast.tasks import DEFAULT_BANDS, bands_by_name, normalise_title
from rap_benchmark.core.serial import Record

_NUM = r"(\d{1,3}(?:,\d{3})+|\d+)"
CITATION_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"cited\s+by\s+" + _NUM, re.I),
    re.compile(_NUM + r"\s+(?:citations?|cites)\b", re.I),
    re.compile(r"\"?citation_?count\"?\s*[:=]\s*" + _NUM, re.I),
    re.compile(r"citations?\s*(?:count)?\s*[:=]\s*" + _NUM, re.I),
    re.compile(_NUM + r"\s+times\s+cited", re.I),
    re.compile(r"times\s+cited\s*[:=]?\s*" + _NUM, re.I),
    re.compile(r"citation\s+count\s+(?:of|is|was|reached)\s+" + _NUM, re.I),
)


def citation_figures(text: str) -> list[int]:
    """Every citation figure the patterns find in ``text`` (in order of pattern, then position)."""
    out = []
    for pat in CITATION_PATTERNS:
        out.extend(int(m.group(1).replace(",", "")) for m in pat.finditer(text))
    return out


def _about(text: str, task: CiteTask) -> bool:
    if task.paper.arxiv_id in text:
        return True
    title = normalise_title(task.paper.title)
    return bool(title) and title in normalise_title(text)


@dataclass(frozen=True)
class ProbeRow(Record):
    task_id: str
    arxiv_id: str
    target: int
    band: str
    band_lo: int
    n_searches: int
    n_fetches: int
    max_figure_any: int | None
    max_figure_about: int | None
    leak: bool  # a figure about the paper reached the band's lower bound


def probe_task(client: EnvClient, task: CiteTask, band_lo: int) -> ProbeRow:
    started = client.start(task.task_id)
    sid = started["session_id"]
    texts: list[tuple[str, bool]] = []
    urls: list[str] = []
    queries = [task.paper.title, f"{task.paper.title} citations"]
    for q in queries:
        results = client.call(sid, "web_search", {"query": q})["observation"]
        for r in results:
            blob = f"{r['title']}\n{r['snippet']}"
            texts.append((blob, _about(blob, task)))
            if r["url"] not in urls:
                urls.append(r["url"])
    for url in urls:
        page = client.call(sid, "web_fetch", {"url": url})["observation"]
        texts.append((page["text"], _about(page["text"], task)))
    client.close(sid)
    any_figs = [f for t, _ in texts for f in citation_figures(t)]
    about_figs = [f for t, about in texts if about for f in citation_figures(t)]
    max_about = max(about_figs) if about_figs else None
    return ProbeRow(
        task_id=task.task_id,
        arxiv_id=task.paper.arxiv_id,
        target=task.target,
        band=task.band,
        band_lo=band_lo,
        n_searches=len(queries),
        n_fetches=len(urls),
        max_figure_any=max(any_figs) if any_figs else None,
        max_figure_about=max_about,
        leak=max_about is not None and max_about >= band_lo and band_lo > 0,
    )


def run_leak_probe(
    client: EnvClient, tasks: Sequence[CiteTask], n: int = 25, *, progress: bool = False
) -> list[ProbeRow]:
    """Probe the ``n`` most-cited tasks (ties by task id)."""
    from tqdm import tqdm

    bands = bands_by_name(DEFAULT_BANDS)
    top = sorted(tasks, key=lambda t: (-t.target, t.task_id))[:n]
    return [
        probe_task(client, t, bands[t.band].lo if t.band in bands else 0)
        for t in tqdm(top, desc="leak probe", file=sys.stderr, disable=not progress)
    ]


def summarise(rows: Sequence[ProbeRow]) -> dict[str, Any]:
    figs_any = [r.max_figure_any for r in rows if r.max_figure_any is not None]
    return {
        "n_probed": len(rows),
        "n_leaks": sum(r.leak for r in rows),
        "largest_figure_any": max(figs_any) if figs_any else None,
        "n_tasks_with_figure_about": sum(r.max_figure_about is not None for r in rows),
    }
