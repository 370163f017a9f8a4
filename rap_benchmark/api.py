"""The public verbs: build, load, verify, search, run, validate, score, export.

Each is a thin, documented wrapper over the subpackage that does the work; the examples below
run as written (``tests/test_api.py`` executes them on the embedded mini instance, from an empty
working folder). The subpackages a verb drives (pipeline, search, agents, evaluation, hub) and the
artifact tables (pandas, pyarrow) are imported inside it, so ``import rap_benchmark`` loads only the
core records and the spec (``tests/test_cli_imports.py``).

After ``rap.build("mini", "build/mini")`` (the embedded synthetic instance, see :func:`build`):

>>> import rap_benchmark as rap
>>> inst = rap.load("build/mini")              # hashes verified, every table schema-checked
>>> inst.spec.name, len(inst.field_ids)
('mini', 12)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rap_benchmark.core.errors import InputError
from rap_benchmark.core.records import Condition, Policy, Regime, SearchObservation, Split, parse_enum
from rap_benchmark.core.spec import BenchmarkSpec, spec_for
from rap_benchmark.core.sums import verify as _verify

if TYPE_CHECKING:
    import pandas as pd

    from rap_benchmark.agents.protocol import Backend
    from rap_benchmark.agents.runner import RunStats, ToolProvider
    from rap_benchmark.core.artifacts import Instance, PublicInstance
    from rap_benchmark.evaluation.predictions import ValidationReport
    from rap_benchmark.hub.export import ExportResult
    from rap_benchmark.llmclient.pricing import PriceTable

PathLike = str | Path


def build(spec: BenchmarkSpec | str, out: PathLike, *, source: PathLike | None = None, progress: bool = False) -> Path:
    """Build every artifact of an instance into ``out`` (replaced atomically) and return ``out``.

    ``spec`` is a :class:`BenchmarkSpec` or a shipped name (``"mini"``, ``"arxiv-sample"``).
    ``source=None`` generates the synthetic mini corpus from the spec; otherwise ``source`` is an
    arXiv metadata folder (parquet or JSON lines). The same spec and source always give the same
    bytes (``tests/test_manifests.py``).

    >>> import rap_benchmark as rap
    >>> rap.build("mini", "build/mini").name
    'mini'
    """
    from rap_benchmark.pipeline.build import build_instance

    spec = spec if isinstance(spec, BenchmarkSpec) else spec_for(spec)
    return build_instance(spec, Path(out), None if source is None else Path(source), progress=progress)


def load(path: PathLike, *, verify_hashes: bool = True) -> Instance:
    """Load a built instance: every file checked against ``SHA256SUMS`` (unless ``verify_hashes``
    is False) and every table against its schema. Agents get ``load(path).public_view()``.

    >>> import rap_benchmark as rap
    >>> inst = rap.load("build/mini")
    >>> sorted(inst.episodes["policy"].unique()) == sorted(p.value for p in rap.Policy)
    True
    >>> {"y", "n_y"} & set(inst.public_view().episodes.columns)
    set()
    """
    from rap_benchmark.core.artifacts import load_instance

    return load_instance(path, verify_hashes=verify_hashes)


def verify(path: PathLike) -> list[str]:
    """The problems found checking an instance folder against its ``SHA256SUMS`` (empty: verified).

    >>> import rap_benchmark as rap
    >>> rap.verify("build/mini")
    []
    """
    return _verify(path)


def search(
    instance: Instance | PublicInstance,
    query: str,
    *,
    field_id: str,
    origin: str,
    regime: Regime = Regime.FIXED,
    start: str | None = None,
    end: str | None = None,
) -> SearchObservation:
    """One Search call exactly as an agent makes it: BM25 over the field's papers in the universe
    of (``field_id``, ``origin``, ``regime``), optionally narrowed to ``[start, end]`` (inclusive
    dates; nothing on or after ``origin`` is ever visible). Each call builds the engine; the token
    table is cached in the instance's ``.cache/``, so the first call is the slow one.

    >>> import rap_benchmark as rap
    >>> inst = rap.load("build/mini")
    >>> obs = rap.search(inst, "graph neural networks", field_id="f000", origin="2025-01-01")
    >>> obs.total_hits > 0, all(hit.date < "2025-01-01" for hit in obs.hits)
    (True, True)
    """
    from rap_benchmark.bm25 import SearchEngine

    engine = SearchEngine.from_instance(instance)
    return engine.search(field_id, origin, parse_enum(Regime, regime), query, start=start, end=end)


def run(
    instance: Instance | PublicInstance,
    backend: Backend | str,
    out: PathLike,
    *,
    model: str | None = None,
    conditions: Sequence[Condition] = tuple(Condition),
    fields: Iterable[str] | None = None,
    origins: Iterable[str] | None = None,
    concurrency: int = 4,
    limit: int | None = None,
    shard: tuple[int, int] = (0, 1),
    max_tokens: int | None = None,
    max_search_calls: int | None = None,
    prices: PriceTable | None = None,
    tools: ToolProvider | None = None,
    backend_name: str = "",
    progress: bool = False,
) -> tuple[RunStats, Path]:
    """Run (or resume) an agent over the instance's episodes into the run folder ``out``; return
    the run's statistics and its prediction file (``out/predictions.jsonl``).

    The agent only ever sees ``instance.public_view()`` (no target). ``backend`` is a backend
    object (see ``rap_benchmark.agents``: OpenAI-compatible, transformers) or the name of a
    reference agent (``"reference/search-hits"``, ``"reference/uniform"``); its predictions are
    recorded under ``model`` (a reference agent's own name by default). ``conditions``, ``fields``
    and ``origins`` choose the units (default: every condition, field and origin);
    ``concurrency`` units run at once; ``limit`` runs at most that many not-yet-done units;
    ``shard=(i, n)`` runs only the units whose key hashes to shard ``i`` of ``n``;
    ``max_tokens`` and ``max_search_calls`` override the benchmark's completion cap and Search
    budget; ``prices`` is the price table for cost (default: the packaged one); ``tools`` replaces
    the Search tool binding (default: the instance's BM25 Search); ``backend_name`` is recorded in
    the run's ``run.json``. A restart with the same
    arguments skips the units already done.

    >>> import rap_benchmark as rap
    >>> inst = rap.load("build/mini")
    >>> stats, preds = rap.run(inst, "reference/search-hits", "runs/ref", conditions=[rap.Condition.A1], limit=6)
    >>> stats.valid, preds.name
    (6, 'predictions.jsonl')
    """
    from rap_benchmark.agents.reference import ReferenceBackend
    from rap_benchmark.agents.runner import run_benchmark
    from rap_benchmark.core.artifacts import Instance

    if isinstance(backend, str):
        backend = ReferenceBackend(backend)
        model = model or backend.name
    if model is None:
        raise InputError("run: pass model=, the name the predictions are recorded under")
    view = instance.public_view() if isinstance(instance, Instance) else instance
    conditions = [parse_enum(Condition, c) for c in conditions]
    return run_benchmark(
        view,
        backend,
        out,
        model=model,
        conditions=conditions,
        fields=fields,
        origins=origins,
        concurrency=concurrency,
        limit=limit,
        shard=shard,
        max_tokens=max_tokens,
        max_search_calls=max_search_calls,
        prices=prices,
        tools=tools,
        backend_name=backend_name,
        progress=progress,
    )


def validate(
    predictions: PathLike | pd.DataFrame, instance: Instance, *, split: Split | None = None
) -> ValidationReport:
    """Check a prediction file (JSONL or parquet) or frame against the instance; every problem is
    named (file, line, column). Never raises on bad content: read ``report.ok`` and ``report.problems``.
    With ``split`` only that split's episodes are expected.

    >>> import rap_benchmark as rap
    >>> inst = rap.load("build/mini")
    >>> report = rap.validate("runs/ref/predictions.jsonl", inst)
    >>> report.scorable, report.n_rows_read
    (True, 6)
    """
    from rap_benchmark.evaluation.predictions import validate_predictions

    return validate_predictions(predictions, instance, split=split)


@dataclass(frozen=True)
class ScoreResult:
    """What :func:`score` returns: the leaderboard (with ``coverage`` and ``rank``: only rows that
    cover every expected episode are ranked), the per-episode scores, every problem the validator
    reported (one line each, prefixed by the file) and ``ok`` (no file had an error). The
    leaderboard ranks the Forecast conditions; ``state`` scores the State conditions (A2, A4)
    against x (State fidelity) and y (State-as-Forecast), empty when there are none."""

    leaderboard: pd.DataFrame
    episodes: pd.DataFrame
    problems: tuple[str, ...]
    ok: bool
    state: pd.DataFrame | None = None  # State conditions (A2, A4): fidelity to x, and y as a forecast


def score(
    instance: Instance,
    predictions: PathLike | Sequence[PathLike],
    *,
    split: Split | None = Split.TEST,
    policy: Policy = Policy.CANONICAL,
    n_resamples: int | None = None,
    seed: int | None = None,
) -> ScoreResult:
    """Validate and score prediction files, as ``rap score`` does: one leaderboard row per (model,
    condition) with field-macro scores on ``split`` (``None``: all episodes) and block-bootstrap
    95% intervals. Rows the validator refuses are not scored, and a (model, condition) belongs to
    the first file that holds it; ``problems`` says what was dropped and why.

    >>> import rap_benchmark as rap
    >>> inst = rap.load("build/mini")
    >>> result = rap.score(inst, "runs/ref/predictions.jsonl", split=None, n_resamples=50)
    >>> result.leaderboard[["model", "condition"]].values.tolist()
    [['reference/search-hits', 'A1']]
    >>> len(result.episodes)
    6
    """
    import pandas as pd

    from rap_benchmark.evaluation.predictions import (
        combine_validated,
        keep_first_owner,
        n_expected_episodes,
        validate_predictions,
    )
    from rap_benchmark.evaluation.report.aggregates import leaderboard, state_table
    from rap_benchmark.evaluation.scoring import score_predictions
    from rap_benchmark.evaluation.submissions import apply_ranking_rule

    split = None if split is None else parse_enum(Split, split)
    files = [predictions] if isinstance(predictions, str | Path) else list(predictions)
    reports = keep_first_owner([validate_predictions(p, instance, split=split) for p in files])
    preds, problems = combine_validated(reports)
    ok = all(r.ok for r in reports)
    if not len(preds):
        return ScoreResult(pd.DataFrame(), pd.DataFrame(), tuple(problems), ok)
    episodes = score_predictions(instance, preds, policy=parse_enum(Policy, policy))
    board = leaderboard(episodes, instance, n_resamples=n_resamples, seed=seed, split=split)
    missing = {k: v for r in reports for k, v in r.missing.items()}
    board = apply_ranking_rule(board, missing, n_expected_episodes(instance, split))
    state = state_table(instance, preds, n_resamples=n_resamples, seed=seed, split=split)
    return ScoreResult(board, episodes, tuple(problems), ok, state)


def export(
    instance: Instance,
    hub_dir: PathLike,
    *,
    org: str = "rap",
    withhold_test_targets: bool = False,
    withhold_from: str | None = None,
    citecast: PathLike | None = None,
    repos: Sequence[str] | None = None,
    salt_file: PathLike | None = None,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Write the instance as Hugging Face dataset repos under ``hub_dir/<org>/`` (parquet files,
    a dataset card and a manifest each). ``withhold_test_targets`` keeps Test targets from the
    last origin on (or from ``withhold_from``) out of the public repos, committed as salted
    hashes; the salt and targets go to ``hub_dir/_private/``. ``citecast`` adds a CiteCast task folder;
    ``repos`` writes a subset; ``progress`` is called with each repo's name as it is written.

    >>> import rap_benchmark as rap
    >>> result = rap.export(rap.load("build/mini"), "hub", repos=["fields", "splits"])
    >>> sorted(result.repos)
    ['fields', 'splits']
    """
    from rap_benchmark.hub.export import citecast_frame, citecast_is_synthetic, export_instance

    if withhold_from is None and withhold_test_targets:
        withhold_from = max(instance.spec.origins)
    return export_instance(
        instance,
        hub_dir,
        org=org,
        withhold_from=withhold_from,
        salt_file=salt_file,
        citecast_tasks=None if citecast is None else citecast_frame(citecast),
        citecast_synthetic=citecast is not None and citecast_is_synthetic(citecast),
        repos=repos,
        progress=progress,
    )
