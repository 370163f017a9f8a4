"""The fitted-instrument cache (pipeline/instrument/cache.py): a hit gives the same artifacts.

A real source corpus (9,000 of mini's papers written as a parquet folder) is built with the cache
off, then cold and warm with the cache on, then cut at ``eligibility_end`` (the living-RAP
parent's shape). Every build's files must be byte-identical to the uncached build's where they
should be, and a warm build must not fit anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sources import file_digests, write_source

from rap_benchmark.pipeline.build import build_instance
from rap_benchmark.pipeline.instrument import cache

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def corpus(mini, tmp_path_factory):
    """(spec, the papers as the build reads them, the source folder, a scratch root)."""
    from rap_benchmark.pipeline.build import normalise_papers
    from rap_benchmark.pipeline.corpus import read_corpus

    papers = mini.papers.sample(n=9000, random_state=5).sort_values(["date", "arxiv_id"])
    spec = mini.spec.replace(name="cache-test", n_fields=6, min_field_papers=50, n_dev_seed_fields=2)
    root = tmp_path_factory.mktemp("cache")
    src = write_source(papers, root / "src")
    read, _ = read_corpus(src, spec)
    return spec, normalise_papers(read), src, root


def _no_fit(monkeypatch):
    import rap_benchmark.pipeline.fields as fields

    def refuse(*args, **kwargs):
        raise AssertionError("the instrument was fitted although a cached one matched")

    monkeypatch.setattr(fields, "fit_fields", refuse)


def test_a_cache_hit_builds_the_same_bytes_without_fitting(corpus, monkeypatch, tmp_path):
    spec, papers, src, _ = corpus
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    plain = build_instance(spec, tmp_path / "plain", source=src, freeze_instrument=True, cache=False)
    assert not (tmp_path / "cache").exists(), "cache=False wrote to the cache"
    cold = build_instance(spec, tmp_path / "cold", source=src, freeze_instrument=True)
    entries = [e for e in (tmp_path / "cache" / "instrument").iterdir() if not e.name.startswith(".")]  # not the lock
    assert [e.name for e in entries] == [cache.instrument_key(papers, spec)]
    _no_fit(monkeypatch)
    warm = build_instance(spec, tmp_path / "warm", source=src, freeze_instrument=True)
    assert file_digests(plain) == file_digests(cold) == file_digests(warm)


def test_the_eligibility_cut_reuses_the_full_builds_instrument(corpus, monkeypatch, tmp_path):
    """The living parent (data cut at eligibility_end, fewer origins) fits what the full build fit."""
    spec, papers, src, root = corpus
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    full = build_instance(spec, tmp_path / "full", source=src, freeze_instrument=True)
    cut_papers = papers[papers["date"].astype(str) < spec.eligibility_end]
    assert len(cut_papers) < len(papers)
    cut_spec = spec.replace(origins=tuple(o for o in spec.origins if o < spec.eligibility_end))
    cut_spec = cut_spec.replace(date_end=spec.eligibility_end)
    assert cache.instrument_key(cut_papers, cut_spec) == cache.instrument_key(papers, spec)
    cut_src = write_source(cut_papers, tmp_path / "cut-src")
    _no_fit(monkeypatch)
    cut = build_instance(cut_spec, tmp_path / "cut", source=cut_src, freeze_instrument=True)
    for name in ("codebooks.json", "instrument/instrument.json", "instrument/arrays.bin"):
        assert (cut / name).read_bytes() == (full / name).read_bytes(), name
    monkeypatch.undo()  # fitting allowed again, and the cache off: a fresh fit gives the same bytes
    monkeypatch.setenv(cache.CACHE_ENV, "off")
    fresh = build_instance(cut_spec, tmp_path / "fresh", source=cut_src, freeze_instrument=True, cache=True)
    assert file_digests(fresh) == file_digests(cut)


def test_the_key_moves_with_what_the_fit_reads(corpus):
    spec, papers, _, _ = corpus
    key = cache.instrument_key(papers, spec)
    late = papers["date"].astype(str) >= spec.eligibility_end
    edited = papers.copy()
    edited.loc[late.idxmax(), "title"] = "changed after the eligibility frame"
    assert cache.instrument_key(edited, spec) == key  # the fit never reads it
    edited = papers.copy()
    edited.loc[(~late).idxmax(), "abstract"] = "changed inside the frame"
    assert cache.instrument_key(edited, spec) != key
    assert cache.instrument_key(papers, spec.replace(seed=spec.seed + 1)) != key
    assert cache.instrument_key(papers, spec.replace(codebook_cutoff="2023-07-01")) != key
    assert cache.instrument_key(papers, spec.replace(name="renamed", origins=spec.origins[:1])) == key


def test_a_damaged_entry_is_refitted(corpus, monkeypatch, tmp_path):
    spec, papers, src, _ = corpus
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    first = build_instance(spec, tmp_path / "a", source=src)
    entry = tmp_path / "cache" / "instrument" / cache.instrument_key(papers, spec)
    (entry / "instrument" / "instrument.json").write_text("{not json", encoding="utf-8")
    second = build_instance(spec, tmp_path / "b", source=src)
    assert file_digests(first) == file_digests(second)
    assert cache.lookup(entry.name) is not None, "the refitted instrument was not stored again"


def test_cli_no_cache_fits_and_writes_nothing(corpus, tmp_path):
    spec, _, src, _ = corpus
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(REPO), cache.CACHE_ENV: str(tmp_path / "cache")}
    argv = [sys.executable, "-m", "rap_benchmark", "build", "--source", str(src), "--spec", str(spec_file)]
    r = subprocess.run(
        [*argv, "--out", str(tmp_path / "out"), "--quiet", "--no-cache"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "cache").exists()


def test_a_second_build_waits_for_the_first_fit_of_the_same_inputs(monkeypatch, tmp_path):
    """While one process fits a key, another cannot take the key's lock (it waits, then hits)."""
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path / "cache"))
    probe = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n"
    )
    lock = tmp_path / "cache" / "instrument" / ".k.lock"
    with cache.fitting("k"):
        held = subprocess.run([sys.executable, "-c", probe, str(lock)])
    free = subprocess.run([sys.executable, "-c", probe, str(lock)])
    assert (held.returncode, free.returncode) == (3, 0)
    monkeypatch.setenv(cache.CACHE_ENV, "off")
    with cache.fitting("k"):  # off: nothing to lock, nothing written
        pass
