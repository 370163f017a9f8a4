"""The offline fit's fast paths give what the plain readings they replace give, exactly."""

from __future__ import annotations

import pandas as pd

from rap_benchmark.pipeline.fields import tokenize_papers

ASCII_WORDS = (
    "Graph graph-based neural Networks message passing of the x-ray X-Ray 42 7-B a multi-agent Agent study".split()
)
ASCII_SEPS = [" ", " ", " ", "  ", ", ", ". ", "-", "--", "_", " (", ") ", "-\n", "\t", "'"]


def test_tokenized_papers_are_reused_only_for_the_same_ids_and_text() -> None:
    """The tokenisation cache answers a copy of the same papers from memory, and any change to an
    id, a title or an abstract (or to their order) with a fresh tokenisation."""
    papers = pd.DataFrame(
        {"arxiv_id": ["a", "b"], "title": ["Graph networks", "Speech"], "abstract": ["message passing", "audio"]}
    )
    first = tokenize_papers(papers)
    assert tokenize_papers(papers.copy(deep=True)) is first
    for column, value in (("arxiv_id", "c"), ("title", "Graph network"), ("abstract", "message passing.")):
        changed = papers.copy()
        changed.loc[0, column] = value
        assert tokenize_papers(changed) is not first
    swapped = tokenize_papers(papers.iloc[::-1].reset_index(drop=True))
    assert swapped is not first and swapped.tokens(0) == first.tokens(1)
