"""The embedded offline instance end to end: build, verify, serve in process, sweep, leak probe."""

from __future__ import annotations

import datetime as dt
import json
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from citecast_specs import load_specs

from rap_benchmark.citecast.baselines import best_constant, sweep, write_sweep
from rap_benchmark.citecast.client import InProcessClient
from rap_benchmark.citecast.embedded import TRACKER_HOST, EmbeddedConfig, build_embedded, generate_cohort
from rap_benchmark.citecast.env import CiteCastEnv
from rap_benchmark.citecast.instance import load_instance
from rap_benchmark.citecast.leak_probe import citation_figures, run_leak_probe
from rap_benchmark.citecast.records import TaskSplit
from rap_benchmark.citecast.reward import rewards
from rap_benchmark.core.sums import verify

SHARED_ARXIV = Path(
    os.environ.get("RAP_SHARED_ARXIV", Path(__file__).resolve().parents[1].parent / "shared" / "data" / "arxiv")
)


@pytest.fixture(scope="module")
def instance_dir(citecast_embedded_dir: Path) -> Path:
    return citecast_embedded_dir  # the session's build (tests/conftest.py)


@pytest.fixture(scope="module")
def inst(instance_dir: Path):
    return load_instance(instance_dir)


def test_instance_files_verified_and_split(instance_dir: Path, inst) -> None:
    assert verify(instance_dir) == []
    tasks = list(inst.tasks.values())
    splits = Counter(t.split for t in tasks)
    assert splits[TaskSplit.TRAIN] == 300 and splits[TaskSplit.TEST] == 30
    assert {t.band for t in tasks if t.split is TaskSplit.TEST} == {t.band for t in tasks}
    assert all(t.paper.arxiv_id.startswith("2601.") for t in tasks)
    for split in TaskSplit:
        assert {s.task_id for s in load_specs(instance_dir, split)} == {t.task_id for t in tasks if t.split is split}
    m = inst.manifest
    assert "NegativeBinomial" in m["provenance"]["target_model"] and m["cutoff"] == "2026-01-31"
    assert m["n_excluded"] > 0 and m["corpus"]["sub_corpora"]["news"] > 0


def test_corpus_has_post_cutoff_crawls_that_are_never_served(inst) -> None:
    late = [d for d in inst.corpus.documents if d.crawl_date > inst.cutoff]
    assert any(d.url.startswith(TRACKER_HOST) for d in late) and any(d.sub_corpus.value == "arxiv" for d in late)
    view = inst.corpus.view(inst.cutoff)
    assert all(d.crawl_date <= inst.cutoff for d in view.documents)
    tracker = next(d for d in late if d.url.startswith(TRACKER_HOST))
    assert view.fetch(tracker.url) is None


def test_target_model_drivers_show_in_targets() -> None:
    gen = generate_cohort(EmbeddedConfig())
    lat = gen.latent
    assert 0.25 < (lat["target"] == 0).mean() < 0.6  # heavy mass at zero, as in the real cohort
    # the latent log-mean drives the count: Spearman correlation clearly positive
    from scipy.stats import spearmanr

    assert spearmanr(lat["log_mu"], lat["target"]).statistic > 0.5
    again = generate_cohort(EmbeddedConfig())
    assert again.latent.equals(lat) and again.citations == gen.citations  # deterministic


def test_sweep_baselines(inst, tmp_path: Path) -> None:
    tasks = list(inst.tasks.values())
    result = sweep(tasks)
    paths = write_sweep(result, tmp_path)
    rows = [json.loads(x) for x in paths[0].read_text().splitlines()]
    assert len(rows) == 3 * len(tasks)
    per = result.per_task
    np.testing.assert_array_equal(
        per["reward"].to_numpy(), rewards(per["prediction"].to_numpy(), per["target"].to_numpy())
    )
    s = result.summary.set_index(["baseline", "split"])["mean_reward"]
    for split in ("train", "test"):
        assert s[("band_oracle", split)] > s[("blind_constant", split)]
    assert s[("category_constant", "train")] >= s[("blind_constant", "train")]  # a refinement fitted on train
    train_t = np.array([t.target for t in tasks if t.split is TaskSplit.TRAIN])
    c, mean = best_constant(train_t)
    assert c == result.fitted["blind_constant"]
    for other in range(0, 60):  # no integer constant does better on train (brute force oracle)
        assert rewards(np.full(len(train_t), other), train_t).mean() <= mean + 1e-12
    assert "band_oracle" in result.table()


def test_leak_probe_finds_no_leak_and_scans_figures(instance_dir: Path, inst) -> None:
    env = CiteCastEnv.from_instance(instance_dir)
    rows = run_leak_probe(InProcessClient(env), list(inst.tasks.values()), n=10)
    assert len(rows) == 10 and rows[0].target == max(t.target for t in inst.tasks.values())
    assert not any(r.leak for r in rows)
    assert len(env) == 0  # probe sessions closed
    figures = citation_figures('cited by 1,204 papers; 12 citations; "citationCount": 7; times cited: 3; 2026 model')
    assert sorted(set(figures)) == [3, 7, 12, 1204]


def test_in_process_run_matches_targets(instance_dir: Path, inst) -> None:
    env = CiteCastEnv.from_instance(instance_dir)
    client = InProcessClient(env)
    for tid in env.task_ids("test")[:5]:
        sid = client.start(tid)["session_id"]
        hits = client.call(sid, "web_search", {"query": inst.tasks[tid].paper.title})["observation"]
        assert hits and all(set(h) == {"title", "url", "snippet"} for h in hits)
        for h in hits:
            page = client.call(sid, "web_fetch", {"url": h["url"]})["observation"]
            assert dt.date.fromisoformat(page["crawl_date"]) <= env.cutoff
        out = client.call(sid, "submit_prediction", {"prediction": 5, "justification": "test"})
        assert out["reward"] == pytest.approx(float(rewards(5, inst.tasks[tid].target)))


@pytest.mark.shared_data
@pytest.mark.slow
def test_embedded_with_shared_arxiv(tmp_path: Path) -> None:
    if not SHARED_ARXIV.is_dir():
        pytest.skip(f"{SHARED_ARXIV} is absent")
    out = build_embedded(tmp_path / "emb", arxiv_source=SHARED_ARXIV)
    inst = load_instance(out)
    real = [d for d in inst.corpus.documents if d.sub_corpus.value == "arxiv" and d.crawl_date >= dt.date(2025, 12, 1)]
    assert len(real) > 5000
    assert inst.manifest["provenance"]["arxiv_source"] == "shared arXiv sample"
