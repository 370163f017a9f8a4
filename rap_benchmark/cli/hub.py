"""``rap hub export``, ``rap hub publish``, ``rap harness lm-eval-path``, ``rap harness lm-eval-predictions`` and
``rap harness inspect-predictions``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rap_benchmark.cli.leaderboard import BOARD_EXPORT_EPILOG, cmd_export_hf

EXPORT_EPILOG = """examples:
  rap hub export build/mini --out hub/
  rap hub export build/full --out hub/ --withhold-test-targets --citecast build/citecast
  cd hub && HF_HUB_OFFLINE=1 python -c 'import datasets; print(datasets.load_dataset("rap/assignments"))'

Writes hub/<org>/<repo>/ (README.md card with a `configs:` block, data/<config>/<split>.parquet,
rap_manifest.json) for papers, assignments, fields, splits, episodes, search_manifests (and
citecast_tasks with --citecast). With --withhold-test-targets, Test targets from the last origin
on (or --withhold-from DATE) leave the public repos and are committed as salted SHA256 hashes;
the salt and the targets go to hub/_private/ (never publish it before the reveal).
"""

PUBLISH_EPILOG = """examples:
  rap hub publish hub/ --org rap --tag v1.0.0 --dry-run
  rap hub publish hub/ --org my-lab --local-org rap --tag v1.0.0 --private

Creates each dataset repo <org>/<name> on the Hugging Face Hub, uploads its folder in one commit
and tags it. Needs a token (huggingface-cli login or HF_TOKEN). hub/_private is never uploaded.
"""

LM_EVAL_EPILOG = """examples:
  lm_eval --model local-chat-completions --model_args model=Qwen/Qwen3-4B,base_url=http://127.0.0.1:8000/v1/chat/completions \\
      --apply_chat_template --tasks rap,citecast --include_path "$(rap harness lm-eval-path)" --log_samples --output_path out/
  lm_eval --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M-Instruct,max_length=8192 \\
      --tasks rap_forecast --include_path "$(rap harness lm-eval-path)" --apply_chat_template --limit 4 \\
      --metadata '{"hub": "rap"}'
  lm_eval ls tasks --include_path "$(rap harness lm-eval-path)"
  rap harness lm-eval-path --write my_tasks/

Prints the folder of the RAP lm-eval tasks (rap_forecast, rap_forecast_closed,
rap_forecast_expanding, rap_state, rap_state_expanding; group: rap, with an aggregate row) and of
the CiteCast task (citecast) for --include_path. The instance: --metadata '{"hub": ORG_OR_FOLDER}'
(the published datasets), '{"instance_dir": DIR}' (a build), else the embedded mini.
"""


PREDICTIONS_EPILOG = """examples:
  rap harness lm-eval-predictions out/ --out preds/my-model.jsonl
  rap submit validate preds/my-model.jsonl --instance build/mini
  rap harness lm-eval-predictions out/ --model org/name --knowledge-cutoff 2024-10-01 --out preds/name.jsonl

Converts lm-eval samples (--log_samples --output_path out/) of the RAP tasks into a prediction
file, parsing each final answer exactly as the task's own metric did, and writes the submission
metadata beside it (FILE.meta.json: model, conditions, tools, manifest hash). The model name is
the one lm-eval recorded (model= or pretrained= of --model_args) unless --model is given. When
several runs went to the same folder, the newest run of each task is used.
"""


INSPECT_EPILOG = """examples:
  inspect eval rap_benchmark/rap_forecast --model vllm/Qwen/Qwen3-4B -T condition=A1 --log-dir logs/
  rap harness inspect-predictions logs/ --out preds/qwen3-4b.jsonl
  rap submit validate preds/qwen3-4b.jsonl --instance build/mini

Converts Inspect logs of rap_forecast / rap_state into a prediction file, parsing each recorded
final answer exactly as the task's scorer did, and writes the submission metadata beside it
(FILE.meta.json). The model name is Inspect's without the provider (vllm/Qwen/Qwen3-4B ->
Qwen/Qwen3-4B) unless --model is given; a newer log of the same episode supersedes an older one.
"""


HUB_EPILOG = """examples:
  rap hub export build/mini --out hub/
  rap hub export-board board/ --out hub/ --org rap
  rap hub publish hub/ --org rap --tag v1.0.0 --dry-run

export writes an instance as dataset repos, export-board writes the board folders written by
the command rap leaderboard score --out as the repo ORG/leaderboard, and publish pushes all under
the hub folder to the Hugging Face Hub.
"""

HARNESS_EPILOG = """examples:
  rap harness lm-eval-path
  rap harness lm-eval-predictions out/ --out preds/my-model.jsonl
  rap harness inspect-predictions logs/ --out preds/qwen3-4b.jsonl

Run RAP through lm-eval (lm-eval-path gives its --include_path) or Inspect (inspect eval
rap_benchmark/rap_forecast), then turn what the harness logged into a prediction file for the
commands rap submit validate and rap score.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    hub = subparsers.add_parser(
        "hub", help="Hugging Face dataset repos: export an instance or a leaderboard, publish", epilog=HUB_EPILOG
    )
    hsub = hub.add_subparsers(dest="hub_command", metavar="ACTION", required=True)
    p = hsub.add_parser("export", help="export an instance as Hugging Face dataset repos", epilog=EXPORT_EPILOG)
    p.add_argument("dir", type=Path, help="a built instance folder")
    p.add_argument("--out", type=Path, required=True, help="hub folder (repos go to OUT/<org>/<name>)")
    p.add_argument("--org", default="rap", help="organisation folder / Hub namespace (default rap)")
    p.add_argument("--withhold-test-targets", action="store_true", help="withhold Test targets from the last origin on")
    p.add_argument("--withhold-from", default=None, help="withhold Test targets from this date (>= the last origin)")
    p.add_argument("--salt-file", type=Path, default=None, help="hex salt to reuse (default OUT/_private/salt.hex)")
    p.add_argument("--citecast", type=Path, default=None, help="a built CiteCast task folder (server/tasks.jsonl)")
    p.add_argument("--repos", default=None, help="comma-separated subset of repos to write")
    p.set_defaults(func=cmd_export)

    p = hsub.add_parser(
        "export-board", help="write leaderboard folders as a Hugging Face dataset repo", epilog=BOARD_EXPORT_EPILOG
    )
    p.add_argument(
        "boards", type=Path, nargs="+", help="board folders (rap leaderboard score --out, with or without --live)"
    )
    p.add_argument("--out", type=Path, required=True, help="hub folder (the repo goes to OUT/ORG/NAME)")
    p.add_argument("--org", default="rap", help="organisation folder / Hub namespace (default rap)")
    p.add_argument("--name", default="leaderboard", help="repo name (default leaderboard)")
    p.set_defaults(func=cmd_export_hf)

    p = hsub.add_parser("publish", help="push exported repos to the Hugging Face Hub", epilog=PUBLISH_EPILOG)
    p.add_argument("hub_dir", type=Path, help="the folder given to rap hub export --out")
    p.add_argument("--org", required=True, help="Hub namespace to publish under")
    p.add_argument("--local-org", default=None, help="folder under HUB_DIR holding the repos (default: --org)")
    p.add_argument("--tag", required=True, help="version tag, e.g. v1.0.0")
    p.add_argument("--private", action="store_true", help="create private repos")
    p.add_argument("--dry-run", action="store_true", help="verify and print the plan; touch nothing")
    p.set_defaults(func=cmd_publish)

    harness = subparsers.add_parser(
        "harness",
        help="lm-eval and Inspect: the task folder, and their logs as prediction files",
        epilog=HARNESS_EPILOG,
    )
    rsub = harness.add_subparsers(dest="harness_command", metavar="ACTION", required=True)
    p = rsub.add_parser("lm-eval-path", help="print the lm-eval task folder (--include_path)", epilog=LM_EVAL_EPILOG)
    p.add_argument("--write", type=Path, default=None, help="write the task folder here instead")
    p.set_defaults(func=cmd_lm_eval_path)

    p = rsub.add_parser(
        "lm-eval-predictions",
        help="convert lm-eval samples of the RAP tasks into a prediction file",
        epilog=PREDICTIONS_EPILOG,
    )
    p.add_argument("samples", type=Path, nargs="+", help="samples_rap*.jsonl files or folders holding them")
    _submission_args(p, "the one lm-eval recorded")
    p.set_defaults(func=cmd_lm_eval_predictions)

    p = rsub.add_parser(
        "inspect-predictions",
        help="convert Inspect logs of the RAP tasks into a prediction file",
        epilog=INSPECT_EPILOG,
    )
    p.add_argument("logs", type=Path, nargs="+", help="Inspect log files (.eval, .json) or folders holding them")
    _submission_args(p, "Inspect's, without the provider")
    p.set_defaults(func=cmd_inspect_predictions)


def _submission_args(p: argparse.ArgumentParser, default_model: str) -> None:
    """The options every converter shares: the model name, its knowledge cutoff and the output."""
    p.add_argument("--model", default=None, help=f"model name to record (default: {default_model})")
    p.add_argument(
        "--knowledge-cutoff", default=None, help="the model's knowledge cutoff (YYYY-MM-DD), for the metadata"
    )
    p.add_argument(
        "--out", type=Path, required=True, help="prediction file (.jsonl or .parquet); metadata: OUT.meta.json"
    )


def cmd_export(args: argparse.Namespace) -> int:
    from tqdm.auto import tqdm

    from rap_benchmark.api import export, load

    inst = load(args.dir)  # refused (tampered, missing) before the progress bar starts
    repos = args.repos.split(",") if args.repos else None
    bar = tqdm(total=len(repos) if repos else 6 + (args.citecast is not None), desc="export-hf", file=sys.stderr)

    def step(name: str) -> None:
        bar.set_postfix_str(name)
        bar.update(1)

    result = export(
        inst,
        args.out,
        org=args.org,
        withhold_test_targets=args.withhold_test_targets,
        withhold_from=args.withhold_from,
        salt_file=args.salt_file,
        citecast=args.citecast,
        repos=repos,
        progress=step,
    )
    bar.close()
    for name, path in result.repos.items():
        print(f"{name}\t{path}")
    if result.private_dir is not None:
        print(f"private targets and salt (do not publish): {result.private_dir}", file=sys.stderr)
    if result.pending_origins:
        print(
            f"pending targets (origin {', '.join(result.pending_origins)}): published without y in "
            "episodes/*_pending; seal forecasts for them, and export again after rap resolve",
            file=sys.stderr,
        )
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from rap_benchmark.hub.publish import publish

    steps = publish(
        args.hub_dir, org=args.org, tag=args.tag, private=args.private, local_org=args.local_org, dry_run=args.dry_run
    )
    for s in steps:
        print(f"{'plan' if args.dry_run else 'done'}\t{s.action}\t{s.repo_id}\t{s.detail}")
    return 0


def cmd_lm_eval_path(args: argparse.Namespace) -> int:
    from rap_benchmark.integrations.lmeval.harness import task_path, write_task_dir

    print(write_task_dir(args.write) if args.write else task_path())
    return 0


def cmd_lm_eval_predictions(args: argparse.Namespace) -> int:
    from rap_benchmark.integrations.lmeval.samples import run_model_name, samples_to_predictions
    from rap_benchmark.integrations.submission import write_submission

    model = args.model or run_model_name(args.samples)
    frame = samples_to_predictions(args.samples, model=model)
    written = write_submission(
        frame, args.out, source="lm-eval samples", knowledge_cutoff=args.knowledge_cutoff, tokens_known=False
    )
    return _wrote(frame, *written)


def cmd_inspect_predictions(args: argparse.Namespace) -> int:
    from rap_benchmark.integrations.inspect.logs import log_predictions
    from rap_benchmark.integrations.submission import write_submission

    frame = log_predictions(args.logs, model=args.model)
    return _wrote(
        frame, *write_submission(frame, args.out, source="Inspect logs", knowledge_cutoff=args.knowledge_cutoff)
    )


def _wrote(frame, out: Path, meta: Path) -> int:
    """A converter's report: the rows written (to stderr) and the prediction file (to stdout)."""
    valid = int(frame["valid"].sum())
    print(f"wrote {len(frame)} rows ({valid} valid) to {out}, metadata {meta.name}", file=sys.stderr)
    print(out)
    return 0
