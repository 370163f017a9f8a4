"""rap_benchmark.tools: one schema rule, one argument checker, one text protocol, for RAP's Search
tool and CiteCast's tools alike."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rap_benchmark.agents.toolset import search_text_protocol
from rap_benchmark.citecast.tools import SessionTools, tool_schemas
from rap_benchmark.tools import (
    ANSWER_TURN_STOPS,
    TextProtocol,
    TextTool,
    ToolArgumentError,
    check_arguments,
    parse_integer,
    stops_for,
    tool_schema,
)


def tool(query: str, n: int, ratio: float | None = None, flag: bool = False) -> dict:
    """Do a thing.

    Spread over two lines.

    Args:
        query: The words,
            continued here.
        n: A count.
        ratio: Optional ratio.
        flag: A flag.

    Returns:
        Something.
    """
    return {}


def test_schema_rule_is_one_for_functions_and_methods() -> None:
    fn = tool_schema(tool)["function"]
    assert fn["description"] == "Do a thing. Spread over two lines."
    props = fn["parameters"]["properties"]
    assert {k: v["type"] for k, v in props.items()} == {
        "query": "string",
        "n": "integer",
        "ratio": "number",
        "flag": "boolean",
    }
    assert props["query"]["description"] == "The words, continued here."
    assert fn["parameters"]["required"] == ["query", "n"]
    # CiteCast's methods go through the same rule: self is not a parameter
    assert tool_schemas()[2] == tool_schema(SessionTools.submit_prediction)
    assert "self" not in json.dumps(tool_schemas())


@pytest.mark.parametrize(
    "arguments, fragment",
    [
        ([1], "expected a JSON object"),
        ({"query": "x"}, "missing argument(s) n"),
        ({"query": "x", "n": 1, "color": 2}, "unknown argument(s) color"),
        ({"query": 3, "n": 1}, "query must be a string"),
        ({"query": "x", "n": True}, "n must be an integer"),
        ({"query": "x", "n": 1.5}, "n must be an integer"),
        ({"query": "x", "n": 1, "flag": None}, "flag must be boolean, got null"),
    ],
)
def test_checker_refuses_with_a_message_naming_the_problem(arguments, fragment) -> None:
    with pytest.raises(ToolArgumentError, match="^tool: ") as err:
        check_arguments(tool, arguments)
    assert fragment in str(err.value)


def test_checker_accepts_integral_floats_and_nulls_where_optional() -> None:
    assert check_arguments(tool, {"query": "x", "n": 12.0, "ratio": None}) == {"query": "x", "n": 12, "ratio": None}
    assert check_arguments(tool, {"query": "x", "n": 2, "ratio": 3}) == {"query": "x", "n": 2, "ratio": 3}


CITECAST_LIKE = TextProtocol(
    (
        TextTool("web_search", "web_search", "query"),
        TextTool("submit", "submit_prediction", "prediction", prefix="justification", integer_body=True),
    ),
    "instructions",
)
_words = st.text(st.characters(whitelist_categories=("L", "N"), whitelist_characters=" -."), min_size=1, max_size=30)


@given(_words.filter(str.strip), st.one_of(st.none(), st.dates().map(str)))
def test_search_tags_round_trip(query: str, start: str | None) -> None:
    protocol = search_text_protocol()
    args = {"query": query.strip(), "start_date": start}
    text = protocol.render_call("search", json.dumps(args))
    parsed = protocol.parse(f"thinking... {text} trailing")
    assert parsed is not None and parsed.tool == "search"
    assert parsed.arguments == {k: v for k, v in args.items() if v is not None}
    # a reply cut at the stop sequence gets its closing tag back, and reads the same
    assert protocol.parse(protocol.restore_stop(text.removesuffix("</search>"))) == parsed


@given(st.integers(0, 10**9), _words)
def test_submit_tag_reads_prefix_and_integer(n: int, why: str) -> None:
    parsed = CITECAST_LIKE.parse(f"{why}\n<submit> {n:,} </submit><web_search>x</web_search>")
    assert parsed.tool == "submit_prediction" and parsed.arguments == {"justification": why.strip(), "prediction": n}
    assert CITECAST_LIKE.parse("<submit>a dozen</submit>").arguments["prediction"] == "a dozen"  # left for the checker


def test_stop_sequences_have_one_meaning_each() -> None:
    assert CITECAST_LIKE.tool_turn_stops == ("</web_search>", "</submit>", "<observation>")
    assert ANSWER_TURN_STOPS == ("<observation>",)
    assert stops_for(CITECAST_LIKE, True, ["END", "</submit>"]) == [
        "</web_search>",
        "</submit>",
        "<observation>",
        "END",
    ]
    assert stops_for(CITECAST_LIKE, False, ["END", "</submit>"]) == ["<observation>", "END"]
    assert parse_integer("1,250") == 1250 and parse_integer("12.0") == 12 and parse_integer("1,23") is None


def test_render_writes_tool_messages_as_observations() -> None:
    msgs = [
        {"role": "system", "content": "S"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"function": {"name": "web_search", "arguments": '{"query": "q"}'}}],
        },
        {"role": "tool", "content": "[]"},
    ]
    out = CITECAST_LIKE.render(msgs, tools_offered=True)
    assert out == [
        {"role": "system", "content": "S\n\ninstructions"},
        {"role": "assistant", "content": "<web_search>q</web_search>"},
        {"role": "user", "content": "<observation>\n[]\n</observation>"},
    ]
