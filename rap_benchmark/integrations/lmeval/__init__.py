"""lm-evaluation-harness tasks for RAP and CiteCast
(``lm_eval --tasks rap_forecast --include_path "$(rap harness lm-eval-path)"``; ``--tasks citecast``).

``rap_benchmark.integrations.lmeval.task`` and ``rap_benchmark.integrations.lmeval.citecast_task`` import lm-eval;
everything else here does not.
"""

from rap_benchmark.integrations.lmeval.harness import (
    CITECAST_TASK,
    GROUP,
    LM_EVAL_VERSION,
    RAP_TASKS,
    TASKS,
    task_path,
    write_task_dir,
)
from rap_benchmark.integrations.lmeval.samples import samples_to_predictions

__all__ = [
    "CITECAST_TASK",
    "GROUP",
    "LM_EVAL_VERSION",
    "RAP_TASKS",
    "TASKS",
    "samples_to_predictions",
    "task_path",
    "write_task_dir",
]
