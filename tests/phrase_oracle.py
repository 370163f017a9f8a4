"""The candidate phrases of a text read the slow, plain way: every phrase of every run with the
surface form it was read from. The tests' oracle for the phrase table and ``first_surface``."""

from __future__ import annotations

from rap_benchmark.pipeline.phrases import _runs, _spans


def extract_phrases(text: str) -> dict[str, str]:
    """Candidate phrases of ``text``: key (lower case) -> first surface form read."""
    out: dict[str, str] = {}
    for run in _runs(text):
        for a, b in _spans(run):
            surface = text[a:b]
            out.setdefault(surface.lower(), surface)
    return out
