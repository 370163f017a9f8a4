"""``rap audit search DIR RUNDIR``: every Search call recorded in a run folder is re-executed
(issue 11: the audit only accepted a CALLS.jsonl file); ``rap audit traces`` replays them per unit."""

from __future__ import annotations

import json
import re
from pathlib import Path

from rap_benchmark.cli import main


def test_search_audit_accepts_a_run_folder(mini_dir: Path, mini, tmp_path: Path, capsys):
    run = tmp_path / "ref"
    origins = ",".join(mini.spec.origins[-2:])
    argv = ["run", str(mini_dir), "--backend", "reference", "--conditions", "A1,A3", "--no-progress"]
    assert main([*argv, "--fields", mini.field_ids[0], "--origins", origins, "--out", str(run)]) == 0
    capsys.readouterr()

    assert main(["audit", "search", str(mini_dir), str(run)]) == 0
    n = int(re.search(r"audited (\d+) calls: (\d+) reproduced exactly", capsys.readouterr().out).group(1))
    assert n > 0

    # the trace audit of the same run: exact, with a per-unit table
    table = tmp_path / "traces.csv"
    assert main(["audit", "traces", str(mini_dir), str(run), "--out", str(table), "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["exact"] is True
    assert len(table.read_text().splitlines()) > 1

    # a recorded result that the index does not reproduce is reported, exit 1
    unit = next(p for p in sorted((run / "units").rglob("*.json")) if json.loads(p.read_text())["search_calls"])
    rec = json.loads(unit.read_text())
    rec["search_calls"][0]["total_hits"] += 1
    unit.write_text(json.dumps(rec, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    assert main(["audit", "search", str(mini_dir), str(run)]) == 1
    assert "1 differ" in capsys.readouterr().out
    assert main(["audit", "traces", str(mini_dir), str(run), "--no-progress"]) == 1
    assert json.loads(capsys.readouterr().out)["exact"] is False


def test_search_audit_refuses_a_run_of_another_instance(mini_dir: Path, tmp_path: Path, capsys):
    run = tmp_path / "other"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"manifest_hash": "0" * 64}) + "\n", encoding="utf-8")
    assert main(["audit", "search", str(mini_dir), str(run)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rap audit search: ") and "not on this one" in err and err.count("\n") == 1
