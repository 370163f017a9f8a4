"""lm-evaluation-harness tasks for RAP (``lm_eval --tasks rap_forecast --include_path "$(rap lm-eval-path)"``).

``rap_benchmark.lmeval.task`` imports lm-eval; everything else here does not.
"""

from rap_benchmark.lmeval.harness import LM_EVAL_VERSION, TAG, TASKS, task_path, write_task_dir
from rap_benchmark.lmeval.samples import samples_to_predictions

__all__ = ["LM_EVAL_VERSION", "TAG", "TASKS", "samples_to_predictions", "task_path", "write_task_dir"]
