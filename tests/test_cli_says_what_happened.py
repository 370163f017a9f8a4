"""Say what happened (issue 23): one version string, field ids in ``rap info``, State rows in
``rap score``, and an export that never lands on a folder it did not write."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import rap_benchmark as rap
from rap_benchmark.cli import main
from rap_benchmark.core.errors import InputError


def test_one_version_string(capsys, tmp_path: Path) -> None:
    """Regression: the report's header said 1.0.0 and its footer 1.1.0, and ``rap --version`` did not
    exist; then (issue 36) ``rap --version`` said "benchmark version 1.1.0" while mini's report,
    ``rap info`` and ``run.json`` said 1.0.0, and nothing said which version was the package's."""
    from rap_benchmark.core.spec import MINI_VERSION, package_version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"rap_benchmark package {rap.__version__}; benchmark version {rap.BENCHMARK_VERSION} ")
    assert f"(mini {MINI_VERSION};" in line
    assert rap.__version__ == package_version()


def test_the_report_names_each_version_as_what_it_is(mini_dir: Path, tmp_path: Path) -> None:
    """Regression (issue 36): the header said "benchmark 1.0.0" and the footer "rap_benchmark
    1.1.0", without saying that one is the instance's benchmark version and the other the package's."""
    preds = tmp_path / "b.jsonl"
    assert main(["baselines", str(mini_dir), "--out", str(preds)]) == 0
    assert main(["report", str(mini_dir), str(preds), "--out", str(tmp_path / "rep"), "--resamples", "50"]) == 0
    html = (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    bench = rap.load(mini_dir).spec.version
    assert f"benchmark version <b>{bench}</b> (the instance's: what its scores mean)" in html
    assert html.count(f"rap_benchmark package {rap.__version__}") == 2  # header and footer
    assert not re.search(r"rap_benchmark \d", html), "a bare version beside the package's name"
    meta = json.loads((tmp_path / "rep" / "report.json").read_text(encoding="utf-8"))["meta"]
    assert (meta["benchmark_version"], meta["package_version"]) == (bench, rap.__version__)


def test_rap_info_and_run_json_name_both_versions(mini_dir: Path, tmp_path: Path, capsys) -> None:
    """Regression (issue 36): ``rap info`` said "(benchmark 1.0.0)" and ``run.json`` held
    ``benchmark_version`` alone, beside a ``rap --version`` of 1.1.0."""
    bench = rap.load(mini_dir).spec.version
    assert main(["info", str(mini_dir)]) == 0
    head = capsys.readouterr().out.splitlines()[:2]
    assert head[0].endswith(f"mini, benchmark version {bench} (what its scores mean)")
    assert head[1].split() == ["package", "rap_benchmark", rap.__version__]
    argv = ["run", str(mini_dir), "--backend", "reference", "--out", str(tmp_path / "run"), "--limit", "1"]
    assert main([*argv, "--conditions", "A0", "--no-progress"]) == 0
    run = json.loads((tmp_path / "run" / "run.json").read_text(encoding="utf-8"))
    assert (run["benchmark_version"], run["package_version"]) == (bench, rap.__version__)


def test_rap_info_lists_field_ids_and_names(mini_dir: Path, mini, capsys) -> None:
    assert main(["info", str(mini_dir)]) == 0
    text = capsys.readouterr().out
    for fid, cb in mini.codebooks.items():
        assert any(line.split()[:1] == [fid] and line.endswith(cb.name) for line in text.splitlines()), fid
    assert main(["info", str(mini_dir), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["field_list"]
    assert [f["field_id"] for f in listed] == sorted(mini.codebooks)
    assert {f["split"] for f in listed} == {"dev", "test"}


def test_rap_score_shows_the_state_rows(mini_dir: Path, mini, tmp_path: Path, capsys) -> None:
    """Regression: State conditions (A2, A4) were silently left out of ``rap score``'s output."""
    fields = sorted(mini.codebooks)[:4]
    _, preds = rap.run(
        mini.public_view(), "reference/search-hits", tmp_path / "run", conditions=[rap.Condition.A2], fields=fields
    )
    capsys.readouterr()
    main(["score", str(mini_dir), str(preds), "--split", "all", "--resamples", "50"])
    out = capsys.readouterr().out
    assert "no Forecast conditions (A0, A1, A3)" in out
    assert "State conditions (A2, A4" in out
    assert "| reference/search-hits | A2 | state_fidelity |" in out
    assert "| reference/search-hits | A2 | state_as_forecast |" in out
    result = rap.score(mini, preds, split=None, n_resamples=50)
    assert set(result.state["target"]) == {"state_fidelity", "state_as_forecast"}


def test_export_refuses_a_folder_it_did_not_write(mini, tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "notes.txt").write_text("mine\n", encoding="utf-8")
    with pytest.raises(InputError, match="not written by an export"):
        rap.export(mini, hub, repos=["fields"])
    assert sorted(p.name for p in hub.iterdir()) == ["notes.txt"]  # nothing written, the salt included


def test_export_never_publishes_over_a_withheld_export(mini_dir: Path, mini, tmp_path: Path, capsys) -> None:
    """Regression: ``rap.export(inst, "hub/")`` silently replaced a withheld export's repos with
    ones that carry the Test targets."""
    hub = tmp_path / "hub"
    first = rap.export(mini, hub, withhold_test_targets=True)
    withheld = [
        name for name, path in first.repos.items() if json.loads((path / "rap_manifest.json").read_text())["withheld"]
    ]
    assert withheld
    before = {p: p.stat().st_mtime_ns for p in hub.rglob("*") if p.is_file()}
    with pytest.raises(InputError, match="withholds Test targets"):
        rap.export(mini, hub)
    assert {p: p.stat().st_mtime_ns for p in hub.rglob("*") if p.is_file()} == before
    rap.export(mini, hub, withhold_test_targets=True)  # its own export, withheld again: fine
    assert main(["hub", "export", str(mini_dir), "--out", str(hub)]) == 2
    assert "withholds Test targets" in capsys.readouterr().err


def test_builds_say_what_to_expect_and_pace_by_stage_share() -> None:
    """Regression: an arxiv-sample build gave no warning of its 10 minutes and 6 GB, and its outer
    bar counted six equal steps, so after the first (nearly all of the time) it promised 49:40 more."""
    from rap_benchmark.cli.build import expected_cost
    from rap_benchmark.pipeline.build import BUILD_STEPS

    line = expected_cost("arxiv-sample", True, False)
    assert line.startswith("building arxiv-sample: expect about") and "GB of memory" in line
    assert "arxiv-sample's 250k papers" in expected_cost("my-corpus", True, False)
    assert sum(BUILD_STEPS.values()) == 100 and BUILD_STEPS["inputs"] >= 90
