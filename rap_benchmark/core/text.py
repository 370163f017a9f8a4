"""The one deterministic tokenizer used by search, codebooks and instruments.

Lower-case, ASCII-fold, split on anything that is not a letter or digit, drop a fixed English
stop-word list and one-character tokens. No stemming, no dependence on hash seeds or locale.
"""

from __future__ import annotations

import re
import unicodedata

_TOKEN = re.compile(r"[a-z0-9]+")

STOPWORDS: frozenset[str] = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it its
    itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them themselves
    then there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves via using use used
    based we our paper propose proposed show shows results approach method methods new""".split()
)


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` in order (duplicates kept)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return [t for t in _TOKEN.findall(folded) if len(t) > 1 and t not in STOPWORDS]


def query_terms(query: str) -> list[str]:
    """Distinct query tokens in first-seen order (duplicate query terms count once)."""
    return list(dict.fromkeys(tokenize(query)))
