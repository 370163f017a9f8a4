"""Exported Hugging Face repos: every repo loads offline with ``datasets.load_dataset`` and holds
exactly the artifact's rows; withheld targets are absent and committed; publish never touches
the network in tests."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rap_benchmark.core.artifacts import codebook_to_dict
from rap_benchmark.core.canonical import commitment, content_hash, read_salt, target_values
from rap_benchmark.core.errors import FileFormatError
from rap_benchmark.core.schemas import ASSIGNMENT_LABELS, EPISODE_TARGET_FLAGS, EPISODE_TARGETS
from rap_benchmark.core.sums import sha256_file
from rap_benchmark.hub import export_instance, publish, read_manifest, verify_reveal
from rap_benchmark.hub.layout import PRIVATE_DIR, REPO_NAMES

datasets = pytest.importorskip("datasets")
SALT = bytes(range(32))


def read_front_matter(readme: str | Path) -> dict[str, Any]:
    """Parse the YAML front matter of a card (the block between the first two ``---`` lines)."""
    import yaml

    text = Path(readme).read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        raise ValueError(f"{readme}: no YAML front matter")
    end = text.index("\n---", 4)
    return yaml.safe_load(text[4:end]) or {}


def _dates(s: pd.Series) -> pd.Series:
    return s.map(lambda v: v if isinstance(v, str) else pd.Timestamp(v).date().isoformat())


def expected_tables(inst) -> dict[tuple[str, str, str], pd.DataFrame]:
    """(repo, config, split) -> rows, derived from the artifacts independently of the exporter."""
    split_of = dict(zip(inst.blocks["field_id"], inst.blocks["split"], strict=True))
    out: dict[tuple[str, str, str], pd.DataFrame] = {}
    papers = inst.papers.copy()
    papers["date"] = _dates(papers["date"])
    out[("papers", "default", "corpus")] = papers
    asg = inst.assignments.copy()
    asg["date"] = _dates(asg["date"])
    eps = inst.episodes.copy()
    eps["origin"] = _dates(eps["origin"])
    eps.insert(0, "episode_id", eps["field_id"] + "@" + eps["origin"])
    for split in ("dev", "test"):
        out[("assignments", "default", split)] = asg[asg["field_id"].map(split_of) == split]
        fields = [f for f in inst.field_ids if split_of[f] == split]
        out[("splits", "fields", split)] = inst.blocks[inst.blocks["split"] == split].sort_values("field_id")
        rows = []
        for f in fields:
            d = codebook_to_dict(inst.codebooks[f])
            d["block_id"] = inst.blocks.set_index("field_id").loc[f, "block_id"]
            d["split"] = split
            rows.append(d)
        out[("fields", "default", split)] = pd.DataFrame(rows)
        for policy in eps["policy"].unique():
            out[("episodes", policy, split)] = eps[(eps["policy"] == policy) & (eps["split"] == split)]
    blocks = (
        inst.blocks.groupby("block_id", sort=True)
        .agg(split=("split", "first"), field_ids=("field_id", lambda f: sorted(f)))
        .reset_index()
    )
    blocks["n_fields"] = blocks["field_ids"].map(len)
    for split in ("dev", "test"):
        out[("splits", "blocks", split)] = blocks[blocks["split"] == split]
    sm = inst.search_manifest.copy()
    for col in ("origin", "start", "end"):
        sm[col] = _dates(sm[col])
    for regime in ("fixed", "expanding"):
        out[("search_manifests", "default", regime)] = sm[sm["regime"] == regime]
    return out


@pytest.fixture(scope="module")
def public_hub(mini, tmp_path_factory: pytest.TempPathFactory) -> Path:
    hub = tmp_path_factory.mktemp("hub_public")
    export_instance(mini, hub)
    return hub


@pytest.fixture(scope="module")
def withheld_hub(mini, tmp_path_factory: pytest.TempPathFactory) -> Path:
    hub = tmp_path_factory.mktemp("hub_withheld")
    export_instance(mini, hub, withhold_from=max(mini.spec.origins), salt=SALT)
    return hub


def test_every_repo_loads_offline_and_matches_the_artifacts(mini, public_hub: Path) -> None:
    expected = expected_tables(mini)
    seen = set()
    for repo in REPO_NAMES:
        repo_dir = public_hub / "rap" / repo
        manifest = read_manifest(repo_dir)
        assert manifest["manifest_hash"] == mini.manifest_hash
        for config, splits in manifest["configs"].items():
            ds = datasets.load_dataset(str(repo_dir), config)
            assert set(ds) == set(splits)
            for split, info in splits.items():
                loaded = ds[split].to_pandas()
                want = expected[(repo, config, split)]
                assert len(loaded) == len(want) == info["rows"]
                assert content_hash(loaded) == content_hash(want) == info["content_hash"]
                assert sha256_file(repo_dir / info["path"]) == info["sha256"]
                seen.add((repo, config, split))
    assert seen == set(expected)


def test_hub_id_resolves_the_local_folder_offline(public_hub: Path, mini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(public_hub)
    ds = datasets.load_dataset("rap/assignments")
    assert sum(len(ds[s]) for s in ds) == len(mini.assignments)
    from rap_benchmark.hub import load_repo, load_table

    assert (
        len(load_repo("rap/splits", "blocks", split="dev"))
        == (mini.blocks.drop_duplicates("block_id")["split"] == "dev").sum()
    )
    assert len(load_table("rap/episodes", "canonical", "test")) == len(
        mini.episodes[(mini.episodes["policy"] == "canonical") & (mini.episodes["split"] == "test")]
    )


def test_card_declares_every_file_and_states_version_and_hash(public_hub: Path, mini) -> None:
    for repo in REPO_NAMES:
        repo_dir = public_hub / "rap" / repo
        meta = read_front_matter(repo_dir / "README.md")
        manifest = read_manifest(repo_dir)
        declared = {(c["config_name"], f["split"], f["path"]) for c in meta["configs"] for f in c["data_files"]}
        on_disk = {(c, s, i["path"]) for c, ss in manifest["configs"].items() for s, i in ss.items()}
        assert declared == on_disk
        assert {p.relative_to(repo_dir).as_posix() for p in repo_dir.rglob("*.parquet")} == {p for *_, p in on_disk}
        assert sum(bool(c.get("default")) for c in meta["configs"]) == 1
        text = (repo_dir / "README.md").read_text(encoding="utf-8")
        assert mini.manifest_hash in text and mini.spec.version in text
        assert "## Changelog" in text and "## Licence" in text and "CC0" in text and "MIT" in text
        assert not list(repo_dir.glob("*.py")), "no loading scripts"
        assert meta["task_categories"] and meta["size_categories"]
        assert "synthetic" in meta["tags"] and "arxiv" not in meta["tags"]  # mini is generated, not arXiv data
        assert "arXiv metadata" not in text and "What you can and cannot recompute" in text
    assert read_front_matter(public_hub / "rap" / "papers" / "README.md")["size_categories"] == ["10K<n<100K"]


def _public_columns(hub: Path) -> dict[tuple[str, str, str], list[str]]:
    out = {}
    for repo_dir in (hub / "rap").iterdir():
        for path in repo_dir.rglob("*.parquet"):
            config, split = path.parent.name, path.stem
            out[(repo_dir.name, config, split)] = pq.read_schema(path).names
    return out


def test_no_public_repo_holds_a_withheld_target(withheld_hub: Path, mini) -> None:
    last = max(mini.spec.origins)
    cols = _public_columns(withheld_hub)
    for (_repo, config, _split), names in cols.items():
        if config.endswith("_heldout"):
            assert not set(names) & (set(EPISODE_TARGETS) | set(ASSIGNMENT_LABELS) | set(EPISODE_TARGET_FLAGS))
            assert "target_sha256" in names
    ep = pd.read_parquet(withheld_hub / "rap/episodes/data/canonical/test.parquet")
    assert (ep["origin"] < last).all(), (
        "test episodes whose target window reaches the cutoff must leave the public config"
    )
    held = pd.read_parquet(withheld_hub / "rap/episodes/data/canonical_heldout/test.parquet")
    assert set(held["origin"]) == {last} and len(held) > 0
    asg = pd.read_parquet(withheld_hub / "rap/assignments/data/default/test.parquet")
    assert (asg["date"] < last).all()
    # everything withheld is exactly the Test rows from the cutoff on: nothing lost, nothing extra
    test_fields = set(mini.blocks.loc[mini.blocks["split"] == "test", "field_id"])
    n_late = int(((_dates(mini.assignments["date"]) >= last) & mini.assignments["field_id"].isin(test_fields)).sum())
    assert len(pd.read_parquet(withheld_hub / "rap/assignments/data/default_heldout/test.parquet")) == n_late
    held_asg = pd.read_parquet(withheld_hub / "rap/assignments/data/default_heldout/test.parquet")
    assert list(held_asg.columns) == ["key", "target_sha256"]  # membership withheld with the labels
    assert not held_asg["key"].str.contains("/").any()
    papers = pd.read_parquet(withheld_hub / "rap/papers/data/default/corpus.parquet")
    assert (papers["date"] < last).all() and len(papers) == int((_dates(mini.papers["date"]) < last).sum())
    dev = pd.read_parquet(withheld_hub / "rap/episodes/data/canonical/dev.parquet")
    assert dev["y"].notna().all() or "y" in dev.columns  # Dev targets stay public
    assert not (withheld_hub / "rap" / PRIVATE_DIR).exists()


def test_withheld_test_targets_cannot_be_recounted_from_the_public_repos(withheld_hub: Path, mini) -> None:
    """Regression (issue 16): the Test ``y`` was recomputable from public data: ``papers`` held the
    target-window papers and ``assignments/default_heldout`` their membership (``n_y`` came out
    exact for 6 of 8 fields). Now no public row of a Test field falls in a withheld window."""
    held = pd.read_parquet(withheld_hub / "rap/episodes/data/canonical_heldout/test.parquet")
    public_rows = []
    for path in (withheld_hub / "rap").rglob("*.parquet"):
        frame = pd.read_parquet(path)
        if {"field_id", "date"} <= set(frame.columns):
            public_rows.append(frame[["field_id", "date"]])
    rows = pd.concat(public_rows, ignore_index=True)
    papers = pd.read_parquet(withheld_hub / "rap/papers/data/default/corpus.parquet")
    from rap_benchmark.core.dates import add_months, parse_date

    for fid, origin in zip(held["field_id"], held["origin"], strict=True):
        end = add_months(parse_date(origin), mini.spec.window_months).isoformat()
        in_window = rows[(rows["field_id"] == fid) & (rows["date"] >= origin) & (rows["date"] < end)]
        assert in_window.empty, f"{fid}@{origin}: {len(in_window)} public rows in its target window"
        assert not ((papers["date"] >= origin) & (papers["date"] < end)).any()


def test_commitments_verify_against_the_reveal_and_catch_tampering(withheld_hub: Path, tmp_path: Path) -> None:
    private = withheld_hub / PRIVATE_DIR
    for repo in ("episodes", "assignments"):
        report = verify_reveal(withheld_hub / "rap" / repo, private)
        assert report.ok, report.problems
        assert report.checked > 0
    held = pd.read_parquet(private / "episodes/canonical_heldout/test.parquet")
    public = pd.read_parquet(withheld_hub / "rap/episodes/data/canonical_heldout/test.parquet")
    targets = target_values(held, (*EPISODE_TARGETS, *EPISODE_TARGET_FLAGS))
    assert commitment(SALT, held["key"][0], targets[0]) == public["target_sha256"][0]
    # a changed target, or a wrong salt, no longer verifies
    import shutil

    fake = tmp_path / "fake"
    shutil.copytree(private, fake)
    bad = held.copy()
    bad.at[0, "n_y"] = float(bad.at[0, "n_y"]) + 1
    bad.to_parquet(fake / "episodes/canonical_heldout/test.parquet")
    report = verify_reveal(withheld_hub / "rap" / "episodes", fake)
    assert not report.ok and any("does not match" in p for p in report.problems)
    (fake / "salt.hex").write_text("ab" * 32 + "\n", encoding="ascii")
    assert not verify_reveal(withheld_hub / "rap" / "assignments", fake).ok
    (fake / "salt.hex").write_text("not hex\n", encoding="ascii")  # a refusal naming the file, not a crash
    report = verify_reveal(withheld_hub / "rap" / "assignments", fake)
    assert not report.ok and report.problems[0].startswith(f"{fake / 'salt.hex'}: not a hex salt")


@settings(max_examples=50, deadline=None)
@given(salt=st.binary(max_size=40), spaces=st.sampled_from(["", "\n", "  \n\n"]))
def test_a_salt_file_reads_back_its_bytes_or_is_refused_naming_it(salt: bytes, spaces: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "salt.hex"
        path.write_text(salt.hex() + spaces, encoding="ascii")
        if len(salt) >= 16:
            assert read_salt(path) == salt
        else:
            with pytest.raises(FileFormatError, match="a salt needs at least 16 bytes") as info:
                read_salt(path)
            assert info.value.path == path
        path.write_text(salt.hex() + "x", encoding="ascii")
        with pytest.raises(FileFormatError, match="not a hex salt"):
            read_salt(path)


def test_equal_targets_get_different_commitments() -> None:
    """Regression: a single global salt over the target alone would give every paper labelled
    D3 the same hash, revealing the label partition before the reveal."""
    a = commitment(SALT, "2401.00001/f000", {"primary": "D3", "secondary": None, "type": "single"})
    b = commitment(SALT, "2401.00002/f000", {"primary": "D3", "secondary": None, "type": "single"})
    assert a != b


def test_export_is_deterministic_given_the_salt(mini, withheld_hub: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    export_instance(mini, again, withhold_from=max(mini.spec.origins), salt=SALT)
    for repo in ("episodes", "assignments", "fields"):
        a = json.loads((withheld_hub / "rap" / repo / "rap_manifest.json").read_text())
        b = json.loads((again / "rap" / repo / "rap_manifest.json").read_text())
        assert a == b
        assert (withheld_hub / "rap" / repo / "README.md").read_text() == (
            again / "rap" / repo / "README.md"
        ).read_text()


def test_withholding_before_the_last_origin_is_refused(mini, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="precedes the last origin"):
        export_instance(mini, tmp_path, withhold_from=mini.spec.origins[-2], salt=SALT)


class FakeHfApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict]] = []

    def create_repo(self, repo_id, **kw):
        self.calls.append(("create_repo", repo_id, kw))

    def upload_folder(self, **kw):
        self.calls.append(("upload_folder", kw["repo_id"], kw))
        return type("CommitInfo", (), {"oid": "c0ffee"})()

    def create_tag(self, repo_id, **kw):
        self.calls.append(("create_tag", repo_id, kw))


def test_publish_creates_uploads_and_tags_every_repo_but_never_private(withheld_hub: Path) -> None:
    api = FakeHfApi()
    steps = publish(withheld_hub, org="my-lab", local_org="rap", tag="v1.0.0", api=api)
    repos = {f"my-lab/{n}" for n in REPO_NAMES}
    assert {c[1] for c in api.calls} == repos
    assert len(api.calls) == 3 * len(repos) == len(steps)
    for action, _repo_id, kw in api.calls:
        if action == "create_repo":
            assert kw["repo_type"] == "dataset" and kw["exist_ok"]
        if action == "upload_folder":
            assert PRIVATE_DIR not in kw["folder_path"] and Path(kw["folder_path"]).parent.name == "rap"
        if action == "create_tag":
            assert kw["tag"] == "v1.0.0" and kw["revision"] == "c0ffee"
    dry = FakeHfApi()
    publish(withheld_hub, org="rap", tag="v1.0.0", api=dry, dry_run=True)
    assert dry.calls == []


def test_publish_refuses_a_repo_changed_after_export(public_hub: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "hub"
    shutil.copytree(public_hub, copy)
    target = copy / "rap/fields/data/default/dev.parquet"
    pd.read_parquet(target).head(1).to_parquet(target)
    with pytest.raises(RuntimeError, match="failed verification"):
        publish(copy, org="rap", tag="v1", api=FakeHfApi())


@pytest.fixture(scope="module")
def citecast_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from rap_benchmark.citecast.embedded import EmbeddedConfig, generate_cohort
    from rap_benchmark.citecast.tasks import build_tasks, write_task_files

    cfg = EmbeddedConfig(n_tasks=44)
    gen = generate_cohort(cfg)
    out = tmp_path_factory.mktemp("citecast")
    write_task_files(out, build_tasks(gen.papers, gen.citations, gen.withdrawn, n_total=cfg.n_tasks))
    return out


def test_citecast_test_targets_are_absent_and_committed(mini, citecast_dir: Path, tmp_path: Path) -> None:
    from rap_benchmark.citecast.tasks import load_tasks
    from rap_benchmark.hub.export import citecast_frame

    export_instance(mini, tmp_path, salt=SALT, citecast_tasks=citecast_frame(citecast_dir), repos=["citecast_tasks"])
    repo = tmp_path / "rap" / "citecast_tasks"
    ds = datasets.load_dataset(str(repo), "default")
    held = datasets.load_dataset(str(repo), "default_heldout")
    tasks = load_tasks(citecast_dir)
    n_test = sum(t.split.value == "test" for t in tasks.values())
    assert len(ds["train"]) + len(held["test"]) == len(tasks) and len(held["test"]) == n_test > 0
    assert {"target", "band"} <= set(ds["train"].column_names)
    assert not {"target", "band", "s2_paper_id"} & set(held["test"].column_names)  # the S2 id leads to the target
    assert "s2_paper_id" in ds["train"].column_names
    by_id = {r["task_id"]: r["target"] for r in ds["train"]}
    assert all(tasks[k].target == v for k, v in by_id.items())
    assert verify_reveal(repo, tmp_path / PRIVATE_DIR).ok
    text = (repo / "README.md").read_text(encoding="utf-8")  # regression: the CiteCast card described RAP
    assert "rap citecast build" in text and "Built by `rap build`" not in text and "| origins |" not in text
    assert read_front_matter(repo / "README.md")["task_categories"] == ["tabular-regression"]


def test_cli_export_publish_dry_run_and_verify_reveal(mini_dir: Path, tmp_path: Path, capsys) -> None:
    from rap_benchmark.cli import main

    salt_file = tmp_path / "salt.hex"
    salt_file.write_text(SALT.hex() + "\n", encoding="ascii")
    hub = tmp_path / "hub"
    assert (
        main(
            [
                "hub",
                "export",
                str(mini_dir),
                "--out",
                str(hub),
                "--withhold-test-targets",
                "--salt-file",
                str(salt_file),
            ]
        )
        == 0
    )
    assert (hub / PRIVATE_DIR / "salt.hex").read_text().strip() == SALT.hex()
    assert main(["hub", "publish", str(hub), "--org", "rap", "--tag", "v1.0.0", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("plan\tcreate_tag") == len(REPO_NAMES) and PRIVATE_DIR not in out
    assert (
        main(["leaderboard", "verify-reveal", str(hub / "rap" / "episodes"), "--reveal", str(hub / PRIVATE_DIR)]) == 0
    )
    assert main(["harness", "lm-eval-path"]) == 0
    assert Path(capsys.readouterr().out.strip().splitlines()[-1]).is_dir()


@pytest.mark.parametrize(
    ("text", "problem"), [("zz" * 32, "not a hex salt ("), ("ab" * 15, "a salt needs at least 16 bytes")]
)
def test_cli_export_refuses_a_bad_salt_file_in_one_line(
    mini_dir: Path, tmp_path: Path, capsys, text: str, problem: str
) -> None:
    """Regression: ``rap hub export --salt-file`` with a file that is not hex ended in a bare
    ValueError traceback; a short one is refused by the same reader as a sealed forecast's."""
    from rap_benchmark.cli import main

    salt_file = tmp_path / "salt.hex"
    salt_file.write_text(text + "\n", encoding="ascii")
    hub = tmp_path / "hub"
    argv = ["hub", "export", str(mini_dir), "--out", str(hub), "--withhold-test-targets", "--salt-file", str(salt_file)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.endswith("\n") and err.count("\n") == 1, err  # the progress bar is cleared, not left behind
    assert err.split("\r")[-1].startswith(f"rap hub export: {salt_file}: {problem}")
    assert not hub.exists()
