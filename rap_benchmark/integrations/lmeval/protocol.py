"""The lm-eval side of the text tool protocol (``<search>query</search>``).

The protocol itself (wording, parsing, rendering of observations) is the agents' one:
``rap_benchmark.agents.transformers_backend`` (``render_text_protocol``,
``parse_text_tool_call``) and ``prompts/text_tool_protocol.txt``. lm-eval adds one wrinkle: its
models strip the stop sequence from what they return, so a reply that ends inside an open search
tag gets its ``</search>`` back before it is parsed and stored.
"""

from __future__ import annotations

import re

CLOSE_TAG = "</search>"
OBSERVATION_OPEN = "<observation>"
_OPEN = re.compile(r"<search(?:\s+[A-Za-z_]+\s*=\s*\"[^\"]*\")*\s*>", re.IGNORECASE)

SEARCH_STOPS: tuple[str, ...] = (CLOSE_TAG, OBSERVATION_OPEN)
"""While Search is open, generation stops when the model closes a search tag or starts to write
an observation itself."""
ANSWER_STOPS: tuple[str, ...] = (OBSERVATION_OPEN,)
"""Without Search (A0, or once the budget is spent) only an invented observation stops it."""


def restore_stop(reply: str) -> str:
    """``reply`` with the ``</search>`` that generation stopped at put back, when a search tag is
    still open at its end."""
    last_open = None
    for m in _OPEN.finditer(reply):
        last_open = m
    if last_open is None or CLOSE_TAG in reply[last_open.end() :]:
        return reply
    return reply + CLOSE_TAG
