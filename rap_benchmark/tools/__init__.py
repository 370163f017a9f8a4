"""Tools as plain typed functions: one schema rule, one argument checker, one text protocol.

* :func:`tool_schema`: the OpenAI ``tools`` entry of a function, from its signature and docstring;
* :func:`check_arguments`: an agent's arguments against that signature (:class:`ToolArgumentError`);
* :class:`TextProtocol`: tool calls as tags for models without native tool calling (render, parse,
  stop sequences).

RAP's Search tool (``rap_benchmark.bm25.tool``) and CiteCast's tools
(``rap_benchmark.citecast.tools``) both go through these; so do the agent runner, the lm-eval tasks
and the audit.
"""

from rap_benchmark.tools.arguments import ToolArgumentError, check_arguments
from rap_benchmark.tools.schema import Param, parse_docstring, tool_params, tool_schema
from rap_benchmark.tools.text import (
    ANSWER_TURN_STOPS,
    OBSERVATION_CLOSE,
    OBSERVATION_OPEN,
    ParsedCall,
    TextProtocol,
    TextTool,
    observation_block,
    parse_integer,
    stops_for,
)

__all__ = [
    "ANSWER_TURN_STOPS",
    "OBSERVATION_CLOSE",
    "OBSERVATION_OPEN",
    "Param",
    "ParsedCall",
    "TextProtocol",
    "TextTool",
    "ToolArgumentError",
    "check_arguments",
    "observation_block",
    "parse_docstring",
    "parse_integer",
    "stops_for",
    "tool_params",
    "tool_schema",
]
