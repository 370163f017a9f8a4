"""A refusal is reported as one, never as a traceback nor as a success.

Regressions: ``rap leaderboard score`` of files that were all refused crashed in the forest plot
(``KeyError: 'spearman'``) and left a board folder without its page; ``rap citecast leak-probe
--url`` read its key only from ``$CITECAST_API_KEY`` while ``rap citecast run --url`` read only
``--api-key``, and a missing key or an unreachable server ended in a traceback.

A board whose every file is refused is no board (issue 36: it was written whole, empty, with exit
1, and looked like a board to publish): nothing is written, a previous board at ``--out`` is left
as it was, each file's reasons are printed, and the last line says so and exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from citecast_http import http_client
from matplotlib.image import imread

from rap_benchmark.cli import main


def _bad_submission(root: Path) -> Path:
    """A prediction file the validator refuses: an unknown column, every required one missing, no metadata."""
    path = root / "bad.jsonl"
    path.write_text('{"bad": 1}\n', encoding="utf-8")
    return path


def _files(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def _nothing_written(err: str, what: str, before: dict[str, tuple[int, int]], root: Path, kept: str = "") -> None:
    """No traceback, no file added or changed under ``root``, and stderr ends with the one line."""
    assert "Traceback" not in err
    assert _files(root) == before
    assert err.splitlines()[-1] == (
        f"rap leaderboard score: every {what} was refused (1 of 1), so no board was written{kept}; "
        "each file's reasons are printed above"
    ), err


def test_a_board_whose_every_submission_is_refused_is_not_written(mini_dir: Path, tmp_path: Path, capsys):
    """Regression (issue 36): every submission refused still wrote a complete, empty board folder."""
    bad, out = _bad_submission(tmp_path), tmp_path / "board"
    before = _files(tmp_path)
    assert main(["leaderboard", "score", str(bad), "--instance", str(mini_dir), "--out", str(out)]) == 1
    out_text, err = capsys.readouterr()
    _nothing_written(err, "submission", before, tmp_path)
    assert not out.exists() and out_text == ""
    assert f"{bad}: REJECTED" in err and "unknown_column" in err  # the reasons, under the file's name


def test_a_live_board_whose_every_reveal_is_refused_is_not_written(mini_dir: Path, tmp_path: Path, capsys):
    bad, out = _bad_submission(tmp_path), tmp_path / "live"
    seals = tmp_path / "seals.jsonl"
    seals.write_text(json.dumps({"sealed_at": "2025-01-01T00:00:00Z", "commitment": "0" * 64}) + "\n")
    before = _files(tmp_path)
    argv = ["leaderboard", "score", str(bad), "--live", "--seals", str(seals), "--instance", str(mini_dir)]
    assert main([*argv, "--out", str(out)]) == 1
    _, err = capsys.readouterr()
    _nothing_written(err, "reveal", before, tmp_path)
    assert f"{bad}: REFUSED: no salt" in err


def test_a_board_with_one_refusal_names_how_many(mini_dir: Path, mini, tmp_path: Path, capsys):
    """One good file and one bad: the good one is ranked, the command still exits 1 and counts the refusal."""
    from rap_benchmark.evaluation.predictions import write_predictions
    from rap_benchmark.evaluation.scoring import baseline_predictions
    from rap_benchmark.evaluation.submissions import split_by_model

    frame, _ = baseline_predictions(mini)
    mixed = write_predictions(frame[frame["model"] == "baseline/ewma"].reset_index(drop=True), tmp_path / "all.jsonl")
    (good,) = split_by_model(mixed, tmp_path / "subs", meta={})
    out = tmp_path / "board"
    argv = ["leaderboard", "score", str(good), str(_bad_submission(tmp_path)), "--instance", str(mini_dir)]
    assert main([*argv, "--out", str(out)]) == 1
    out_text, err = capsys.readouterr()
    assert "Traceback" not in err and "baseline/ewma" in out_text
    assert err.splitlines()[-1].startswith("rap leaderboard score: 1 of 2 submissions refused"), err
    assert imread(out / "forest.png").ndim == 3
    # then only refused files: the board that is there stays as it was
    before = _files(tmp_path)
    assert (
        main(["leaderboard", "score", str(tmp_path / "bad.jsonl"), "--instance", str(mini_dir), "--out", str(out)]) == 1
    )
    _nothing_written(capsys.readouterr().err, "submission", before, tmp_path, kept=f" ({out} is left as it was)")


# -- rap citecast leak-probe / run --url: --api-key, else $CITECAST_API_KEY -------------------------------
SECRET = "s3cret-a-key"


@pytest.fixture()
def keyed_server(citecast_embedded_dir: Path, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """``--url`` answered by the instance's app in process, requiring the key ``SECRET``; the list
    collects the key each client was made with."""
    import rap_benchmark.citecast.client as client_module
    from rap_benchmark.citecast.env import CiteCastEnv

    env = CiteCastEnv.from_instance(citecast_embedded_dir)
    keys: list[str | None] = []

    def connect(url: str, api_key: str | None = None, **_: object):
        keys.append(api_key)
        return http_client(env, api_key, {SECRET: "team-a"})

    monkeypatch.setattr(client_module, "HttpClient", connect)
    monkeypatch.delenv("CITECAST_API_KEY", raising=False)
    return keys


COMMANDS = {
    "leak-probe": ["citecast", "leak-probe", "{inst}", "--url", "http://server", "--n", "2", "--out", "{out}"],
    "run": ["citecast", "run", "{inst}", "--url", "http://server", "--backend", "constant", "--limit", "1"]
    + ["--no-progress", "--out", "{out}"],
}


def _argv(command: str, inst: Path, out: Path, *extra: str) -> list[str]:
    return [a.replace("{inst}", str(inst)).replace("{out}", str(out)) for a in COMMANDS[command]] + list(extra)


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(
    ("flag", "env"), [(SECRET, None), (None, SECRET), (SECRET, "stale-key")], ids=["flag", "environment", "flag-wins"]
)
def test_both_citecast_clients_take_the_flag_else_the_environment(
    command, flag, env, keyed_server, citecast_embedded_dir, tmp_path, monkeypatch, capsys
):
    if env is not None:
        monkeypatch.setenv("CITECAST_API_KEY", env)
    out = tmp_path / "out"
    assert main(_argv(command, citecast_embedded_dir, out, *(["--api-key", flag] if flag else []))) == 0
    assert keyed_server == [SECRET]
    assert out.exists()
    capsys.readouterr()


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize(("flag", "env", "named"), [(None, None, "without a key"), ("wrong", None, "--api-key")])
def test_a_refused_key_is_one_line_and_writes_nothing(
    command, flag, env, named, keyed_server, citecast_embedded_dir, tmp_path, capsys
):
    out = tmp_path / "out"
    code = main(_argv(command, citecast_embedded_dir, out, *(["--api-key", flag] if flag else [])))
    _, err = capsys.readouterr()
    assert code == 2 and "Traceback" not in err
    (line,) = err.splitlines()
    assert line.startswith(f"rap citecast {command}: http://server refused ") and named in line, line
    assert "--api-key" in line and "$CITECAST_API_KEY" in line
    assert not out.exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_help_of_both_names_the_flag_and_the_variable(command, capsys):
    with pytest.raises(SystemExit):
        main(["citecast", command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--api-key" in text and "$CITECAST_API_KEY" in text


def test_an_unreachable_server_is_one_line_and_writes_nothing(citecast_embedded_dir: Path, tmp_path: Path, capsys):
    out = tmp_path / "probe.jsonl"
    argv = ["citecast", "leak-probe", str(citecast_embedded_dir), "--url", "http://127.0.0.1:9", "--out", str(out)]
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rap citecast leak-probe: cannot reach the CiteCast server at http://127.0.0.1:9"), line
    assert not out.exists()


@pytest.mark.parametrize(
    ("status", "ctype", "body"),
    [
        (404, "application/json", b'{"detail": "Not Found"}'),  # a model server's answer to /tasks
        (200, "text/html", b"<html><body>a web page</body></html>"),
        (200, "application/json", b'{"models": []}'),
        (500, "application/json", b'["an error", "as a list"]'),  # was an AttributeError in the client
    ],
    ids=["404-json", "html", "json-without-tasks", "error-body-not-an-object"],
)
def test_a_url_that_is_not_a_citecast_server_is_one_line_and_writes_nothing(
    citecast_embedded_dir: Path, tmp_path: Path, capsys, status: int, ctype: str, body: bytes
):
    """Regression: a --url answering, but not as a CiteCast server (say the model server's URL
    pasted there), ended in an EnvError, JSONDecodeError or KeyError traceback."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Other(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Other)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    out = tmp_path / "probe.jsonl"
    try:
        assert main(["citecast", "leak-probe", str(citecast_embedded_dir), "--url", url, "--out", str(out)]) != 0
    finally:
        server.shutdown()
        server.server_close()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"rap citecast leak-probe: {url} is not a CiteCast server ("), line
    assert not out.exists()
