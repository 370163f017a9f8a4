"""The README is a contract: every shell block of README.md and docs/*.md, run in order.

The documents are read in order (README.md, then docs/*.md by name); every ```bash block is cut
into commands (a trailing ``\\`` joins lines) and the commands run one by one, verbatim, in one
bash session (a ``cd`` or ``. .venv/bin/activate`` carries on, as in a reader's terminal), in a
scratch copy of the repository (a fresh clone: no venv, no build), with nothing of this test's own
environment on PATH: ``make demo`` creates the base venv, and the README's
``. .venv/bin/activate`` is what puts ``rap`` on PATH. Each docs/*.md file is a walkthrough of its
own: it runs in a fresh copy of its own, on the venv the README left active (so it builds what it
uses, and never trips over the README's files).

Each command must exit 0, or the code its marker names. Marker grammar (a shell comment; on a line
of its own it applies to its whole block, at the end of a command to that command only)::

    # needs: REASON[, REASON...] [free text]    skipped, with that reason
    # exit: N                                   expected to exit N (default 0)

REASONS lists the reasons this test knows; any other reason fails the test (a typo would
otherwise skip a command silently).

Servers: a command may start one in the background (``... &``; ``SERVER=$!`` keeps its process id)
for later commands, in later blocks and sections too, and a later command stop it (``kill
$SERVER``). Its output goes to the log of the command that started it. The session runs in a
process group of its own, and whatever is still running when it ends is stopped with it.

Installs: a section (the text from one heading to the next) whose commands install an extra
(``pip install -e ".[inspect]"``) runs its blocks in a venv of its own: a copy (hard links) of the
venv active before it, plus what that section's commands install, and nothing another section
installed. The blocks of every other section run on the base install alone (``make demo``'s
``.venv``): an extra that only a section's prose names is not installed.

Standalone: ``python tests/test_readme.py`` runs everything and prints the summary table (each
command, its exit code and its time); ``python tests/test_readme.py --list`` only parses.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_ARXIV = Path(os.environ.get("RAP_SHARED_ARXIV", REPO.parent / "shared" / "data" / "arxiv"))

REASONS = {
    "gpu": "a GPU",
    "network": "the network (a download, or the Hugging Face Hub)",
    "hf-token": "a Hugging Face token with write access",
    "api-key": "a hosted model's API key",
    "endpoint": "an OpenAI-compatible model server the reader runs",
    "server": "starts a long-running server (stops on Ctrl-C)",
    "long": "longer than this test's budget (the README says how long)",
    "input": "a file the reader brings (a snapshot, annotations, a seal log)",
    "suite": "runs this test suite (make test); it would recurse",
}
DOCUMENTS = ("README.md", "docs/*.md")
SESSION_TIMEOUT_S = 780  # below pytest-timeout's 900 s, so that the command still running is named
FENCE = re.compile(r"^\s*```(\w*)\s*$")  # fences may be indented (inside a list item)
HEADING = re.compile(r"^(#{1,6})\s+(.*)$")
NEEDS = re.compile(r"\bneeds:\s*([a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*)")
EXIT = re.compile(r"\bexit:\s*(\d+)")
EXTRA_INSTALL = re.compile(r"pip install[^\n`]*?(?:rap_benchmark|\.)\[([a-z0-9,-]+)\]")
SHELL_FENCES = {"bash", "sh", "shell"}


@dataclass(frozen=True)
class Command:
    text: str
    line: int
    needs: tuple[str, ...] = ()
    exit: int = 0


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    section: str
    extras: tuple[str, ...]
    needs: tuple[str, ...]
    commands: tuple[Command, ...]

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"

    def skipped(self, cmd: Command) -> tuple[str, ...]:
        return self.needs or cmd.needs


@dataclass
class Result:
    block: Block
    cmd: Command
    rc: int | None = None  # None: skipped, or never reached
    seconds: float = 0.0
    log: str = ""
    skipped: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.skipped) or self.rc == self.cmd.exit


def split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of one shell line: the comment starts at a ``#`` after a blank, outside quotes."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i + 1 :].strip()
    return line.rstrip(), ""


def markers(comment: str) -> tuple[tuple[str, ...], int | None]:
    """The reasons of a ``needs:`` marker and the code of an ``exit:`` marker in a comment."""
    needs: tuple[str, ...] = ()
    m = NEEDS.search(comment)
    if m:
        needs = tuple(r.strip() for r in m.group(1).split(","))
    e = EXIT.search(comment)
    return needs, (int(e.group(1)) if e else None)


def _commands(body: list[tuple[int, str]]) -> tuple[tuple[str, ...], tuple[Command, ...]]:
    block_needs: list[str] = []
    commands: list[Command] = []
    pending: list[str] = []
    start = 0
    for lineno, raw in body:
        if not pending and not raw.strip():
            continue
        if not pending and raw.lstrip().startswith("#"):
            needs, _ = markers(raw.lstrip()[1:])
            block_needs.extend(needs)
            continue
        if not pending:
            start = lineno
        if raw.rstrip().endswith("\\"):
            pending.append(raw.rstrip()[:-1].rstrip())
            continue
        code, comment = split_comment(raw)
        pending.append(code)
        text = " ".join(p.strip() if k else p for k, p in enumerate(pending)).strip()
        needs, code_exit = markers(comment)
        commands.append(Command(text, start, needs, 0 if code_exit is None else code_exit))
        pending = []
    if pending:
        raise ValueError(f"line {start}: a continuation line ends the block")
    return tuple(block_needs), tuple(commands)


def parse_document(path: Path, name: str) -> list[Block]:
    """The shell blocks of one Markdown file, each with its section and the extras that section installs."""
    lines = path.read_text(encoding="utf-8").splitlines()
    sections: list[tuple[int, str]] = []  # (first line index, title)
    fenced = False
    for i, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced and (h := HEADING.match(line)):
            sections.append((i, h.group(2).strip()))

    def section_of(i: int) -> str:
        k = max((j for j, (start, _) in enumerate(sections) if start <= i), default=-1)
        return sections[k][1] if k >= 0 else "(top)"

    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(1):
            i += 1
            continue
        lang, start = m.group(1), i
        i += 1
        body: list[tuple[int, str]] = []
        while i < len(lines) and not lines[i].lstrip().startswith("```"):
            body.append((i + 1, lines[i]))
            i += 1
        i += 1
        if lang not in SHELL_FENCES:
            continue
        needs, commands = _commands(body)
        blocks.append(Block(name, start + 1, section_of(start), (), needs, commands))
    # the extras a section's own commands install (not its prose) apply to every block of it
    extras: dict[str, set[str]] = {}
    for b in blocks:
        for c in b.commands:
            if not b.skipped(c):
                for m in EXTRA_INSTALL.finditer(c.text):
                    extras.setdefault(b.section, set()).update(m.group(1).split(","))
    return [dataclasses.replace(b, extras=tuple(sorted(extras.get(b.section, ())))) for b in blocks]


def documents(root: Path = REPO) -> list[tuple[Path, str]]:
    out: list[tuple[Path, str]] = []
    for pattern in DOCUMENTS:
        for p in sorted(root.glob(pattern)):
            out.append((p, str(p.relative_to(root))))
    return out


def all_blocks(root: Path = REPO) -> list[Block]:
    return [b for path, name in documents(root) for b in parse_document(path, name)]


# ---------------------------------------------------------------------------------------------
# running


def fresh_clone(dst: Path) -> Path:
    """The repository's files as a clone would have them (tracked and untracked-not-ignored)."""
    try:
        names = (
            subprocess.run(
                ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                cwd=REPO,
                capture_output=True,
                check=True,
            )
            .stdout.decode()
            .split("\0")
        )
    except (OSError, subprocess.CalledProcessError):  # no git: everything but what builds write
        names = [
            str(p.relative_to(REPO))
            for p in REPO.rglob("*")
            if p.is_file() and not ({".git", ".venv", "__pycache__", "build"} & set(p.relative_to(REPO).parts))
        ]
    for name in filter(None, names):
        src = REPO / name
        if src.is_file():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / name)
    return dst


def clean_env(scratch: Path) -> dict[str, str]:
    """This process's environment without its venv: the reader's shell before ``make demo``.

    The caches are new and empty, the reader's own: the README's ``make demo`` fits its instrument
    itself (never one the test session cached), as on a newcomer's machine, which is what lets CI
    (``.ci/run``) rely on it instead of running ``make demo`` a second time."""
    env = {k: v for k, v in os.environ.items() if k not in {"VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"}}
    here = {str(Path(sys.executable).parent), str(Path(sys.prefix) / "bin")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p not in here)
    for name in ("PYTEST_CURRENT_TEST", "PYTEST_XDIST_WORKER", "RAP_TEST_GROUPS"):
        env.pop(name, None)
    env["RAP_CACHE_DIR"] = str(scratch.parent / "rap-cache")
    env["HF_HOME"] = str(scratch.parent / "hf-home")
    env.setdefault("RAP_SHARED_ARXIV", str(SHARED_ARXIV))
    env["HF_HUB_OFFLINE"] = env["HF_DATASETS_OFFLINE"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # pip installs the same files without byte-compiling every module (7,500 for the base venv:
    # `pip install -e .` took 32.5 s of CPU instead of 61.7 s), and more per extra; Python compiles
    # what the commands import, once, as they import it. pip ignores a module that fails to compile
    # either way, so nothing goes unproved. (PIP_COMPILE=0, not PIP_NO_COMPILE=1: pip reads the
    # value of a --no-X variable as the value of X, so PIP_NO_COMPILE=1 means compile.)
    env.pop("PIP_NO_COMPILE", None)
    env["PIP_COMPILE"] = "0"
    # ... which needs Python to write what it compiles: with PYTHONDONTWRITEBYTECODE (which many
    # container images set) every command compiled pandas, numpy and pyarrow anew (`rap info`:
    # 2.1 s of CPU instead of 0.6). It only chooses whether a cache is written, never what runs.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


LAYER = r"""
__rap_layer() {  # a venv holding the current one's packages (hard links) plus what this section installs
  local name=$1 base=$VIRTUAL_ENV v="$__RAP_VENVS/$1"
  if [ -z "$base" ]; then echo "test_readme: no venv is active before a section that installs [$name]"; return 1; fi
  if [ ! -d "$v" ]; then
    python -m venv --without-pip "$v" || return 1
    local lib baselib
    lib=$("$v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    baselib=$("$base/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    cp -al "$baselib/." "$lib/" 2>/dev/null || cp -a "$baselib/." "$lib/" || return 1
    printf '#!/bin/sh\nexec "$(dirname "$0")/python" -m pip "$@"\n' > "$v/bin/pip" && chmod +x "$v/bin/pip"
  fi
  __rap_prev=$base
  . "$v/bin/activate"
}
__rap_unlayer() { if [ -n "$__rap_prev" ]; then . "$__rap_prev/bin/activate"; __rap_prev=; fi; }
"""


def clone_dirs(blocks: list[Block], workdir: Path) -> dict[str, Path]:
    """One fresh clone per document: README.md's, then one for each docs/*.md, so that a walkthrough
    in docs/ never trips over what the README's commands left behind (it shares the README's venv)."""
    docs = list(dict.fromkeys(b.doc for b in blocks))
    return {
        d: workdir / ("rap_benchmark" if k == 0 else f"rap_benchmark-{Path(d).stem.lower()}")
        for k, d in enumerate(docs)
    }


def script(blocks: list[Block], logs: Path, clones: dict[str, Path]) -> str:
    """One bash script: each command verbatim, its output to logs/N.log, its code and times to logs/status."""
    out = ["set +e", f"__RAP_VENVS={shlex.quote(str(logs.parent / 'venvs'))}", LAYER]
    n = 0
    doc = blocks[0].doc if blocks else ""
    for b in blocks:
        if b.doc != doc:  # the next document: its own clone, the venv the README left active
            doc = b.doc
            out.append("__rap_base=${__rap_base:-$VIRTUAL_ENV}")
            out.append(
                f'cd {shlex.quote(str(clones[doc]))} && {{ [ -z "$__rap_base" ] || . "$__rap_base/bin/activate"; }}'
            )
        runnable = [c for c in b.commands if not b.skipped(c)]
        layered = bool(b.extras and runnable)
        if layered:
            out.append(f"__rap_layer {shlex.quote('-'.join(b.extras))} > {logs}/layer-{b.line}.log 2>&1")
        for c in b.commands:
            n += 1
            if b.skipped(c):
                continue
            out.append(f'echo "start {n} $(date +%s.%N)" >> {logs}/status')
            out.append(f"{{ {c.text}\n}} > {logs}/{n}.log 2>&1 < /dev/null")
            out.append(f'echo "end {n} $? $(date +%s.%N)" >> {logs}/status')
        if layered:
            out.append("__rap_unlayer")
    return "\n".join(out) + "\n"


def _git(clone: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=clone, capture_output=True, text=True, check=True)
    return proc.stdout


def index_clone(clone: Path) -> bool:
    """Stage the clone's files in a new git index, so that what the commands add shows up later."""
    try:
        _git(clone, "init", "-q")
        _git(clone, "add", "-A")
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def unignored_changes(workdir: Path) -> list[str]:
    """Files the commands wrote that ``.gitignore`` does not cover, and files of a clone they changed."""
    changes: list[str] = []
    for clone in sorted(workdir.glob("rap_benchmark*")):
        if (clone / ".git").is_dir():
            lines = _git(clone, "status", "--porcelain", "-uall").splitlines()
            changes += [f"{clone.name}: {line}" for line in lines if not line.startswith("A  ")]
    return changes


def run_blocks(blocks: list[Block], workdir: Path, timeout: float = SESSION_TIMEOUT_S) -> list[Result]:
    """Run every block in a fresh clone under ``workdir``; one Result per command, in order."""
    clones = clone_dirs(blocks, workdir)
    for folder in clones.values():
        index_clone(fresh_clone(folder))
    clone = workdir / "rap_benchmark"
    clone.mkdir(exist_ok=True)
    logs = workdir / "logs"
    logs.mkdir()
    (workdir / "run.sh").write_text(script(blocks, logs, clones), encoding="utf-8")
    # its own process group: whatever a block left running (a server started with &) is stopped
    proc = subprocess.Popen(["bash", str(workdir / "run.sh")], cwd=clone, env=clean_env(clone), start_new_session=True)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass  # the command that never ended has a start and no end: reported below
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    starts: dict[int, float] = {}
    ends: dict[int, tuple[int, float]] = {}
    if (logs / "status").exists():
        for row in (logs / "status").read_text().splitlines():
            kind, n, *rest = row.split()
            if kind == "start":
                starts[int(n)] = float(rest[0])
            else:
                ends[int(n)] = (int(rest[0]), float(rest[1]))
    results: list[Result] = []
    n = 0
    for b in blocks:
        for c in b.commands:
            n += 1
            r = Result(b, c, skipped=b.skipped(c))
            log = logs / f"{n}.log"
            r.log = log.read_text(errors="replace") if log.exists() else ""
            if n in ends:
                r.rc, t = ends[n]
                r.seconds = t - starts[n]
            elif n in starts:
                r.log += f"\n(test_readme: still running after the session's {timeout:.0f} s limit)"
            results.append(r)
    return results


def summary(results: list[Result]) -> str:
    """Blocks run, blocks skipped (with reasons), failed; then every command with its code and time."""
    by_block: dict[str, list[Result]] = {}
    for r in results:
        by_block.setdefault(r.block.id, []).append(r)
    run = [k for k, rs in by_block.items() if any(not r.skipped for r in rs)]
    skipped = {k: rs for k, rs in by_block.items() if all(r.skipped for r in rs)}
    failed = [k for k, rs in by_block.items() if not all(r.ok for r in rs)]
    n_cmd_run = sum(1 for r in results if not r.skipped)
    reasons: dict[str, int] = {}
    for r in results:
        for reason in r.skipped:
            reasons[reason] = reasons.get(reason, 0) + 1
    lines = [
        f"README contract: {len(by_block)} blocks, {len(run)} run, {len(skipped)} skipped, {len(failed)} failed; "
        f"{len(results)} commands, {n_cmd_run} run, {len(results) - n_cmd_run} skipped, "
        f"{sum(1 for r in results if not r.ok)} failed, {sum(r.seconds for r in results):.0f} s",
        "skipped commands by reason: " + (", ".join(f"{k} {v}" for k, v in sorted(reasons.items())) or "none"),
    ]
    for k, rs in skipped.items():
        lines.append(
            f"  skipped block {k} ({rs[0].block.section}): needs {', '.join(sorted({x for r in rs for x in r.skipped}))}"
        )
    for r in results:
        if not r.ok:
            lines.append(f"  FAILED {r.block.doc}:{r.cmd.line} (exit {r.rc}, want {r.cmd.exit}): {r.cmd.text[:100]}")
    lines.append("")
    lines.append(f"{'where':<18} {'exit':>4} {'want':>4} {'time':>7}  command")
    for r in results:
        rc = "-" if r.skipped else ("?" if r.rc is None else str(r.rc))
        secs = "" if r.skipped else f"{r.seconds:6.1f}s"
        flag = "" if r.ok else "  <-- FAILED"
        note = f"  [needs: {', '.join(r.skipped)}]" if r.skipped else ""
        lines.append(
            f"{r.block.doc}:{r.cmd.line:<{17 - len(r.block.doc)}} {rc:>4} {r.cmd.exit:>4} {secs:>7}  {r.cmd.text[:110]}{note}{flag}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# tests

BLOCKS = all_blocks()


def test_every_marker_names_a_known_reason() -> None:
    unknown = [
        f"{b.id} line {c.line}: {reason}"
        for b in BLOCKS
        for c in b.commands
        for reason in (*b.needs, *c.needs)
        if reason not in REASONS
    ]
    assert not unknown, f"unknown needs: reasons (known: {', '.join(REASONS)}): {unknown}"


def test_make_test_is_marked_so_the_suite_never_runs_itself() -> None:
    recursing = [
        f"{b.id} line {c.line}: {c.text}"
        for b in BLOCKS
        for c in b.commands
        if re.match(r"(make\s+(\S+=\S+\s+)*test\b|\.ci/run\b)", c.text) and "suite" not in b.skipped(c)
    ]
    assert BLOCKS and not recursing


def test_parser_reads_markers_continuations_and_sections(tmp_path: Path) -> None:
    doc = tmp_path / "X.md"
    doc.write_text(
        "# T\n\n## Plain\n\n```bash\nrap build --instance mini \\\n    --out 'build/#mini'   # exit: 2\n"
        "rap verify build/mini  # needs: network, gpu; prose\n```\n\n"
        "## Extra\n\nNeeds `pip install -e \".[llm]\"` (prose: not installed).\n\n```bash\npip install -e '.[inspect,hf]'\n"
        "```\n\n```bash\n# needs: api-key\ninspect eval x\n```\n\n```python\nimport rap_benchmark\n```\n",
        encoding="utf-8",
    )
    plain, install, extra = parse_document(doc, "X.md")
    assert plain.section == "Plain" and plain.extras == () and plain.needs == ()
    assert plain.commands[0] == Command("rap build --instance mini --out 'build/#mini'", 6, (), 2)
    assert plain.commands[1].needs == ("network", "gpu") and plain.commands[1].exit == 0
    assert install.extras == extra.extras == ("hf", "inspect") and extra.needs == ("api-key",)
    assert extra.skipped(extra.commands[0]) == ("api-key",)


def test_runner_keeps_shell_state_records_codes_and_skips(tmp_path: Path) -> None:
    """The harness itself: state carries over between commands, exit codes and markers are honoured."""
    doc = tmp_path / "X.md"
    doc.write_text(
        "## A\n\n```bash\nmkdir -p sub && cd sub\nexport GREETING=hi\npwd > where.txt\n"
        'test "$GREETING" = hi\nfalse   # exit: 1\nfalse\nnvidia-smi-not-here   # needs: gpu\n```\n\n'
        "```bash\n# needs: network\ncurl https://example.org\n```\n\n```bash\nsleep 60 &\n```\n",
        encoding="utf-8",
    )
    other = tmp_path / "Y.md"
    other.write_text("## B\n\n```bash\ntest ! -e sub && test -e pyproject.toml\n```\n", encoding="utf-8")
    blocks = parse_document(doc, "X.md") + parse_document(other, "docs/Y.md")
    results = run_blocks(blocks, tmp_path / "work")
    got = [(r.cmd.text, r.rc, r.skipped, r.ok) for r in results]
    assert got == [
        ("mkdir -p sub && cd sub", 0, (), True),
        ("export GREETING=hi", 0, (), True),
        ("pwd > where.txt", 0, (), True),
        ('test "$GREETING" = hi', 0, (), True),
        ("false", 1, (), True),
        ("false", 1, (), False),
        ("nvidia-smi-not-here", None, ("gpu",), True),
        ("curl https://example.org", None, ("network",), True),
        ("sleep 60 &", 0, (), True),
        ("test ! -e sub && test -e pyproject.toml", 0, (), True),  # docs/Y.md: a fresh clone of its own
    ]
    clone = tmp_path / "work" / "rap_benchmark"
    assert (clone / "sub" / "where.txt").read_text().strip() == str(clone / "sub")
    text = summary(results)
    assert "4 blocks, 3 run, 1 skipped, 1 failed" in text and "FAILED X.md:" in text and "gpu 1, network 1" in text


@pytest.fixture(scope="module")
def readme_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Result]]:
    work = tmp_path_factory.mktemp("readme")
    return work, run_blocks(BLOCKS, work)


@pytest.fixture(scope="module")
def readme_results(readme_run: tuple[Path, list[Result]]) -> dict[str, list[Result]]:
    results = readme_run[1]
    by_block: dict[str, list[Result]] = {}
    for r in results:
        by_block.setdefault(r.block.id, []).append(r)
    return by_block


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.xdist_group("readme")
@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.id} {b.section}" for b in BLOCKS])
def test_readme_block(block: Block, readme_results: dict[str, list[Result]]) -> None:
    results = readme_results[block.id]
    failed = [r for r in results if not r.ok]
    if failed:
        earlier = next((r for rs in readme_results.values() for r in rs if not r.ok), failed[0])
        note = (
            "" if earlier in failed else f" (an earlier command failed first: {earlier.block.doc}:{earlier.cmd.line})"
        )
        detail = "\n\n".join(
            f"line {r.cmd.line}: {r.cmd.text}\n  exit {r.rc} (want {r.cmd.exit}) after {r.seconds:.1f} s\n"
            + "\n".join("  | " + x for x in r.log.strip().splitlines()[-25:])
            for r in failed
        )
        pytest.fail(f"{block.id} ({block.section}): {len(failed)} command(s) failed{note}\n{detail}", pytrace=False)
    if all(r.skipped for r in results):
        reasons = sorted({x for r in results for x in r.skipped})
        pytest.skip(f"{block.id} ({block.section}) needs {', '.join(reasons)}: {len(results)} command(s)")


@pytest.mark.slow
@pytest.mark.xdist_group("readme")
def test_readme_summary(readme_run: tuple[Path, list[Result]], record_property) -> None:
    """Blocks run, skipped (with reasons) and failed, for the end of ``make test`` (tests/conftest.py
    prints the ``readme_contract`` property); every command's code and time go to readme-summary.txt."""
    work, results = readme_run
    text = summary(results)
    table = Path(os.environ.get("RAP_README_SUMMARY", work / "readme-summary.txt"))
    table.write_text(text + "\n", encoding="utf-8")
    record_property("readme_contract", text.split("\n\n", 1)[0] + f"\nevery command, its exit code and time: {table}")
    first = results[0]
    assert first.cmd.text == "make demo" and not first.skipped, "the README's first command always runs"


@pytest.mark.slow
@pytest.mark.xdist_group("readme")
def test_readme_writes_only_what_gitignore_covers(readme_run: tuple[Path, list[Result]]) -> None:
    """Every path a README command writes in the clone is in ``.gitignore``, and none changes a tracked file."""
    if not (readme_run[0] / "rap_benchmark" / ".git").is_dir():
        pytest.skip("git is not available")
    changes = unignored_changes(readme_run[0])
    assert not changes, (
        "README commands wrote paths .gitignore does not cover, or changed the clone's files:\n"
        + "\n".join(changes[:40])
    )


def main(argv: list[str]) -> int:
    import tempfile

    if "--list" in argv:
        for b in BLOCKS:
            print(f"{b.id} [{b.section}] extras={','.join(b.extras) or '-'} needs={','.join(b.needs) or '-'}")
            for c in b.commands:
                print(f"   {c.line:4d} exit={c.exit} needs={','.join(c.needs) or '-'}  {c.text[:100]}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="rap-readme-"))
    t0 = time.monotonic()
    results = run_blocks(BLOCKS, work)
    print(summary(results))
    changes = unignored_changes(work)
    print(f"\nwritten outside .gitignore or changed: {len(changes)}")
    for line in changes[:40]:
        print("  " + line)
    print(f"\nwall {time.monotonic() - t0:.0f} s; logs in {work / 'logs'}")
    return 0 if all(r.ok for r in results) and not changes else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
