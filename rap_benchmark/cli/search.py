"""``rap search``: query an episode universe (``rap audit search`` replays recorded calls)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from rap_benchmark.core.errors import InputError

if TYPE_CHECKING:
    from rap_benchmark.core.artifacts import Instance

EPILOG = """examples:
  rap search build/mini --field f003 --origin 2025-01-01 --regime fixed "graph neural network"
  rap search build/mini --field f003 --origin 2025-01-01 --regime expanding "diffusion" \\
      --start 2024-01-01 --end 2024-06-30 --json

The first form prints the ranked papers as a table (--json prints exactly the observation JSON
an agent receives). --start/--end narrow the universe (end inclusive) and never widen it: a
paper dated on or after the origin is never returned. To check that recorded Search calls
replay exactly, use rap audit search.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "search",
        help="search an episode universe (BM25)",
        description="Field-local BM25 search over one (field, origin, regime) universe of a built instance.",
        epilog=EPILOG,
    )
    p.add_argument("target", metavar="DIR", help="built instance folder")
    # REMAINDER + a second, intermixed parse: options may come before or after the query words
    p.add_argument("rest", nargs=argparse.REMAINDER, metavar="QUERY", help="the query")
    _add_options(p)
    p.set_defaults(func=run)


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--field", help="field id")
    p.add_argument("--origin", help="forecast origin T, YYYY-MM-DD")
    p.add_argument("--regime", choices=["fixed", "expanding"], default="fixed", help="search universe (default fixed)")
    p.add_argument("--start", default=None, help="narrow: earliest date to include, YYYY-MM-DD")
    p.add_argument("--end", default=None, help="narrow: latest date to include (inclusive), YYYY-MM-DD")
    p.add_argument("--json", action="store_true", help="print the exact observation JSON an agent would get")
    p.add_argument("--backend", choices=["auto", "numba", "numpy"], default="auto", help=argparse.SUPPRESS)


def _check_call(inst: Instance, field: str, origin: str, query: str, start: str | None, end: str | None) -> None:
    """Refuse what the engine would answer silently: an origin the instance does not have (its
    universe would reach into a target window), an unknown field, a query without searchable
    terms, and a window whose start is after its end. Dates are YYYY-MM-DD only."""
    from rap_benchmark.core.dates import parse_date
    from rap_benchmark.core.text import query_terms

    universes = inst.search_manifest
    mine = universes[universes["field_id"].astype(str) == field]
    if mine.empty:
        raise InputError(f"--field {field!r}: the instance has no such field (rap info lists them)")
    day = parse_date(origin).isoformat()
    origins = sorted({str(o)[:10] for o in mine["origin"]})
    if day not in origins:
        raise InputError(f"--origin {origin}: not an origin of this instance (its origins: {', '.join(origins)})")
    if not query_terms(query):
        raise InputError("the query has no searchable terms (stop words and one-character tokens are ignored)")
    first = parse_date(start) if start is not None else None
    last = parse_date(end) if end is not None else None
    if first is not None and last is not None and first > last:
        raise InputError(f"--start {start} is after --end {end}: the window is empty")


def run(args: argparse.Namespace) -> int:
    from rap_benchmark.cli import RapArgumentParser

    inner = RapArgumentParser(prog="rap search", add_help=False)
    _add_options(inner)
    inner.add_argument("words", nargs="*")
    rest = args.rest
    args.rest = None
    args = inner.parse_intermixed_args(rest, namespace=args)
    args.rest = args.words
    if not args.field or not args.origin or not args.rest:
        raise InputError("DIR, --field, --origin and a query are required (see rap search --help)")
    from rap_benchmark.bm25 import SearchEngine
    from rap_benchmark.bm25.tool import observation_json
    from rap_benchmark.core.artifacts import load_instance

    inst = load_instance(args.target)
    query = " ".join(args.rest)
    _check_call(inst, args.field, args.origin, query, args.start, args.end)
    engine = SearchEngine.from_instance(inst, backend=args.backend, progress=sys.stderr.isatty())
    obs = engine.search(args.field, args.origin, args.regime, query, start=args.start, end=args.end)
    if args.json:
        print(observation_json(obs))
        return 0
    print(f"{args.field} @ {args.origin} ({args.regime}): {obs.total_hits} papers match {query!r}")
    for rank, hit in enumerate(obs.hits, 1):
        title = hit.title if len(hit.title) <= 70 else hit.title[:67] + "..."
        print(f"{rank:>2}  {hit.score:8.4f}  {hit.date}  {hit.arxiv_id:<12}  {title}")
    return 0
