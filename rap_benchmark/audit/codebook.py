"""Quality measures of written codebooks (the paper's codebook construction: "quality is measured, not asserted").

* :func:`codebook_only_primary`: a simple classifier that sees only the written codebook (names,
  definitions, inclusion and exclusion, exemplar titles) and a paper's title and abstract, and
  picks the direction whose text is most similar (TF-IDF over unigrams and bigrams of the
  package tokenizer, IDF from the codebook texts; the exclusion text counts against the direction
  it is written for). Its agreement with the frozen primary on ``single`` papers is the offline
  analogue of the paper's human audit (34/62 exact on single items).
* :func:`direction_shares`, :func:`names_verbatim`, :func:`names_distinct`;
* :func:`name_fit`: how well each name picks out its direction's pre-cutoff papers: precision
  (of the field's papers containing it, the share in the direction), coverage (of the
  direction's papers, the share containing it) and the field's share containing it (a name
  found in much of the field separates nothing).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rap_benchmark.core.records import DIRECTION_KEYS, Codebook

__all__ = ["codebook_only_primary", "direction_shares", "name_fit", "names_distinct", "names_verbatim"]

GENERIC_NAME_SHARE = 0.20
"""A name found in more than this share of its field's pre-cutoff papers is generic."""

EXCLUSION_WEIGHT = 0.5


def _direction_texts(cb: Codebook, titles: dict[str, str]) -> tuple[list[str], list[str]]:
    pos, neg = [], []
    for d in cb.directions:
        ex = d.exemplar_titles or tuple(titles.get(e, "") for e in d.exemplars)
        pos.append(" ".join([d.name, d.name, d.definition, d.inclusion, *ex]))
        neg.append(d.exclusion)
    return pos, neg


def codebook_only_primary(papers: pd.DataFrame, memberships: pd.DataFrame, codebooks: dict[str, Codebook]) -> pd.Series:
    """The codebook-only classifier's direction (D0..D7) for each row of ``memberships``
    (columns arxiv_id, field_id), index-aligned with it."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    from rap_benchmark.core.text import tokenize

    titles = dict(zip(papers["arxiv_id"], papers["title"], strict=True))
    fids = sorted(codebooks)
    pos_texts, neg_texts = [], []
    for fid in fids:
        p, n = _direction_texts(codebooks[fid], titles)
        pos_texts += p
        neg_texts += n

    def analyzer(text: str) -> list[str]:
        toks = tokenize(text)
        return toks + [f"{a} {b}" for a, b in zip(toks, toks[1:], strict=False)]

    vec = TfidfVectorizer(analyzer=analyzer, sublinear_tf=True)
    vec.fit(pos_texts + neg_texts)
    pos = vec.transform(pos_texts)
    neg = vec.transform(neg_texts)
    text = papers.set_index("arxiv_id")
    docs = (text.loc[memberships["arxiv_id"], "title"] + " " + text.loc[memberships["arxiv_id"], "abstract"]).tolist()
    x = vec.transform(docs)
    out = np.empty(len(memberships), dtype=object)
    field_of = memberships["field_id"].to_numpy().astype(str)
    base = {fid: 8 * i for i, fid in enumerate(fids)}
    keys = np.asarray(DIRECTION_KEYS, dtype=object)
    for fid in np.unique(field_of):
        rows = np.flatnonzero(field_of == fid)
        sl = slice(base[fid], base[fid] + 8)
        score = np.asarray((x[rows] @ pos[sl].T).todense()) - EXCLUSION_WEIGHT * np.asarray(
            (x[rows] @ neg[sl].T).todense()
        )
        out[rows] = keys[score.argmax(axis=1)]
    return pd.Series(out, index=memberships.index, dtype=object)


def direction_shares(assignments: pd.DataFrame, cutoff: str) -> pd.DataFrame:
    """Per field, each direction's share of the field's pre-cutoff memberships (fields x D0..D7)."""
    pre = assignments.loc[assignments["date"].astype(str) < cutoff]
    table = pd.crosstab(pre["field_id"], pre["primary"]).reindex(columns=list(DIRECTION_KEYS), fill_value=0)
    totals = pre.groupby("field_id").size().reindex(table.index)
    return table.div(totals, axis=0)


def names_verbatim(
    papers: pd.DataFrame, assignments: pd.DataFrame, codebooks: dict[str, Codebook], cutoff: str
) -> pd.DataFrame:
    """One row per direction: field_id, key, name, verbatim (the name is a substring of the title
    or abstract of a pre-cutoff paper whose frozen primary is that direction)."""
    text = papers.set_index("arxiv_id")
    pre = assignments.loc[assignments["date"].astype(str) < cutoff, ["arxiv_id", "field_id", "primary"]]
    ids = {k: g["arxiv_id"] for k, g in pre.groupby(["field_id", "primary"], sort=True)}
    rows = []
    for fid, cb in codebooks.items():
        for d in cb.directions:
            sub = text.loc[ids[fid, d.key]] if (fid, d.key) in ids else text.iloc[:0]
            hit = (
                sub["title"].str.contains(d.name, regex=False) | sub["abstract"].str.contains(d.name, regex=False)
            ).any()
            rows.append({"field_id": fid, "key": d.key, "name": d.name, "verbatim": bool(hit)})
    return pd.DataFrame(rows).sort_values(["field_id", "key"]).reset_index(drop=True)


def names_distinct(codebooks: dict[str, Codebook]) -> pd.Series:
    """Per field: True when its eight direction names are distinct (case-insensitive)."""
    return pd.Series(
        {fid: len({d.name.lower() for d in cb.directions}) == len(cb.directions) for fid, cb in codebooks.items()}
    )


def name_fit(
    papers: pd.DataFrame, assignments: pd.DataFrame, codebooks: dict[str, Codebook], cutoff: str
) -> pd.DataFrame:
    """One row per direction: field_id, key, name, precision, coverage, field_share (see the module
    docstring; case-insensitive; NaN when nothing to divide by)."""
    text = papers.set_index("arxiv_id")
    pre = assignments.loc[assignments["date"].astype(str) < cutoff, ["arxiv_id", "field_id", "primary"]]
    rows = []
    for fid, g in pre.groupby("field_id", sort=True):
        if fid not in codebooks:
            continue
        sub = text.loc[g["arxiv_id"]]
        docs = (sub["title"].astype(str) + " \n " + sub["abstract"].astype(str)).str.lower()
        primary = g["primary"].to_numpy()
        for d in codebooks[fid].directions:
            has = docs.str.contains(d.name.lower(), regex=False).to_numpy()
            mine = primary == d.key
            rows.append(
                {
                    "field_id": fid,
                    "key": d.key,
                    "name": d.name,
                    "precision": float((has & mine).sum() / has.sum()) if has.any() else float("nan"),
                    "coverage": float((has & mine).sum() / mine.sum()) if mine.any() else float("nan"),
                    "field_share": float(has.mean()) if has.size else float("nan"),
                }
            )
    return pd.DataFrame(rows, columns=["field_id", "key", "name", "precision", "coverage", "field_share"])
