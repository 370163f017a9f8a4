"""Artifacts and search under tampering and bad arguments (issue 14, "Artifacts and search")."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rap_benchmark.cli import main
from rap_benchmark.core.artifacts import load_instance
from rap_benchmark.core.dates import parse_date
from rap_benchmark.core.errors import ArtifactError, InputError
from rap_benchmark.core.sums import SUMS_FILE, manifest_hash


def _consistent_edit(src: Path, dst: Path) -> Path:
    """Change codebooks.json and its SHA256SUMS line together, as a careful tamperer would."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".cache"))
    books = json.loads((dst / "codebooks.json").read_text())
    books[0]["directions"][0]["name"] = "an edited direction"
    data = (json.dumps(books, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode()
    (dst / "codebooks.json").write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    lines = [
        f"{digest}  codebooks.json" if line.endswith("  codebooks.json") else line
        for line in (dst / SUMS_FILE).read_text().splitlines()
    ]
    (dst / SUMS_FILE).write_text("\n".join(lines) + "\n")
    return dst


def test_consistent_edit_is_caught_by_expect(mini_dir, tmp_path, capsys):
    """Bug: editing codebooks.json and its SHA256SUMS line passed rap verify, and info/search served
    the edited data; nothing compared an instance with the manifest it claims to be."""
    edited = _consistent_edit(mini_dir, tmp_path / "edited")
    assert main(["verify", str(edited)]) == 0  # its own SHA256SUMS agrees: verify alone cannot tell
    capsys.readouterr()
    golden = Path(__file__).resolve().parents[1] / "manifests" / "mini"
    for expect in (str(mini_dir / SUMS_FILE), str(mini_dir), manifest_hash(mini_dir), str(golden)):
        assert main(["verify", str(edited), "--expect", expect]) == 1, expect
        out = capsys.readouterr().out
        assert "manifest hash" in out
        if not expect.isalnum():
            assert "BAD codebooks.json: differs from the expected manifest" in out
    assert main(["verify", str(mini_dir), "--expect", manifest_hash(mini_dir)]) == 0
    assert main(["verify", str(mini_dir), "--expect", "mini"]) == 0  # the shipped golden manifest by name


def test_load_instance_refuses_a_mismatched_expected_hash(mini_dir, tmp_path):
    edited = _consistent_edit(mini_dir, tmp_path / "edited")
    assert load_instance(mini_dir, expect=manifest_hash(mini_dir)).manifest_hash == manifest_hash(mini_dir)
    with pytest.raises(ArtifactError, match="not the expected instance"):
        load_instance(edited, expect=manifest_hash(mini_dir))
    with pytest.raises(InputError, match="--expect"):
        load_instance(mini_dir, expect="not-a-hash-or-file")


def test_expect_reads_the_hash_stated_by_an_exported_manifest(mini_dir, tmp_path):
    card = tmp_path / "manifest.json"
    card.write_text(json.dumps({"manifest_hash": manifest_hash(mini_dir), "repo": "rap/episodes"}))
    assert main(["verify", str(mini_dir), "--expect", str(card)]) == 0


@pytest.mark.parametrize("bad", ["2025-1-1", "2025-06-01T00:00:00", "20250601", "2025-13-01", "", "x" * 10_000])
def test_one_date_format(bad):
    """Bug: rap search accepted 2025-06-01T00:00:00 where it refused 2025-1-1; one format now."""
    with pytest.raises(InputError, match="not a YYYY-MM-DD date") as err:
        parse_date(bad)
    assert len(str(err.value)) < 120
    assert parse_date("2025-06-01").isoformat() == "2025-06-01"


def _search(mini_dir, *args):
    return ["search", str(mini_dir), "--field", "f000", *args]


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        (["--origin", "2030-01-01", "--regime", "expanding", "graph"], "not an origin of this instance"),
        (["--origin", "2025-01-01", "the of and"], "no searchable terms"),
        (["--origin", "2025-01-01", "--start", "2024-12-01", "--end", "2024-11-01", "graph"], "after --end"),
        (["--origin", "2025-01-01T00:00:00", "graph"], "not a YYYY-MM-DD date"),
        (["--origin", "2025-01-01", "--start", "2024-1-1", "graph"], "not a YYYY-MM-DD date"),
    ],
    ids=["unknown-origin", "empty-query", "inverted-window", "timestamp-origin", "short-date"],
)
def test_search_refuses_bad_calls(mini_dir, capsys, args, phrase):
    """Bug: rap search exited 0 silently on an empty query and on --start after --end, accepted a
    timestamp, and an origin the instance does not have (2030-01-01, expanding) returned papers
    from inside the last target window."""
    assert main(_search(mini_dir, *args)) == 2
    err = capsys.readouterr().err
    assert err.startswith("rap search: ") and phrase in err and err.count("\n") == 1


def test_search_still_answers_a_good_call(mini_dir, capsys):
    assert main(_search(mini_dir, "--origin", "2025-01-01", "--json", "model")) == 0
    assert "total_hits" in capsys.readouterr().out
