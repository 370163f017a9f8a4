"""CiteCast: forecast a January 2026 arXiv paper's Semantic Scholar citations on 2026-08-23,
researching through backdated web tools frozen at 2026-01-31.

    harvest   arXiv API listings + v1 metadata, Semantic Scholar batch snapshot (injectable fetch)
    tasks     exclusions, citation bands, stratified mix, within-band hash split, task files
    webcorpus frozen crawl-dated corpus (JSONL, WARC) and its per-cutoff views
    tools     web_search, web_fetch, submit_prediction (typed functions; docstrings = schemas)
    env       one-shot submission, reward, modes (training / evaluation); server and client share it
    sessions  session stores: SQLite (WAL, one machine's workers) and redis_sessions (several machines)
    server    the routes; httpserver: the workers' HTTP/1.1; serving: supervisor and workers
    webindex  the cutoff view as memory-mapped files (what the workers share)
    scoring   evaluation-mode results from a session store
    reward    1 / cosh(2 |ln((p+1)/(t+1))|)
    baselines blind constant, per-category constant, band oracle (sweep with per-task rewards)
    leak_probe  backdated searches/fetches for the most-cited tasks, scanned for citation figures
    embedded  the offline instance (generated tasks, documented target model, generated corpus)
"""

from rap_benchmark.citecast.baselines import SweepResult, best_constant, sweep, write_sweep
from rap_benchmark.citecast.client import HttpClient, InProcessClient
from rap_benchmark.citecast.embedded import EmbeddedConfig, TargetModel, build_embedded
from rap_benchmark.citecast.env import CiteCastEnv
from rap_benchmark.citecast.errors import SessionClosed, UnknownSession, UnknownTask
from rap_benchmark.citecast.instance import CiteCastInstance, load_instance
from rap_benchmark.citecast.leak_probe import citation_figures, run_leak_probe
from rap_benchmark.citecast.records import (
    DEFAULT_CUTOFF,
    DEFAULT_SNAPSHOT,
    CitationRecord,
    CiteTask,
    PaperMeta,
    SubCorpus,
    TaskSpec,
    TaskSplit,
    WebDocument,
)
from rap_benchmark.citecast.reward import reward, rewards
from rap_benchmark.citecast.tasks import DEFAULT_BANDS, DEFAULT_MIX, Band, build_tasks
from rap_benchmark.citecast.tools import ToolArgumentError, tool_schemas
from rap_benchmark.citecast.webcorpus import WebCorpus

__all__ = [
    "DEFAULT_BANDS",
    "DEFAULT_CUTOFF",
    "DEFAULT_MIX",
    "DEFAULT_SNAPSHOT",
    "Band",
    "CitationRecord",
    "CiteCastEnv",
    "CiteCastInstance",
    "CiteTask",
    "EmbeddedConfig",
    "HttpClient",
    "InProcessClient",
    "PaperMeta",
    "SessionClosed",
    "SubCorpus",
    "SweepResult",
    "TargetModel",
    "TaskSpec",
    "TaskSplit",
    "ToolArgumentError",
    "UnknownSession",
    "UnknownTask",
    "WebCorpus",
    "WebDocument",
    "best_constant",
    "build_embedded",
    "build_tasks",
    "citation_figures",
    "load_instance",
    "reward",
    "rewards",
    "run_leak_probe",
    "sweep",
    "tool_schemas",
    "write_sweep",
]
