"""Plausible, valid replies to every prompt of the pipeline, computed from the prompt alone.

The dry run answers with ``typical=True`` replies (typical sizes) to render the later prompts;
the rehearsal's scripted server with ``typical=False`` ones (varied by the prompt's hash). Names
come from the titles shown; labels follow the paper's assignment-type shares.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from itertools import accumulate
from typing import Any

import numpy as np
import orjson

from rap_benchmark.core.records import DIRECTION_KEYS
from rap_benchmark.pipeline.instrument.llm import prompts as P
from rap_benchmark.pipeline.instrument.llm.prompts import Stage

_STOP = frozenset(
    "a an and are as at based be by for from in into is its of on or the to towards via with we our using "
    "learning model models deep neural network networks approach method methods paper study new data".split()
)
TYPE_SHARES = (("single", 0.5548), ("boundary", 0.4260), ("bridge", 0.0158), ("other", 0.0034))
_FILLER = (
    "methods evaluation benchmarks training representations robustness efficiency datasets analysis "
    "architectures objectives inference supervision scaling generalisation alignment retrieval"
).split()


def _rng(text: str) -> np.random.Generator:
    return np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little"))


def _words(titles: list[str]) -> list[str]:
    counts = Counter(w for t in titles for w in re.findall(r"[a-z][a-z\-]{2,}", t.lower()) if w not in _STOP)
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def _sentence(head: str, n_words: int, rng: np.random.Generator | None) -> str:
    words = [_FILLER[(i * 7 + (0 if rng is None else int(rng.integers(16)))) % len(_FILLER)] for i in range(n_words)]
    return f"{head} {' '.join(words)}."


def _size(typical: int, rng: np.random.Generator | None) -> int:
    return typical if rng is None else max(3, int(rng.integers(typical // 2, typical + typical // 2 + 1)))


def _direction(name: str, exemplars: list[str], rng: np.random.Generator | None) -> dict[str, Any]:
    return {
        "name": name,
        "definition": _sentence(f"Papers whose main contribution is {name}, covering", _size(14, rng), rng),
        "inclusion": _sentence(f"Centrally proposes or studies {name} through", _size(8, rng), rng),
        "exclusion": _sentence("Work that only uses it as a tool for", _size(8, rng), rng),
        "exemplars": exemplars,
    }


def _names(words: list[str], n: int, suffix: str) -> list[str]:
    words = words or ["topic"]
    out: list[str] = []
    for i in range(n):
        a, b = words[i % len(words)], words[(i + 1 + i // len(words)) % len(words)]
        name = f"{a} {b} {suffix}" if a != b else f"{a} {suffix} {i}"
        while name.casefold() in {o.casefold() for o in out}:
            name = f"{name} {i}"
        out.append(name)
    return out


def respond(messages: list[dict[str, str]], *, typical: bool) -> str:
    """The reply to a chat request of the pipeline (a fallback object for unknown prompts)."""
    prompt = messages[0]["content"]
    task = P.task_of(prompt)
    rng = None if typical else _rng(prompt)
    papers = P.papers_in(prompt)
    ids = [p for p, _ in papers]
    words = _words([t for _, t in papers])
    obj: dict[str, Any]
    if task is Stage.FIELD_NAME:
        name = " ".join(words[:3]) or "research field"
        obj = {"name": name, "definition": _sentence(f"Research on {name}, including", _size(12, rng), rng)}
    elif task is Stage.FIELD_MERGE:
        by_name: dict[str, list[str]] = {}
        for fid, name in P.fields_in(prompt):
            by_name.setdefault(name.casefold(), []).append(fid)
        obj = {"groups": [g for g in by_name.values() if len(g) > 1]}
    elif task is Stage.PROGRAMS:
        n = (
            min(max(1, len(ids) // 4), 12)
            if rng is None
            else int(rng.integers(max(1, len(ids) // 6), len(ids) // 3 + 2))
        )
        n = max(1, min(n, 12, len(ids)))
        names = _names(words, n, "methods")
        obj = {
            "programs": [
                {"name": nm, "description": _sentence(f"Work on {nm} with", _size(10, rng), rng), "papers": ids[i::n]}
                for i, nm in enumerate(names)
            ]
        }
    elif task is Stage.PROGRAMS_DEDUPE:
        heads: dict[str, list[tuple[str, str]]] = {}
        for pid, name in P.programs_in(prompt):
            heads.setdefault(" ".join(name.split()[:2]).casefold(), []).append((pid, name))
        obj = {
            "groups": [
                {
                    "ids": [pid for pid, _ in g],
                    "name": g[0][1],
                    "description": _sentence(f"Work on {g[0][1]} and its variants, with", _size(10, rng), rng),
                }
                for g in heads.values()
                if len(g) > 1
            ]
        }
    elif task in (Stage.DRAFT, Stage.REVISE):
        old = P.directions_in(prompt)
        if task is Stage.REVISE and old:
            keep = old if rng is None or len(old) <= 4 else old[: len(old) - int(rng.integers(0, 2))]
            dirs = [
                {k: d[k] for k in ("name", "definition", "inclusion", "exclusion")} | {"exemplars": d["exemplars"][:5]}
                for d in keep
            ]
        else:
            programs = [name for _, name in P.programs_in(prompt)] or _names(words, 8, "methods")
            n = 10 if rng is None else int(rng.integers(6, 13))
            names = _names([w for p in programs for w in p.split()[:2]] or words, n, "research")
            dirs = [_direction(nm, ids[i::n][:3] or ids[:1], rng) for i, nm in enumerate(names)]
        obj = {"directions": dirs}
    elif task is Stage.ABSORB:
        n = max(1, len(P.directions_in(prompt)))
        out = []
        for pid in ids:
            h = int.from_bytes(hashlib.sha256(f"{pid}|absorb".encode()).digest()[:4], "little")
            out.append({"id": pid, "direction": None if h % 20 == 0 else 1 + h % n})
        obj = {"papers": out}
    elif task is Stage.CONSOLIDATE:
        cands = P.directions_in(prompt)
        order = list(range(len(cands))) if rng is None else [int(i) for i in rng.permutation(len(cands))]
        chosen = sorted(order[:8])
        dirs = [{k: cands[i][k] for k in ("name", "definition", "inclusion", "exclusion", "exemplars")} for i in chosen]
        while len(dirs) < 8:
            dirs.append(_direction(f"further direction {len(dirs)}", ids[:1], rng))
        obj = {k: d | {"exemplars": d["exemplars"][:5]} for k, d in zip(DIRECTION_KEYS, dirs, strict=False)}
    elif task is Stage.ASSIGN:
        obj = {"labels": [_label(pid, prompt) for pid in ids]}
    elif task is Stage.COMPACT_DRAFT:
        obj = _compact_draft(ids, words, prompt, rng)
    else:
        obj = {"error": "unknown task"}
    return orjson.dumps(obj).decode()


def _compact_draft(ids: list[str], words: list[str], prompt: str, rng: np.random.Generator | None) -> dict[str, Any]:
    """A compact draft: the field named from its titles' words, eight directions, and every paper
    labelled, each direction the primary of every eighth paper (so none is thin)."""
    name = " ".join(words[:3]) or "research field"
    names = _names(words[3:] or words, 8, "research")
    labels = []
    for i, pid in enumerate(ids):
        label = _label(pid, prompt)
        if label["primary"] != "other":
            key = DIRECTION_KEYS[i % 8]
            second = None if label["secondary"] is None else DIRECTION_KEYS[(i + 1) % 8]
            label = label | {"primary": key, "secondary": second}
        labels.append(label)
    return {
        "name": name,
        "definition": _sentence(f"Research on {name}, including", _size(12, rng), rng),
        "directions": {
            k: _direction(nm, ids[i::8][:3] or ids[:1], rng)
            for i, (k, nm) in enumerate(zip(DIRECTION_KEYS, names, strict=True))
        },
        "labels": labels,
    }


def _label(pid: str, prompt: str) -> dict[str, Any]:
    h = hashlib.sha256(f"{pid}|{P.task_of(prompt)}|{prompt[:200]}".encode()).digest()
    u = int.from_bytes(h[:4], "little") / 2**32
    primary = DIRECTION_KEYS[h[4] % 8]
    secondary = DIRECTION_KEYS[(h[4] + 1 + h[5] % 7) % 8]
    edges = accumulate(share for _, share in TYPE_SHARES)
    kind = next((name for (name, _), edge in zip(TYPE_SHARES, edges, strict=True) if u < edge), "low_evidence")
    if kind in ("other", "low_evidence"):
        return {"id": pid, "primary": "other", "secondary": None, "type": kind}
    return {"id": pid, "primary": primary, "secondary": None if kind == "single" else secondary, "type": kind}


def invalid_reply(messages: list[dict[str, str]]) -> str:
    """A reply that fails validation for the prompt's task (for fault injection)."""
    task = P.task_of(messages[0]["content"])
    if task is Stage.CONSOLIDATE:
        obj = orjson.loads(respond(messages, typical=False))
        obj["D8"] = dict(obj["D0"], name=obj["D0"]["name"] + " variant")
        return orjson.dumps(obj).decode()
    if task is Stage.ASSIGN:
        obj = orjson.loads(respond(messages, typical=False))
        if obj["labels"]:
            obj["labels"][0]["primary"] = "D9"
        return orjson.dumps(obj).decode()
    return "Sure! Here is the JSON you asked for: {"
