"""Building instances: determinism, hash verification, ``rap info``/``verify``/``demo``, arxiv-sample."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from rap_benchmark.cli import main
from rap_benchmark.core.artifacts import LEDGER_FILE, load_instance
from rap_benchmark.core.dates import add_months, parse_date
from rap_benchmark.core.records import DIRECTION_KEYS, Policy, Split
from rap_benchmark.core.spec import mini_spec
from rap_benchmark.core.sums import SUMS_FILE, verify
from rap_benchmark.pipeline.build import build_instance, instance_info

ARTIFACTS = [
    LEDGER_FILE,
    "assignments.parquet",
    "blocks.parquet",
    "codebooks.json",
    "episodes.parquet",
    "papers.parquet",
    "search_manifest.parquet",
    "truth.parquet",
]


def test_mini_builds_byte_identically_twice(mini_dir: Path, tmp_path: Path, capsys):
    """The second build goes through ``rap build`` and lands on an older build's folder."""
    again = tmp_path / "again"
    shutil.copytree(mini_dir, again)
    (again / "stale.parquet").write_bytes(b"from an older build")
    assert main(["build", "--instance", "mini", "--out", str(again), "--quiet"]) == 0
    assert "built mini" in capsys.readouterr().out
    assert not (again / "stale.parquet").exists()
    assert (again / SUMS_FILE).read_bytes() == (mini_dir / SUMS_FILE).read_bytes()
    listed = sorted(line.split("  ", 1)[1] for line in (mini_dir / SUMS_FILE).read_text().splitlines())
    assert listed == sorted(ARTIFACTS)


@pytest.mark.parametrize("name", ARTIFACTS)
def test_one_changed_byte_fails_verify_naming_the_file(mini_dir: Path, tmp_path: Path, capsys, name: str):
    copy = tmp_path / "copy"
    shutil.copytree(mini_dir, copy)
    path = copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x20
    path.write_bytes(bytes(data))
    assert main(["verify", str(copy)]) == 1
    out = capsys.readouterr().out
    assert f"BAD {name}: sha256 mismatch" in out
    assert sum(line.startswith("BAD") for line in out.splitlines()) == 1


def test_verify_ok_and_extra_or_missing_files(mini_dir: Path, tmp_path: Path, capsys):
    assert main(["verify", str(mini_dir)]) == 0
    assert "OK" in capsys.readouterr().out
    copy = tmp_path / "copy"
    shutil.copytree(mini_dir, copy)
    (copy / "blocks.parquet").unlink()
    (copy / "notes.txt").write_text("added later\n")
    assert main(["verify", str(copy)]) == 1
    out = capsys.readouterr().out
    assert "BAD blocks.parquet: missing" in out and "BAD notes.txt: not listed" in out


def test_artifact_contracts(mini):
    assert list(mini.papers.columns) == ["arxiv_id", "date", "title", "abstract", "categories", "authors"]
    assert list(mini.assignments.columns) == ["arxiv_id", "field_id", "date", "primary", "secondary", "type"]
    assert list(mini.blocks.columns) == ["field_id", "block_id", "split"]
    assert list(mini.search_manifest.columns) == [
        "field_id",
        "origin",
        "regime",
        "start",
        "end",
        "n_papers",
        "shard_hash",
    ]
    key = ["date", "arxiv_id"]
    assert mini.papers[key].equals(mini.papers[key].sort_values(key, ignore_index=True))
    key = ["field_id", "date", "arxiv_id"]
    assert mini.assignments[key].equals(mini.assignments[key].sort_values(key, ignore_index=True))
    # the denormalised date is the paper's v1 date
    dates = mini.papers.set_index("arxiv_id")["date"]
    assert (mini.assignments["arxiv_id"].map(dates) == mini.assignments["date"]).all()
    assert set(mini.assignments["primary"]) <= set(DIRECTION_KEYS) | {"other"}
    assert len(mini.episodes) == len(mini.codebooks) * len(mini.spec.origins) * len(Policy)
    assert set(mini.extras) == {"truth"}
    ledger = json.loads((mini.root / LEDGER_FILE).read_text())
    assert ledger["spec"] == mini_spec().to_dict()
    derived = ledger["derived"]
    assert derived["n_papers"] == len(mini.papers) and derived["n_memberships"] == len(mini.assignments)
    assert sum(derived["assignment_type_shares"].values()) == pytest.approx(1.0)


def test_episode_windows_in_the_built_instance(mini):
    """No y uses a paper outside [T, T+6mo): recount y from the assignments for every episode."""
    from rap_benchmark.pipeline.policies import direction_weights

    a = mini.assignments
    for policy in Policy:
        w = pd.DataFrame(direction_weights(a, policy), columns=list(DIRECTION_KEYS))
        w["field_id"], w["date"] = a["field_id"], a["date"]
        eps = mini.episodes.loc[mini.episodes["policy"] == policy.value]
        for origin in mini.spec.origins:
            end = add_months(parse_date(origin), 6).isoformat()
            inside = w.loc[(w["date"] >= origin) & (w["date"] < end)]
            expected = inside.groupby("field_id")[list(DIRECTION_KEYS)].sum()
            for row in eps.loc[eps["origin"] == origin].itertuples():
                assert list(row.y_counts) == pytest.approx(expected.loc[row.field_id].tolist(), abs=1e-9)


def test_blocks_split_and_codebook_cutoff(mini):
    assert (mini.blocks.groupby("block_id")["split"].nunique() == 1).all()
    assert set(mini.blocks["split"]) == {Split.DEV.value, Split.TEST.value}
    dates = mini.papers.set_index("arxiv_id")["date"]
    exemplars = [e for cb in mini.codebooks.values() for d in cb.directions for e in d.exemplars]
    assert exemplars and (dates.loc[exemplars] < mini.spec.codebook_cutoff).all()


def test_rebuild_replaces_atomically_and_refuses_foreign_folders(tmp_path: Path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("do not delete")
    with pytest.raises(FileExistsError):
        build_instance(mini_spec(), foreign)
    assert (foreign / "thesis.tex").exists()
    assert not any(p.name.startswith(".mine") for p in tmp_path.iterdir())


def test_info_text_and_json(mini_dir: Path, mini, capsys):
    assert main(["info", str(mini_dir)]) == 0
    text = capsys.readouterr().out
    assert f"papers             {len(mini.papers):,}" in text
    assert "(8 directions: 12 fields)" in text
    assert main(["info", str(mini_dir), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == json.loads(json.dumps(instance_info(mini)))
    assert info["fields"] == 12 and info["directions_per_field"] == {"8": 12}
    assert info["split"]["dev"]["fields"] + info["split"]["test"]["fields"] == 12
    assert info["episodes"] == 12 * len(mini.spec.origins)
    canonical = mini.episodes.loc[mini.episodes["policy"] == "canonical"]
    assert info["papers_per_window"]["n_y"]["max"] == canonical["n_y"].max()


def test_info_refuses_a_tampered_instance(mini_dir: Path, tmp_path: Path, capsys):
    copy = tmp_path / "copy"
    shutil.copytree(mini_dir, copy)
    with (copy / "episodes.parquet").open("ab") as fh:
        fh.write(b"\0")
    assert main(["info", str(copy)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rap info: ") and "episodes.parquet" in err and err.count("\n") == 1


# -- the real arXiv sample ----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.shared_data
def test_arxiv_sample_figures(arxiv_sample):
    inst = arxiv_sample
    info = instance_info(inst)
    assert info["fields"] >= 10
    assert info["directions_per_field"] == {"8": info["fields"]}  # eight directions everywhere
    assert set(inst.spec.origins) == set(inst.episodes["origin"])
    assert info["episodes"] == info["fields"] * len(inst.spec.origins)
    assert info["split"]["dev"]["fields"] >= inst.spec.n_dev_seed_fields
    assert info["split"]["test"]["fields"] > 0
    assert (inst.blocks.groupby("block_id")["split"].nunique() == 1).all()
    shares = info["assignment_type_shares"]
    assert sum(shares.values()) == pytest.approx(1.0) and shares["single"] > 0 and shares["boundary"] > 0
    corpus = inst.ledger["derived"]["corpus"]
    assert corpus["route"] == "source" and corpus["n_kept"] == len(inst.papers)
    assert corpus["n_read"] == corpus["n_kept"] + corpus["n_filtered_date"] + corpus["n_filtered_category"] + (
        corpus["n_duplicates"] + corpus["n_malformed"]
    )
    assert inst.papers["date"].min() >= inst.spec.date_start and inst.papers["date"].max() < inst.spec.date_end
    # codebooks use no paper dated at or after the cutoff
    dates = inst.papers.set_index("arxiv_id")["date"]
    exemplars = [e for cb in inst.codebooks.values() for d in cb.directions for e in d.exemplars]
    assert (dates.loc[exemplars] < inst.spec.codebook_cutoff).all()
    # every episode has papers in its windows on this instance
    canonical = inst.episodes.loc[inst.episodes["policy"] == "canonical"]
    assert canonical["n_x"].min() > 0 and canonical["n_y"].min() > 0


def _write_snapshot(papers: pd.DataFrame, path: Path) -> None:
    """Papers in the public metadata snapshot's JSON-lines format (gzipped), one line each."""
    import datetime as dt
    import gzip

    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for row in papers.itertuples(index=False):
            day = dt.date.fromisoformat(row.date)
            created = dt.datetime(day.year, day.month, day.day, 17, 30).strftime("%a, %d %b %Y %H:%M:%S GMT")
            record = {
                "id": row.arxiv_id,
                "authors": ", ".join(row.authors),
                "title": row.title,
                "abstract": "  " + row.abstract + "\n",
                "categories": " ".join(row.categories),
                "versions": [{"version": "v1", "created": created}],
                "authors_parsed": [[a.split(" ")[-1], " ".join(a.split(" ")[:-1]), ""] for a in row.authors],
            }
            fh.write(json.dumps(record) + "\n")
        fh.write('{"id": "2401.99999", "title": "truncated line\n')


def test_build_from_a_snapshot_source(mini, tmp_path: Path):
    """The source route (corpus reader -> text fields -> codebooks -> instrument) end to end."""
    papers = mini.papers.sample(n=6000, random_state=3).sort_values(["date", "arxiv_id"])
    source = tmp_path / "arxiv-metadata-oai-snapshot.json.gz"
    _write_snapshot(papers, source)
    spec = mini_spec().replace(name="snapshot-test", n_fields=6, min_field_papers=50, n_dev_seed_fields=2)
    out = build_instance(spec, tmp_path / "built", source=source)
    assert verify(out) == []
    assert not (out / "truth.parquet").exists()
    inst = instance_info(load_instance(out))
    assert inst["papers"] == 6000 and 1 <= inst["fields"] <= 6
    assert inst["directions_per_field"] == {"8": inst["fields"]}
    corpus = json.loads((out / LEDGER_FILE).read_text())["derived"]["corpus"]
    assert corpus["format"] == "snapshot" and corpus["n_kept"] == 6000 and corpus["n_malformed"] == 1
    assert corpus["malformed"][0]["line"] == 6001
