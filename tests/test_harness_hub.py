"""Harness tasks on the published datasets alone: an export folder (``rap hub export``), no build.

Regression (issue 16): the tasks needed a locally built instance and refused a hub export
(``SHA256SUMS is missing``). Here the instance is assembled from the ``episodes``, ``fields``,
``splits``, ``papers``, ``assignments`` and ``search_manifests`` repos, the search index is built
locally under the manifest hash, and both ``lm_eval`` and ``inspect eval`` run on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rap_benchmark.integrations.hub_instance import HubInstanceError, load_hub_instance

REPO = Path(__file__).resolve().parents[1]
SALT = bytes(range(32))


@pytest.fixture(scope="module")
def hub_dir(mini, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rap_benchmark.hub import export_instance

    hub = tmp_path_factory.mktemp("hub")
    export_instance(mini, hub, withhold_from=max(mini.spec.origins), salt=SALT)
    shutil.rmtree(hub / "_private")  # a user has only the public repos
    return hub


def test_hub_instance_serves_the_published_episodes_and_universes(hub_dir: Path, mini, tmp_path: Path) -> None:
    from rap_benchmark.bm25 import SearchEngine
    from rap_benchmark.bm25.tool import make_search_tool

    inst = load_hub_instance(hub_dir, cache=tmp_path)
    assert inst.manifest_hash == mini.manifest_hash and inst.spec == mini.spec
    assert inst.codebooks == mini.codebooks and inst.blocks.equals(mini.blocks)
    assert inst.root == tmp_path / "hub" / mini.manifest_hash
    keys = ["field_id", "origin", "policy"]
    ours = inst.episodes.set_index(keys)
    theirs = mini.episodes.set_index(keys)
    assert sorted(ours.index) == sorted(theirs.index)
    withheld = ours["y"].isna() & theirs.loc[ours.index, "y"].notna()
    assert withheld.any() and (ours.loc[withheld, "split"] == "test").all()  # withheld targets stay unknown
    public = ours.index[~withheld]
    for k in public[:20]:
        a, b = ours.loc[k, "y"], theirs.loc[k, "y"]
        assert (a is None and b is None) or np.array_equal(a, b)
    ours_engine, theirs_engine = SearchEngine.from_instance(inst), SearchEngine.from_instance(mini)
    for fid, origin in [("f000", "2024-01-01"), ("f003", "2026-01-01")]:
        for regime in ("fixed", "expanding"):
            q = "learning methods"
            assert make_search_tool(ours_engine, fid, origin, regime)(q) == make_search_tool(
                theirs_engine, fid, origin, regime
            )(q)


def test_hub_instance_refuses_an_incomplete_or_altered_export(hub_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(hub_dir, broken)
    shutil.rmtree(broken / "rap" / "papers")
    with pytest.raises(HubInstanceError, match="papers"):
        load_hub_instance(broken, cache=tmp_path / "c1")
    altered = tmp_path / "altered"
    shutil.copytree(hub_dir, altered)
    manifest_path = altered / "rap" / "search_manifests" / "rap_manifest.json"
    import pandas as pd

    from rap_benchmark.core.sums import sha256_file

    manifest = json.loads(manifest_path.read_text())
    info = manifest["configs"]["default"]["fixed"]
    frame = pd.read_parquet(altered / "rap" / "search_manifests" / info["path"])
    frame.loc[0, "shard_hash"] = "0" * 64
    frame.to_parquet(altered / "rap" / "search_manifests" / info["path"], index=False)
    info["sha256"] = sha256_file(altered / "rap" / "search_manifests" / info["path"])
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(HubInstanceError, match="search universe"):
        load_hub_instance(altered, cache=tmp_path / "c2")


def test_hub_ids_name_every_repo_of_the_organisation(monkeypatch: pytest.MonkeyPatch) -> None:
    from rap_benchmark.hub import load
    from rap_benchmark.hub.layout import REPO_NAMES
    from rap_benchmark.integrations.hub_instance import repo_locations

    seen = []
    monkeypatch.setattr(load, "resolve_repo", lambda repo, revision=None: seen.append((repo, revision)) or Path(repo))
    assert repo_locations("rap", revision="v1.0.0") == {r: Path(f"rap/{r}") for r in REPO_NAMES}
    assert repo_locations("rap/episodes") == {r: Path(f"rap/{r}") for r in REPO_NAMES}
    assert ("rap/papers", "v1.0.0") in seen
    with pytest.raises(HubInstanceError, match="organisation"):
        repo_locations("a/b/c")


def _env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["RAP_CACHE_DIR"] = str(cache)
    env.pop("RAP_INSTANCE_DIR", None)
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    return env


def test_lm_eval_and_inspect_run_on_the_exported_datasets_alone(hub_dir: Path, mini, tmp_path: Path) -> None:
    pytest.importorskip("lm_eval")
    pytest.importorskip("tenacity")
    inspect_ai = pytest.importorskip("inspect_ai")
    from rap_benchmark.testing.scripted_server import serve

    cache = tmp_path / "cache"
    env = _env(cache)
    with serve(n_searches=1) as url:
        out = tmp_path / "out"
        proc = subprocess.run(
            [
                str(Path(sys.executable).with_name("lm_eval")),
                "--model",
                "local-chat-completions",
                "--model_args",
                f"model=scripted,base_url={url}/chat/completions",
                "--apply_chat_template",
                "--tasks",
                "rap_forecast",
                "--include_path",
                str(REPO / "eval_harness_tasks"),
                "--metadata",
                json.dumps({"hub": str(hub_dir), "split": "all"}),
                "--limit",
                "3",
                "--log_samples",
                "--output_path",
                str(out),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-4000:]
        (results,) = out.rglob("results_*.json")
        res = json.loads(results.read_text())["results"]["rap_forecast"]
        assert res["valid,none"] == 1.0 and "spearman,none" in res
        (samples,) = out.rglob("samples_rap_forecast_*.jsonl")
        docs = [json.loads(line)["doc"] for line in samples.read_text().splitlines()]
        assert {d["manifest_hash"] for d in docs} == {mini.manifest_hash}

        inspect_cli = Path(sys.executable).with_name("inspect")
        from rap_benchmark.integrations.inspect import rap_forecast

        env["SCRIPTED_BASE_URL"], env["SCRIPTED_API_KEY"] = url, "unused"
        logs = tmp_path / "logs"
        proc = subprocess.run(
            [str(inspect_cli), "eval", "rap_benchmark/rap_forecast", "-T", f"hub={hub_dir}", "-T", "split=dev"]
            + ["--model", "openai-api/scripted/scripted", "--limit", "2", "--log-dir", str(logs)],
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if proc.returncode != 0 and "No inspect tasks were found" in proc.stdout + proc.stderr:
            # not pip-installed: no entry point; the same task through Inspect's Python API
            (log,) = inspect_ai.eval(
                rap_forecast(hub=str(hub_dir), split="dev"),
                model=inspect_ai.model.get_model("openai-api/scripted/scripted", base_url=url, api_key="unused"),
                limit=2,
                log_dir=str(logs),
                display="none",
            )
            assert log.status == "success"
        else:
            assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from rap_benchmark.integrations.inspect import log_predictions

    preds = log_predictions([logs])
    assert len(preds) == 2 and preds["valid"].all() and set(preds["manifest_hash"]) == {mini.manifest_hash}
    assert not (cache / "instances").exists()  # nothing was built: only the hub view and its search cache
    assert (cache / "hub" / mini.manifest_hash / "papers.parquet").is_file()
