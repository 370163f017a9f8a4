"""The lm-eval (0.4.13) ``citecast`` task: CiteCast tasks with the research loop run inside the task.

It plugs into lm-eval's evaluator as :class:`~rap_benchmark.integrations.lmeval.task.RapTask` does
(same model discovery, same batched rounds):

1. one document per CiteCast task of a split (the task id only: paper, band and target stay in
   the environment); the first turn is the environment's system prompt with the text tool
   protocol (:data:`rap_benchmark.agents.citecast.CITECAST_TEXT_PROTOCOL`) and its task prompt;
2. ``apply_filters`` continues every task with :class:`rap_benchmark.agents.citecast.CiteCastUnit`
   (the unit ``rap citecast run`` runs) against an in-process client of
   :class:`~rap_benchmark.citecast.env.CiteCastEnv`, so the research cutoff, the call limit and
   the one-shot submission are the server's own rules; at most ``max_tool_calls`` web calls,
   then a forced ``<submit>integer</submit>``;
3. each instance's ``resps`` holds the episode record as JSON and ``filtered_resps["none"]`` its
   final reply; ``process_results`` reads the reward the environment gave (0 without an accepted
   submission).

Metrics: ``reward`` (mean CiteCast reward over tasks, invalid episodes scoring 0), ``valid``
(share of tasks with an accepted submission) and ``n_tool_calls`` (mean web calls).

Metadata keys (YAML ``metadata:`` or ``--metadata``): ``citecast_dir`` (the instance folder, see
:func:`rap_benchmark.integrations.citecast_source.citecast_dir`), ``split`` (train, test or all;
default test), ``max_tool_calls`` (default 8), ``max_observation_chars``.
"""

from __future__ import annotations

from typing import Any

from rap_benchmark.agents.citecast import (
    CITECAST_TEXT_PROTOCOL,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MAX_TOOL_CALLS,
    MAX_OBSERVATION_CHARS,
    CiteCastUnit,
)
from rap_benchmark.agents.protocol import CiteCastContext, Request
from rap_benchmark.agents.store import TaskKey
from rap_benchmark.citecast.client import InProcessClient
from rap_benchmark.citecast.prompt import SYSTEM_PROMPT, render_prompt
from rap_benchmark.citecast.tools import tool_schemas
from rap_benchmark.core.spec import CITECAST_VERSION
from rap_benchmark.integrations.citecast_source import (  # noqa: F401 - the task's instance helpers, re-exported
    CITECAST_DIR_ENV,
    DOC_SPLITS,
    citecast_dir,
    citecast_docs,
    citecast_env,
    ensure_embedded,
)
from rap_benchmark.integrations.lmeval.task import (
    ToolLoopTask,
    mean_finite,
    placeholder_metric,
    task_config,
    valid_metric,
)
from rap_benchmark.integrations.scores import citecast_metrics
from rap_benchmark.integrations.source import docs_dataset

DEFAULT_MAX_GEN_TOKS = DEFAULT_MAX_TOKENS
MODEL_LABEL = "lm-eval"


# -- the documents ---------------------------------------------------------------------------------


def _load_docs(**metadata: Any) -> Any:
    """``custom_dataset`` hook: lm-eval calls it with the task metadata (plus model args)."""
    docs = citecast_docs(citecast_env(metadata), str(metadata.get("split", "test")))
    return docs_dataset(docs, ("task_id", "split"), ())


# -- metric functions (module level: lm-eval deep-copies and serialises task configs) ----------


reward_metric = placeholder_metric("reward", __name__)
n_tool_calls_metric = placeholder_metric("n_tool_calls", __name__)

METRIC_LIST: list[dict[str, Any]] = [
    {"metric": reward_metric, "aggregation": mean_finite, "higher_is_better": True},
    {"metric": valid_metric, "aggregation": mean_finite, "higher_is_better": True},
    {"metric": n_tool_calls_metric, "aggregation": mean_finite, "higher_is_better": None},  # a count, not a score
]


class CiteCastTask(ToolLoopTask):
    """CiteCast as an lm-eval task (see the module docstring)."""

    VERSION = CITECAST_VERSION
    LABEL = "CiteCast tasks"

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        cfg, meta = task_config(config, CITECAST_VERSION)
        self.env = citecast_env(meta)
        self.client = InProcessClient(self.env)
        self.max_tool_calls = int(meta.get("max_tool_calls") or DEFAULT_MAX_TOOL_CALLS)
        self.max_observation_chars = int(meta.get("max_observation_chars") or MAX_OBSERVATION_CHARS)
        self.init_task(
            cfg,
            meta,
            name="citecast",
            docs=_load_docs,
            until=list(CITECAST_TEXT_PROTOCOL.tool_turn_stops),
            max_gen_toks=DEFAULT_MAX_GEN_TOKS,
            metric_list=METRIC_LIST,
        )

    def unit_for(self, doc: dict[str, Any]) -> CiteCastUnit:
        """The runner's CiteCast unit of a document (its session is opened when the episode runs)."""
        task_id = doc["task_id"]
        return CiteCastUnit(
            TaskKey(MODEL_LABEL, task_id),
            CiteCastContext(MODEL_LABEL, task_id, doc["split"]),
            self.client,
            self.max_tokens(),
            self.max_tool_calls,
            self.max_observation_chars,
        )

    def record_id(self, doc: dict[str, Any]) -> str:
        return str(doc["task_id"])

    def default_max_tokens(self) -> int:
        return DEFAULT_MAX_GEN_TOKS

    def first_request(self, doc: dict[str, Any]) -> Request:
        """The first request of a task's episode, as the environment's ``start`` and the episode
        loop write it, without opening a session (one is opened when the episode runs)."""
        paper = self.env.tasks[doc["task_id"]].paper
        messages = ({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": render_prompt(paper)})
        return Request(messages, tuple(tool_schemas()), "auto", self.max_tokens(), text_protocol=CITECAST_TEXT_PROTOCOL)

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        return self.first_request(doc).text_messages()[-1]["content"]

    def doc_to_target(self, doc: dict[str, Any], doc_to_target: Any = None) -> str:
        return ""  # the target stays in the environment

    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        if "bypass" in getattr(self, "_metric_fn_list", {}):
            return {"bypass": None}
        return citecast_metrics(self._records.get(doc["task_id"], {}))
