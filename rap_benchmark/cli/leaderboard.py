"""``rap submit validate``, ``rap leaderboard score`` and ``rap leaderboard verify-reveal``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rap_benchmark.cli.args import existing_files, prediction_files, scoring_options, subcommands
from rap_benchmark.cli.args import split_or_all as _split
from rap_benchmark.core.errors import InputError
from rap_benchmark.core.fsio import atomic_write_text

SUBMIT_EPILOG = """examples:
  rap submit prepare runs/my-model --out subs/my-model.jsonl --knowledge-cutoff 2024-10-01
  rap submit validate preds/my-model.jsonl --instance build/mini
  rap submit validate preds/my-model.parquet --meta preds/my-model.meta.json --instance build/mini
  rap submit split build/mini_predictions/baselines.jsonl --out subs/   # one submission per baseline
  rap submit seal preds/my-model.jsonl --out seals/my-model.seal.json   # before the window opens
  rap submit push subs/my-model.jsonl --repo my-org/rap-submissions --instance build/mini --dry-run
  rap submit prepare runs/cc-model --out subs/cc-model.jsonl      # a rap citecast run folder (Test split)
  rap submit validate subs/cc-model.jsonl --instance build/citecast

A submission is a prediction file plus metadata in <file>.meta.json:
  {"model": "org/name", "knowledge_cutoff": "2024-10-01", "conditions": ["A1"],
   "tools": ["search"], "attempts": 1, "manifest_hash": "<rap info / SHA256SUMS sha256>",
   "usage": {"source": "...", "by_condition": {"A1": {"episodes": 40, "input_tokens": 812345,
             "output_tokens": 20411, "search_calls": 212, "cost_usd": 2.23}}}}
prepare: writes both from a rap run folder (run.json and its unit records: the predictions, and
the tokens, Search calls and cost per condition; a cost the price table cannot tell is null,
shown as unknown, never 0). The checks are rap score's validator plus the metadata's, usage
included (episode counts, Search budget, sums of the rows' own columns). Exit status 1 when it
is rejected. Walkthrough: docs/SUBMITTING.md.
CiteCast: prepare reads a rap citecast run folder (run.json says kind citecast) and writes one row
per Test task (model, task_id, prediction, valid, tokens, cost) with "benchmark": "citecast" in
its metadata; validate and push check it against a CiteCast instance (--instance: the folder
that rap citecast build wrote).
push: validates the submission, then opens a pull request on the board's submissions dataset
repo (--repo ORG/NAME) with the file and its metadata under submissions/<rap|citecast>/; needs
huggingface_hub and a token (hf auth login or HF_TOKEN). --dry-run prints the files
(path in the repo, bytes, sha256) and the pull request, and sends nothing.
seal: writes a salted SHA-256 commitment of the canonical predictions with a UTC timestamp, one
JSON row to append to a public log (e.g. seals.jsonl in a Hugging Face dataset repo) before the
window opens; the salt goes to FILE.salt.hex (keep it secret). The reveal is FILE + its salt.
An existing --out is never overwritten: a seal, once published, is the record.
To compare your own prediction files without metadata, use rap score; the maintainers score
a board of submissions with rap leaderboard score.
"""

LEADERBOARD_EPILOG = """examples:
  rap leaderboard score subs/*.jsonl --instance private/full --out board/
  rap leaderboard score baselines.jsonl --split-models --instance build/mini --out board/
  rap leaderboard verify-reveal hub/rap/episodes --reveal revealed/_private
  rap leaderboard score reveals/*.jsonl --live --seals seals.jsonl --instance build/v2 --out board-live/

score: every submission is validated and scored on its own with rap score's scorer (field-macro
Spearman, 95% block-bootstrap intervals; State conditions against their State target x); a row
is ranked only when it covers every episode of the split, and a model and condition already
submitted by an earlier file is refused; writes board/leaderboard.csv, leaderboard.md and
submissions.json (every verdict and problem). --live: each file is a reveal (FILE, FILE.salt.hex,
FILE.meta.json); it is scored on the Forecast-Live track only when its commitment is in the
--seals log and was sealed before every origin it forecasts (one line per refusal). Exit status 1
when any file is refused: the board's verdicts file and page name every refusal; when every file
is refused, no board is written (a previous one is left as it was) and the reasons are printed.
The board (split parts included) is built beside --out and replaces it in one swap: a failed or
killed run leaves the previous board; an --out that is not a board is refused.
verify-reveal: checks revealed targets and salt against the salted SHA256
commitments published in a repo's *_heldout configs.
Each board folder also holds contrasts.csv (model vs model), strict_vs_exposed.csv, board.json,
forest.png, cost_vs_score.png and index.html (self-contained; open it offline).
An --instance that is a CiteCast instance (rap citecast build) scores CiteCast submissions on the
CiteCast track instead: the card's reward 1/cosh(2|ln((p+1)/(t+1))|), mean over every Test task
(a task without a forecast scores 0), with the card's baselines as unranked reference rows; it
writes leaderboard_citecast.csv/.md, submissions.json, board.json and index.html.
To put a board on the Hub: rap hub export-board BOARD... --out hub/, then rap hub publish.
Walkthrough: docs/SUBMITTING.md.
"""

BOARD_EXPORT_EPILOG = """examples:
  rap hub export-board board/ board-live/ --out hub/ --org rap    # then rap hub publish, as for the instance

Writes board folders (rap leaderboard score --out: retrospective and/or Forecast-Live) as the
dataset repo HUB/ORG/leaderboard (configs retrospective, forecast_live, contrasts, submissions),
which rap hub publish pushes with the instance repos. Walkthrough: docs/SUBMITTING.md.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    submit = subparsers.add_parser(
        "submit", help="prepare, check and seal a leaderboard submission", epilog=SUBMIT_EPILOG
    )
    ssub = subcommands(submit, "submit_command")
    p = ssub("prepare", help="write a submission (predictions + .meta.json with tokens and cost) from a rap run folder")
    p.add_argument("rundir", type=Path, help="a rap run folder (rap run --out; merged when sharded)")
    p.add_argument("--out", type=Path, required=True, help="prediction file (.jsonl or .parquet); OUT.meta.json beside")
    p.add_argument("--model", default=None, help="the run's model to take (default: run.json's)")
    p.add_argument("--knowledge-cutoff", default=None, help="the model's knowledge cutoff, YYYY-MM-DD")
    p.add_argument("--submitter", default=None, help="who submits (free text)")
    p.add_argument("--notes", default=None, help="free-text notes")
    p.add_argument("--prices", default=None, help="price table JSON for units without a cost (default: packaged)")
    p.set_defaults(func=cmd_prepare)
    p = ssub("validate", help="validate a submission file and its metadata")
    p.add_argument("file", type=Path, help="prediction file (.jsonl or .parquet)")
    _validation_args(p)
    p.set_defaults(func=cmd_validate)
    p = ssub("split", help="split a multi-model prediction file (e.g. rap baselines') into one submission per model")
    p.add_argument("file", type=Path, help="prediction file (.jsonl or .parquet)")
    p.add_argument("--out", type=Path, required=True, help="folder for <model>.jsonl and <model>.jsonl.meta.json")
    p.add_argument("--meta", type=Path, default=None, help="metadata whose optional keys (submitter, notes) are copied")
    p.set_defaults(func=cmd_split)
    p = ssub("seal", help="commit to a prediction file before its window opens (salted SHA-256, UTC timestamp)")
    p.add_argument("file", type=Path, help="prediction file (.jsonl or .parquet)")
    p.add_argument("--salt-file", type=Path, default=None, help="hex salt (default FILE.salt.hex, created if absent)")
    p.add_argument("--out", type=Path, required=True, help="the seal row (JSON) to publish")
    p.add_argument(
        "--sealed-at",
        default=None,
        help="UTC timestamp to record instead of now (replaying history; the published log's time is what counts)",
    )
    p.set_defaults(func=cmd_seal)
    p = ssub("push", help="validate a submission, then open a pull request with it on the board's Hub dataset repo")
    p.add_argument("file", type=Path, help="submission file (.jsonl or .parquet; FILE.meta.json beside)")
    p.add_argument("--repo", required=True, help="the board's submissions dataset repo on the Hub, ORG/NAME")
    _validation_args(p)
    p.add_argument("--dry-run", action="store_true", help="print the files and the pull request; send nothing")
    p.set_defaults(func=cmd_push)

    board = subparsers.add_parser(
        "leaderboard", help="maintainers: score submissions into a board, verify reveals", epilog=LEADERBOARD_EPILOG
    )
    bsub = subcommands(board, "leaderboard_command")
    p = bsub("score", help="maintainers: score many submissions into a board folder (your own files: rap score)")
    p.add_argument("files", type=Path, nargs="+", help="submission files")
    p.add_argument("--instance", type=Path, required=True, help="the scorer's instance folder (holds the targets)")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    scoring_options(p)
    p.add_argument(
        "--split-models",
        action="store_true",
        help="score each model of a multi-model file (e.g. rap baselines') as its own submission",
    )
    p.add_argument(
        "--registry",
        type=Path,
        default=None,
        help="model registry (JSON/YAML) for the strict/exposed strata of models whose metadata states no "
        "knowledge_cutoff (e.g. rap_benchmark/data/models.json)",
    )
    p.add_argument("--live", action="store_true", help="score reveals of sealed forecasts on the Forecast-Live track")
    p.add_argument(
        "--seals", type=Path, nargs="+", default=None, help="published seal log(s) (JSON lines or SEAL.json) for --live"
    )
    p.set_defaults(func=cmd_score)

    p = bsub("verify-reveal", help="check revealed targets against published commitments")
    p.add_argument("repo", type=Path, help="an exported repo folder (e.g. hub/rap/episodes)")
    p.add_argument("--reveal", type=Path, required=True, help="the revealed private folder (salt.hex + targets)")
    p.set_defaults(func=cmd_verify_reveal)


def _validation_args(p: argparse.ArgumentParser) -> None:
    """The options of rap submit validate and push: the metadata file, the instance, the split."""
    p.add_argument("--meta", type=Path, default=None, help="metadata JSON (default FILE.meta.json)")
    p.add_argument(
        "--instance",
        type=Path,
        default=None,
        help="instance folder: RAP (default: the cached mini) or, for a CiteCast submission, CiteCast",
    )
    p.add_argument(
        "--split", choices=("test", "dev", "all"), default="test", help="RAP: expected episodes (default test)"
    )


def _citecast_instance(path: Path | None):
    """The CiteCast instance at ``path`` when it is one (None otherwise)."""
    from rap_benchmark.citecast.instance import MANIFEST, load_instance

    return load_instance(path) if path is not None and (path / MANIFEST).is_file() else None


def _validated(file: Path, meta: Path | None, instance: Path | None, split: str):
    """The validation report of a RAP or CiteCast submission (its metadata says which) against
    the instance of its kind; a mismatched pair is refused by name."""
    from rap_benchmark.evaluation.citecast_submissions import is_citecast, validate_citecast_submission
    from rap_benchmark.evaluation.submissions import validate_submission

    citecast = _citecast_instance(instance)
    if is_citecast(file, meta):
        if citecast is None:
            raise InputError(
                f"{file} is a CiteCast submission: give --instance, the CiteCast instance it ran on (rap citecast build)"
            )
        if split != "test":
            raise InputError(f"--split {split}: a CiteCast submission forecasts the Test split")
        return validate_citecast_submission(file, citecast, meta_path=meta)
    if citecast is not None:
        raise InputError(
            f'{instance} is a CiteCast instance, and {file} is a RAP submission (no "benchmark": "citecast" '
            "in its metadata): give a RAP instance (rap build --out)"
        )
    return validate_submission(file, _instance(instance), meta_path=meta, split=_split(split))


def _instance(path: Path | None):
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.integrations.source import ensure_mini

    return load_instance(path if path is not None else ensure_mini())


def cmd_validate(args: argparse.Namespace) -> int:
    report = _validated(args.file, args.meta, args.instance, args.split)
    print(report.summary())
    return 0 if report.accepted else 1


def cmd_push(args: argparse.Namespace) -> int:
    from rap_benchmark.hub.submit import check_repo_id, hub_token, open_pull_request, submission_pull_request

    repo = check_repo_id(args.repo)
    from rap_benchmark.evaluation.submissions import run_folder_problem

    if (not_one := run_folder_problem(args.file)) is not None:
        raise InputError(not_one.message)
    prediction_files([args.file])
    if args.meta is not None:
        existing_files([args.meta], "metadata file")
    token = None if args.dry_run else hub_token()  # no token: said before the submission is read
    report = _validated(args.file, args.meta, args.instance, args.split)
    print(report.summary(), file=sys.stderr)
    if not report.accepted:
        print("rap submit push: rejected, nothing was sent: fix the problems above", file=sys.stderr)
        return 1
    pr = submission_pull_request(report, repo, meta_path=args.meta)
    if args.dry_run:
        print("dry run: nothing was sent")
        print(pr.plan_text())
        return 0
    print(f"rap submit push: sending {len(pr.files)} file(s) to {repo} as a pull request", file=sys.stderr)
    url = open_pull_request(pr, token=token)
    print(f"opened {url}")
    return 0


def cmd_prepare(args: argparse.Namespace) -> int:
    from rap_benchmark.agents.runner import prepare_submission
    from rap_benchmark.agents.store import RunStore
    from rap_benchmark.llmclient.pricing import load_prices

    if args.out.suffix.lower() not in (".jsonl", ".parquet"):
        raise InputError(f"--out must end in .jsonl or .parquet, got {args.out.name}")
    if args.knowledge_cutoff is not None:
        try:
            dt.date.fromisoformat(args.knowledge_cutoff)
        except ValueError:
            raise InputError(f"--knowledge-cutoff must be YYYY-MM-DD, got {args.knowledge_cutoff!r}") from None
    if not args.rundir.is_dir():
        raise InputError(f"no run folder at {args.rundir}")
    prices = load_prices(args.prices)
    prepare = prepare_submission
    if (RunStore(args.rundir).read_run() or {}).get("kind") == "citecast":
        from rap_benchmark.agents.citecast import prepare_citecast_submission as prepare
    out, meta = prepare(
        args.rundir,
        args.out,
        model=args.model,
        knowledge_cutoff=args.knowledge_cutoff,
        submitter=args.submitter,
        notes=args.notes,
        prices=prices,
    )
    print(out)
    print(meta)
    return 0


def cmd_seal(args: argparse.Namespace) -> int:
    from rap_benchmark.evaluation.live import parse_stamp, seal

    if args.out.exists():
        raise InputError(
            f"{args.out} exists: a seal is never overwritten (it may already be published); choose another --out"
        )
    sealed_at = parse_stamp(args.sealed_at) if args.sealed_at else None
    row, salt_path = seal(args.file, salt_file=args.salt_file, sealed_at=sealed_at)
    atomic_write_text(args.out, json.dumps(row, sort_keys=True) + "\n")
    print(f"sealed {row['n_rows']} rows at {row['sealed_at']}: {row['commitment']}", file=sys.stderr)
    print(f"keep {salt_path} secret until the reveal; publish {args.out}", file=sys.stderr)
    print(args.out)
    return 0


def cmd_score_live(args: argparse.Namespace) -> int:
    from rap_benchmark.evaluation.live import read_seals, score_live, write_live_board

    if not args.seals:
        raise InputError("--live needs --seals: the published log of seal rows")
    seals = read_seals(args.seals)
    inst = _instance(args.instance)
    result = score_live(
        list(args.files), inst, seals, split=_split(args.split), n_resamples=args.resamples, seed=args.seed
    )
    accepted = [v.accepted for v in result.verdicts]
    out = write_live_board(result, args.out) if any(accepted) else None
    for v in result.verdicts:
        print(f"{v.path}: {'accepted' if v.accepted else 'REFUSED'}: {v.message}", file=sys.stderr)
    if out is not None:
        print((out / "leaderboard_live.md").read_text(encoding="utf-8"))
    return _refusals(accepted, "reveal", args.out / "reveals.json", args.out)


def _check_out(args: argparse.Namespace) -> None:
    """Refuse, before any work, an --out that is not a board folder and an input inside --out (the
    board folder is replaced whole, so a file read from it would be gone afterwards)."""
    from rap_benchmark.evaluation.submissions import META_SUFFIX, check_board_folder

    out = check_board_folder(args.out).resolve()
    for f in [*args.files, *(args.seals or ()), *([args.registry] if args.registry else [])]:
        for path in (f, f.with_name(f.name + META_SUFFIX)):
            if path.exists() and path.resolve().is_relative_to(out):
                raise InputError(
                    f"{path} lies inside --out {args.out}, which is replaced whole: move it out or choose another --out"
                )


def cmd_score(args: argparse.Namespace) -> int:
    _check_out(args)
    citecast = _citecast_instance(args.instance)
    if citecast is not None:
        return cmd_score_citecast(args, citecast)
    if args.live:
        return cmd_score_live(args)

    from rap_benchmark.evaluation.submissions import leaderboard_files, score_submissions

    registry = None
    if args.registry is not None:
        from rap_benchmark.evaluation.scoring import load_registry

        registry = load_registry(args.registry)  # a bad registry is refused before any write
    inst = _instance(args.instance)

    def score(folder: Path) -> Any:
        files = _split_models(args.files, folder / "split") if args.split_models else list(args.files)
        from tqdm.auto import tqdm

        progress = tqdm(files, desc="submissions", unit="file", file=sys.stderr, leave=False)
        return score_submissions(
            progress, inst, split=_split(args.split), n_resamples=args.resamples, seed=args.seed, registry=registry
        )

    result = _board_unless_all_refused(args.out, score, leaderboard_files)
    return _verdicts(result.reports, args.out, "leaderboard.md")


class _NoBoard(Exception):
    """Every file was refused: the board being built is dropped, ``--out`` is left as it was."""

    def __init__(self, result: Any) -> None:
        super().__init__("every file was refused")
        self.result = result


def _board_unless_all_refused(out: Path, score: Callable[[Path], Any], write: Callable[[Any, Path], None]) -> Any:
    """A board built beside ``out`` (``score(folder)``, then ``write(result, folder)``) and swapped
    in at once, the verdicts relocated to ``out``; when every file was refused, no board is
    written and ``out`` is left as it was (a board of refusals and baselines is no board). The
    scoring result either way."""
    from rap_benchmark.evaluation.submissions import building_board

    try:
        with building_board(out) as folder:
            result = score(folder)
            if not any(r.accepted for r in result.reports):
                raise _NoBoard(result)  # leaving the block removes the folder being built
            result = result.relocated(folder, out)  # the verdicts name the files where they will be
            write(result, folder)
    except _NoBoard as none:
        return none.result
    return result


def cmd_score_citecast(args: argparse.Namespace, inst) -> int:
    """The CiteCast track: every file scored against the CiteCast instance ``inst``."""
    from tqdm.auto import tqdm

    from rap_benchmark.evaluation.board.citecast import STEM, citecast_board_files, score_citecast_submissions

    options = (("--live", args.live), ("--split-models", args.split_models), ("--registry", args.registry))
    given = [flag for flag, on in options if on]
    if args.split != "test":
        given.append(f"--split {args.split}")
    if given:
        raise InputError(
            f"{', '.join(given)}: not for the CiteCast track (it scores the Test split of {args.instance})"
        )

    def score(folder: Path) -> Any:
        progress = tqdm(list(args.files), desc="submissions", unit="file", file=sys.stderr, leave=False)
        return score_citecast_submissions(progress, inst, n_resamples=args.resamples, seed=args.seed)

    result = _board_unless_all_refused(args.out, score, citecast_board_files)
    return _verdicts(result.reports, args.out, f"{STEM}.md")


def _verdicts(reports: Sequence[Any], out: Path, board_md: str) -> int:
    """Each submission's verdict on stderr, the board (``out/board_md``, when one was written) on
    stdout, and the exit status of :func:`_refusals`."""
    accepted = [r.accepted for r in reports]
    for r in reports:
        print(r.summary(), file=sys.stderr)
    if any(accepted):
        print((out / board_md).read_text(encoding="utf-8"))
    return _refusals(accepted, "submission", out / "submissions.json", out)


def _split_models(files: list[Path], folder: Path) -> list[Path]:
    """--split-models: each multi-model file as one submission per model under ``folder/STEM/``."""
    from rap_benchmark.evaluation.predictions import PredictionFileError
    from rap_benchmark.evaluation.submissions import split_by_model

    expanded = []
    for f in files:
        try:
            expanded += split_by_model(f, folder / f.stem, only_if_mixed=True)
        except PredictionFileError as exc:  # scored as is: the validator reports every problem
            print(f"rap leaderboard: {f} not split ({len(exc.problems)} problem(s))", file=sys.stderr)
            expanded.append(f)
    return expanded


def _refusals(accepted: list[bool], what: str, verdicts: Path, out: Path) -> int:
    """Exit status of a scored board: 0 when every file was accepted; else 1, with one line on
    stderr saying how many were refused and where the reasons are (the board's verdicts file; when
    every file was refused no board was written, and the reasons are the lines printed above)."""
    refused = accepted.count(False)
    if not refused:
        return 0
    if refused == len(accepted):
        said = f"every {what} was refused ({refused} of {refused}), so no board was written"
        kept = f" ({out} is left as it was)" if out.exists() else ""
        print(f"rap leaderboard score: {said}{kept}; each file's reasons are printed above", file=sys.stderr)
    else:
        print(
            f"rap leaderboard score: {refused} of {len(accepted)} {what}s refused; the reasons are in {verdicts}",
            file=sys.stderr,
        )
    return 1


def cmd_split(args: argparse.Namespace) -> int:
    from rap_benchmark.evaluation.predictions import PredictionFileError
    from rap_benchmark.evaluation.submissions import split_by_model

    prediction_files([args.file])
    meta = json.loads(args.meta.read_text(encoding="utf-8")) if args.meta else None
    try:
        written = split_by_model(args.file, args.out, meta=meta)
    except PredictionFileError as exc:
        raise InputError(
            f"{str(exc).splitlines()[0]} cannot be split: fix it first (rap score names each problem)"
        ) from None
    for path in written:
        print(path)
    return 0


def cmd_verify_reveal(args: argparse.Namespace) -> int:
    from rap_benchmark.hub.reveal import verify_reveal

    report = verify_reveal(args.repo, args.reveal)
    for p in report.problems:
        print(p, file=sys.stderr)
    print(f"{report.checked} commitment(s) checked: {'all verified' if report.ok else 'FAILED'}")
    return 0 if report.ok else 1


def cmd_export_hf(args: argparse.Namespace) -> int:
    from rap_benchmark.hub.board import export_board

    repo = export_board(list(args.boards), args.out, org=args.org, name=args.name)
    print(repo)
    return 0
