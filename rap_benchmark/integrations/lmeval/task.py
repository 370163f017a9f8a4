"""The lm-eval (0.4.13) task: RAP episodes with the Search loop run inside the task.

How it plugs into ``lm_eval.evaluator.evaluate`` (the internals it relies on are checked by
``tests/test_lm_eval_tasks.py::test_evaluator_internals_the_task_relies_on``):

1. ``build_all_requests(..., chat_template=lm.apply_chat_template)``: the task builds the first
   turn of every episode. The model for the later rounds (:meth:`ToolLoopTask.evaluation_lm`) is
   the owner of the bound ``chat_template`` (with ``--apply_chat_template``), else the local
   ``lm`` of the running ``evaluate`` frame (lm-eval passes the model to a task nowhere else).
2. After the evaluator's first batched ``generate_until``, ``apply_filters`` continues every
   episode with the agents' loop (:mod:`rap_benchmark.integrations.lmeval.rounds`): Search calls
   run with the project's tool and all open episodes go to ``lm.generate_until`` together, round
   after round, until each has its final answer. The same model object serves every round.
   lm-eval's ``vllm`` with ``data_parallel_size > 1`` reloads the model on every call, so it is
   refused; use ``tensor_parallel_size``, or ``vllm serve --data-parallel-size N`` with
   ``local-completions`` / ``local-chat-completions``.
3. Each instance's ``resps`` holds the unit's record as JSON and ``filtered_resps["none"]`` its
   final answer, which ``process_results`` scores with the project's parser and Spearman
   (``spearman`` and ``state_fidelity`` aggregate field-macro). An episode without a defined
   score (invalid answer, constant target) adds no value, as in the scorer, so the results never
   hold a bare NaN; a condition with no defined score has no ``spearman`` entry at all.

Contexts are strings, or lm-eval's ``JsonChatStr`` for chat API models (``local-chat-completions``
with ``--apply_chat_template``).

Metadata keys (YAML ``metadata:`` or ``--metadata``): ``condition`` (A0..A4, set by each YAML),
``instance_dir``, ``split`` (dev, test or all; default test), ``max_search_calls``, ``answer_prefill`` (default
false: open every answer turn with ``{"D0": `` for the model to continue, for small models that
otherwise never produce the answer format; recorded per turn; string contexts only).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from typing import Any

import numpy as np
from lm_eval.api.instance import Instance as LmInstance
from lm_eval.api.task import ConfigurableTask

from rap_benchmark.agents import prompts
from rap_benchmark.agents.protocol import Request
from rap_benchmark.agents.runner import SearchTools, default_max_tokens, native_units
from rap_benchmark.agents.toolset import search_text_protocol
from rap_benchmark.core.records import Condition, Task
from rap_benchmark.core.spec import BENCHMARK_VERSION, package_version
from rap_benchmark.evaluation.scoring import field_macro
from rap_benchmark.integrations.lmeval.rounds import EpisodeJob, run_batched
from rap_benchmark.integrations.scores import episode_metrics
from rap_benchmark.integrations.source import docs_dataset, episode_docs, instance_for
from rap_benchmark.tools.text import stops_for

FILTER_KEY = "none"
MODEL_LABEL = "lm-eval"


# -- metric functions (module level: lm-eval deep-copies and serialises task configs) ----------


def field_macro_pairs(items: list[Any]) -> float:
    """Aggregate ``(field_id, value)`` pairs field-macro (mean within field over finite values,
    then across fields), exactly as the scorer does."""
    if not items:
        return float("nan")
    fids = np.array([str(i[0]) for i in items], dtype=object)
    vals = np.array([np.nan if i[1] is None else float(i[1]) for i in items], dtype=np.float64)
    return field_macro(vals, fids)


def mean_finite(items: list[Any]) -> float:
    vals = np.asarray([float(v) for v in items], dtype=np.float64)
    return float(vals.mean()) if vals.size else float("nan")


def placeholder_metric(name: str, module: str = __name__) -> Callable[..., None]:
    """A metric function named ``name`` for ``metric_list`` (lm-eval wants one per metric; the
    values come from ``process_results``), bound in ``module`` as ``<name>_metric``."""

    def metric(references: Any = None, predictions: Any = None, **kwargs: Any) -> None:
        return None

    metric.__name__, metric.__qualname__, metric.__module__ = name, f"{name}_metric", module
    return metric


spearman_metric = placeholder_metric("spearman")
state_fidelity_metric = placeholder_metric("state_fidelity")
valid_metric = placeholder_metric("valid")
n_search_calls_metric = placeholder_metric("n_search_calls")


def _metric_list(condition: Condition) -> list[dict[str, Any]]:
    out = [{"metric": spearman_metric, "aggregation": field_macro_pairs, "higher_is_better": True}]
    if condition.task is Task.STATE:
        out.append({"metric": state_fidelity_metric, "aggregation": field_macro_pairs, "higher_is_better": True})
    out.append({"metric": valid_metric, "aggregation": mean_finite, "higher_is_better": True})
    # a count to read, not a score: more calls are neither better nor worse
    out.append({"metric": n_search_calls_metric, "aggregation": mean_finite, "higher_is_better": None})
    return out


def _load_docs(**metadata: Any) -> Any:
    """``custom_dataset`` hook: lm-eval calls it with the task metadata (plus model args)."""
    inst = instance_for(metadata)
    return docs_dataset(episode_docs(inst, Condition(metadata["condition"]), split=str(metadata.get("split", "test"))))


# -- rendering ---------------------------------------------------------------------------------


def render_plain(messages: list[dict[str, str]]) -> str:
    """A chat as plain text, for models run without ``--apply_chat_template``."""
    parts = [f"{m['role'].capitalize()}:\n{m['content']}" for m in messages]
    return "\n\n".join(parts) + "\n\nAssistant:\n"


def make_renderer(chat_template: Callable[..., Any] | None) -> Callable[[Request], Any]:
    """Request -> context (a string, or lm-eval's ``JsonChatStr`` for chat API models), with the
    request's text-protocol rendering of the messages."""

    def render(request: Request) -> str:
        msgs = request.text_messages()
        if chat_template is None:
            return render_plain(msgs)
        return chat_template(msgs, add_generation_prompt=True)

    return render


def window_check(lm: Any) -> Callable[[str, dict[str, Any]], str | None] | None:
    """A check that refuses contexts the model would truncate (``lm.max_length`` tokens in all)."""
    max_length = getattr(lm, "max_length", None)
    encode = getattr(lm, "tok_encode", None)
    if not isinstance(max_length, int) or encode is None:
        return None

    def check(ctx: str, kwargs: dict[str, Any]) -> str | None:
        n = len(encode(ctx))
        new = int(kwargs.get("max_gen_toks", 0))
        if n + new > max_length:
            return f"context overflow: {n} prompt + {new} new tokens > max_length {max_length} (raise max_length)"
        return None

    return check


def evaluator_lm() -> Any:
    """The model of the running ``lm_eval.evaluator.evaluate`` call (its local ``lm``)."""
    frame = inspect.currentframe()
    try:
        while frame is not None:
            code = frame.f_code
            if code.co_name == "evaluate" and frame.f_globals.get("__name__") == "lm_eval.evaluator":
                return frame.f_locals.get("lm")
            frame = frame.f_back
    finally:
        del frame
    return None


def check_reusable(lm: Any) -> None:
    """Refuse a model that would be loaded again on every search round (lm-eval's ``vllm`` with
    ``data_parallel_size > 1`` starts new Ray workers in every ``generate_until`` call)."""
    if int(getattr(lm, "data_parallel_size", 1) or 1) > 1 and type(lm).__module__.startswith("lm_eval.models.vllm"):
        raise ValueError(
            "lm-eval's vllm model with data_parallel_size > 1 reloads the model in new workers on every "
            "generate_until call, and the RAP and CiteCast tasks call it once per search round: use "
            "data_parallel_size=1 with tensor_parallel_size=N, or serve the model with `vllm serve "
            "--data-parallel-size N` and evaluate with --model local-completions / local-chat-completions"
        )


def task_config(config: dict[str, Any] | None, version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The YAML's task config (without ``class``) and its metadata: ``version`` (lm-eval's task
    version, ``version`` unless the YAML states one) and ``package_version``, the rap_benchmark
    package's."""
    cfg = {k: v for k, v in (config or {}).items() if k != "class"}
    meta = dict(cfg.get("metadata") or {})
    meta.setdefault("version", version)
    meta["package_version"] = package_version()
    return cfg, meta


class ToolLoopTask(ConfigurableTask):
    """What the RAP and CiteCast tasks share: the config, the evaluation's model, a document's
    first context, and running every document's runner unit through the one episode loop over
    batched ``generate_until`` rounds. Subclasses call :meth:`init_task` and define
    :meth:`unit_for`, :meth:`record_id` and :meth:`process_results`."""

    LABEL = "this task"  # how refusals name the task
    _lm: Any
    _chat_template: Callable[..., Any] | None
    _records: dict[str, dict[str, Any]]
    unit_tools: Any = None  # handed to each unit's open() (RAP: the Search tool provider)

    def init_task(
        self,
        cfg: dict[str, Any],
        meta: dict[str, Any],
        *,
        name: str,
        docs: Callable[..., Any],
        until: list[str],
        max_gen_toks: int,
        metric_list: list[dict[str, Any]],
    ) -> None:
        """Build the lm-eval config (the YAML's keys win where given) and initialise the task."""
        self._lm = None
        self._chat_template = None
        self._records = {}
        full: dict[str, Any] = {
            "task": cfg.get("task") or name,
            "tag": cfg.get("tag"),
            "custom_dataset": docs,
            "test_split": "test",
            # episodes are the test split only, zero-shot: a YAML cannot add another split or examples
            "training_split": None,
            "validation_split": None,
            "fewshot_split": None,
            "fewshot_config": None,
            "output_type": "generate_until",
            "generation_kwargs": {"until": until, "max_gen_toks": max_gen_toks, "do_sample": False, "temperature": 0.0},
            "metric_list": metric_list,
            "num_fewshot": 0,
            "metadata": meta,
        }
        for key, value in cfg.items():
            if key not in full and key != "metadata":
                full[key] = value
        if isinstance(cfg.get("generation_kwargs"), dict):
            full["generation_kwargs"].update(cfg["generation_kwargs"])
        ConfigurableTask.__init__(self, config=full)

    # -- what a subclass defines ---------------------------------------------------------------
    def unit_for(self, doc: dict[str, Any]) -> Any:
        """The agent runner's unit of a document."""
        raise NotImplementedError

    def record_id(self, doc: dict[str, Any]) -> str:
        """The key under which a document's episode record is kept for process_results."""
        raise NotImplementedError

    def answer_prefill_text(self) -> str:
        return ""

    # -- shared (the config has only a test split and no few-shot source) -------------------------
    def max_tokens(self) -> int:
        return int((self.config.generation_kwargs or {}).get("max_gen_toks") or self.default_max_tokens())

    def default_max_tokens(self) -> int:
        raise NotImplementedError

    def first_request(self, doc: dict[str, Any]) -> Request:
        """The first request of a document's episode, as the episode loop writes it."""
        episode = self.unit_for(doc).open(self.unit_tools)
        tools = episode.tools
        return Request(
            messages=tuple(episode.messages),
            tools=tools.schemas if tools is not None else None,
            tool_choice="auto" if tools is not None else None,
            max_tokens=episode.max_tokens,
            temperature=episode.temperature,
            text_protocol=tools.text_protocol if tools is not None else None,
        )

    def fewshot_context(
        self,
        doc: dict[str, Any],
        num_fewshot: int,
        system_instruction: str | None = None,
        apply_chat_template: bool = False,
        fewshot_as_multiturn: bool = False,
        chat_template: Callable[..., Any] | None = None,
        gen_prefix: str | None = None,
    ) -> str:
        if num_fewshot:
            raise ValueError(f"{self.LABEL} are zero-shot (num_fewshot must be 0)")
        if system_instruction:
            raise ValueError(f"{self.LABEL} use their own system prompt; drop --system_instruction")
        render = make_renderer(chat_template if apply_chat_template else None)
        return render(self.first_request(doc))

    def apply_filters(self) -> None:
        lm = self.evaluation_lm()
        jobs, first, opened = [], {}, {}
        for inst in self._instances:
            key = f"{inst.doc_id:08d}"
            unit = self.unit_for(inst.doc)
            episode = unit.open(self.unit_tools)
            jobs.append(EpisodeJob(key, unit.context, episode))
            first[key] = (inst.args[0], inst.resps[0] if inst.resps else "")
            opened[key] = (inst, unit, episode)
        results, _ = run_batched(
            jobs,
            generate=self.batch_generate(lm),
            render=make_renderer(self._chat_template),
            base_kwargs=dict(self.config.generation_kwargs or {}),
            model_name=MODEL_LABEL,
            first_replies=first,
            check=window_check(lm),
            answer_prefill=self.answer_prefill_text(),
        )
        for key, (inst, unit, episode) in opened.items():
            record = {**results[key].to_dict(), **unit.record_meta(episode)}
            inst.resps = [json.dumps(record, ensure_ascii=False, default=str)]  # logged samples keep it as JSON
            inst.filtered_resps[FILTER_KEY] = record["answer_text"] or ""
            self._records[self.record_id(inst.doc)] = record

    def build_all_requests(self, **kwargs: Any) -> None:
        template = kwargs.get("chat_template") if kwargs.get("apply_chat_template") else None
        self._chat_template = template
        self._lm = getattr(template, "__self__", None)
        lm = self._lm or evaluator_lm()
        if lm is not None:
            check_reusable(lm)  # refuse before the first round, not after it
        super().build_all_requests(**kwargs)

    def evaluation_lm(self) -> Any:
        """The running evaluation's model: the chat template's owner, else the evaluator's ``lm``."""
        lm = self._lm or evaluator_lm()
        if lm is None:
            raise RuntimeError(
                f"{type(self).__name__} could not find the model of the running evaluation (lm-eval internals changed?)"
            )
        check_reusable(lm)
        return lm

    def batch_generate(self, lm: Any) -> Callable[[list[tuple[str, dict[str, Any]]]], list[str]]:
        """One batched ``generate_until`` call per round: (context, kwargs) pairs in, replies out."""

        def generate(batch: list[tuple[str, dict[str, Any]]]) -> list[str]:
            reqs = [
                LmInstance(
                    request_type="generate_until",
                    doc={},
                    arguments=(ctx, kwargs),
                    idx=0,
                    metadata=(self.config.task, i, 1),
                )
                for i, (ctx, kwargs) in enumerate(batch)
            ]
            return list(lm.generate_until(reqs))

        return generate


class RapTask(ToolLoopTask):
    """One RAP condition as an lm-eval task (see the module docstring)."""

    VERSION = BENCHMARK_VERSION
    LABEL = "RAP tasks"

    def __init__(self, config: dict[str, Any] | None = None, **kwargs: Any) -> None:
        # the loop never sees targets; docs carry them for scoring
        self.inst = instance_for(dict((config or {}).get("metadata") or {})).public_view()
        # lm-eval's task version is what the scores mean: the instance's benchmark version (mini: 1.0.0)
        cfg, meta = task_config(config, self.inst.spec.version)
        meta["benchmark_version"] = self.inst.spec.version
        self.condition = Condition(meta.get("condition", Condition.A1.value))
        meta["condition"] = self.condition.value
        spec = self.inst.spec
        if meta.get("max_search_calls") is not None:
            spec = spec.replace(max_search_calls=int(meta["max_search_calls"]))
        self.spec = spec
        self.answer_prefill = bool(meta.get("answer_prefill", False))
        self.unit_tools = SearchTools(self.inst)
        self.init_task(
            cfg,
            meta,
            name=f"rap_{self.condition.value.lower()}",
            docs=_load_docs,
            until=stops_for(search_text_protocol(), self.condition.regime is not None),
            max_gen_toks=default_max_tokens(self.condition, spec),
            metric_list=_metric_list(self.condition),
        )

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> str:
        return self.unit_for(doc).user_prompt

    def doc_to_target(self, doc: dict[str, Any], doc_to_target: Any = None) -> str:
        target = doc.get("y")
        return "" if target is None else json.dumps([float(v) for v in target])

    def unit_for(self, doc: dict[str, Any]) -> Any:
        """The agents' own unit of a document (the runner's unit builder)."""
        (unit,) = native_units(
            MODEL_LABEL,
            self.inst.codebooks,
            [(doc["field_id"], doc["origin"])],
            [self.condition],
            self.spec,
            max_tokens=self.max_tokens(),
        )
        return unit

    def default_max_tokens(self) -> int:
        return default_max_tokens(self.condition, self.spec)

    def record_id(self, doc: dict[str, Any]) -> str:
        return str(doc["episode_id"])

    def answer_prefill_text(self) -> str:
        return prompts.ANSWER_PREFILL if self.answer_prefill else ""

    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        if "bypass" in getattr(self, "_metric_fn_list", {}):
            return {"bypass": None}
        answer = results[0] if results else None
        out = episode_metrics(doc, answer)
        record = self._records.get(doc["episode_id"], {})
        out["n_search_calls"] = float(record.get("n_search_calls", 0))
        return out
