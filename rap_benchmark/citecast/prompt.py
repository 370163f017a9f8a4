"""The task prompt: the paper's version-1 metadata and the forecasting question.

Only v1 metadata is shown (title, abstract, authors, primary category, date). The band and the
target never enter a prompt; the cutoff is described in words, not offered as a parameter.
"""

from __future__ import annotations

import datetime as dt

from rap_benchmark.citecast.records import DEFAULT_SNAPSHOT, PaperMeta

SYSTEM_PROMPT = (
    "You are a careful research analyst forecasting scholarly impact. Use the tools to research the "
    "paper, its authors and its field, then call submit_prediction exactly once with an integer. "
    "Citation counts are heavy-tailed: reason in log space and be calibrated."
)


def render_prompt(paper: PaperMeta, snapshot: dt.date = DEFAULT_SNAPSHOT) -> str:
    authors = ", ".join(paper.authors) if paper.authors else "(not listed)"
    return (
        f"Forecast the total number of citations that Semantic Scholar will record on "
        f"{snapshot.isoformat()} for this arXiv paper (version 1 metadata):\n\n"
        f"Title: {paper.title}\n"
        f"Authors: {authors}\n"
        f"Primary category: {paper.primary_category}\n"
        f"Submitted: {paper.date.isoformat()}\n"
        f"arXiv id: {paper.arxiv_id}\n\n"
        f"Abstract: {paper.abstract}\n\n"
        "Your web_search and web_fetch tools see an archive of the web (arXiv, news, general web) "
        "frozen at the end of January 2026; later pages do not exist in it. When ready, call "
        "submit_prediction(prediction, justification) once; the first call ends the task and is scored "
        "by 1/cosh(2|ln((p+1)/(t+1))|)."
    )
