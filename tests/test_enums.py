"""Split, policy and task are enums at every API boundary: signatures say so, and an unknown value
is refused with a message that names the allowed ones."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from rap_benchmark.core.records import Policy, Split, Task, parse_enum

PACKAGE = Path(__file__).resolve().parents[1] / "rap_benchmark"
ENUM_OF = {"split": "Split", "policy": "Policy", "task": "Task"}
# Other vocabularies under the same parameter names: CiteCast's own train/test task splits and
# agent policies ("constant:N"), the Hub's dataset split names, and the harness tasks' (lm-eval and
# Inspect) "all" pseudo-split, whose task parameters arrive as strings from the harness command line.
OTHER_VOCABULARIES = ("citecast", "hub", "integrations", "cli")


def _annotated_params():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(OTHER_VOCABULARIES):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                    if arg.arg in ENUM_OF and arg.annotation is not None:
                        yield f"{rel}:{node.lineno} {node.name}({arg.arg})", arg.arg, ast.unparse(arg.annotation)


def test_signatures_take_the_enums_not_strings() -> None:
    found = list(_annotated_params())
    assert len(found) > 10
    bad = [where for where, name, ann in found if "str" in ann or ENUM_OF[name] not in ann]
    assert not bad, "parameters typed as strings:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        (Split, "train", "unknown split 'train' (expected one of: dev, test)"),
        (
            Policy,
            "Canonical",
            "unknown policy 'Canonical' (expected one of: canonical, split_boundary, single_only, secondary)",
        ),
        (Task, None, "unknown task None (expected one of: forecast, state)"),
    ],
)
def test_parse_enum_names_the_allowed_values(kind, value, message) -> None:
    with pytest.raises(ValueError) as err:
        parse_enum(kind, value)
    assert str(err.value) == message


def test_parse_enum_passes_members_and_values() -> None:
    assert parse_enum(Split, "dev") is Split.DEV
    assert parse_enum(Policy, Policy.SECONDARY) is Policy.SECONDARY


def test_unknown_values_are_refused_at_the_api(mini) -> None:
    from rap_benchmark.evaluation.report.aggregates import leaderboard
    from rap_benchmark.evaluation.scoring import baseline_predictions, episode_arrays, score_predictions

    with pytest.raises(ValueError, match="unknown policy 'canon'"):
        episode_arrays(mini, "canon")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        baseline_predictions(mini, policy="nope")  # type: ignore[arg-type]
    preds, _ = baseline_predictions(mini)
    scores = score_predictions(mini, preds)
    with pytest.raises(ValueError, match="unknown split 'holdout'"):
        leaderboard(scores, mini, split="holdout")  # type: ignore[arg-type]
    assert len(leaderboard(scores, mini, split=Split.DEV, n_resamples=10)) > 0
