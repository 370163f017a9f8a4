"""The one text tool protocol, for models without native tool calling.

A tool call is a tag in the reply: ``<tag name="value">body</tag>``. A :class:`TextProtocol` maps
tags to tools (:class:`TextTool`: which argument the body holds, which one, if any, takes the
reply's text before the tag, and whether the body is an integer); other arguments are attributes.
Tool results come back as user messages wrapped in ``<observation>`` tags. The same protocol
renders a chat for a template without tools (:meth:`TextProtocol.render`), reads the first
complete tag of a reply back as a call (:meth:`TextProtocol.parse`), names the stop sequences
and puts back a closing tag that a generation stopped at (:meth:`TextProtocol.restore_stop`).

Stop sequences: :attr:`TextProtocol.tool_turn_stops` while a tool can be called,
:data:`ANSWER_TURN_STOPS` otherwise (where a prefilled JSON answer stops belongs to RAP's answer
format: ``rap_benchmark.agents.prompts.PREFILLED_ANSWER_STOPS``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

OBSERVATION_OPEN = "<observation>"
OBSERVATION_CLOSE = "</observation>"
ANSWER_TURN_STOPS: tuple[str, ...] = (OBSERVATION_OPEN,)
"""Stops of a turn on which no tool can be called: only an invented observation stops it."""

_ATTRS = r"((?:\s+[A-Za-z_]+\s*=\s*\"[^\"]*\")*)\s*"
_ATTR = re.compile(r"([A-Za-z_]+)\s*=\s*\"([^\"]*)\"")
_INT = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.0*)?")


def parse_integer(body: str) -> int | None:
    """The integer a tag body holds (``42``, ``1,250``, ``12.0``; a sign is kept so the tool can
    refuse negatives itself), or None when it holds anything else."""
    s = body.strip()
    if not _INT.fullmatch(s):
        return None
    return int(s.split(".", 1)[0].replace(",", ""))


def observation_block(content: str) -> str:
    """A tool result as the user message of the text protocol."""
    return f"{OBSERVATION_OPEN}\n{content}\n{OBSERVATION_CLOSE}"


@dataclass(frozen=True, slots=True)
class TextTool:
    """One tag of a text protocol: ``<tag>`` calls ``tool`` with its body as argument ``body``."""

    tag: str
    tool: str
    body: str
    prefix: str | None = None  # argument that takes the reply's text before the tag
    integer_body: bool = False  # the body is read with parse_integer (left as text when it is not one)


@dataclass(frozen=True, slots=True)
class ParsedCall:
    """A tool call read from text: the tool, its arguments, and the tag it came from."""

    tool: str
    arguments: dict[str, Any]
    tag: str

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, ensure_ascii=False)


@dataclass(frozen=True)
class TextProtocol:
    """The tags of one tool set and the instructions that explain them to a model."""

    tools: tuple[TextTool, ...]
    instructions: str

    @cached_property
    def _by_tag(self) -> dict[str, TextTool]:
        return {t.tag: t for t in self.tools}

    @cached_property
    def _by_tool(self) -> dict[str, TextTool]:
        return {t.tool: t for t in self.tools}

    @cached_property
    def _tags(self) -> str:
        return "|".join(re.escape(t.tag) for t in self.tools)

    @cached_property
    def _complete(self) -> re.Pattern[str]:
        return re.compile(rf"<({self._tags}){_ATTRS}>(.*?)</\1>", re.DOTALL)

    @cached_property
    def _open(self) -> re.Pattern[str]:
        return re.compile(rf"<({self._tags}){_ATTRS}>")

    @property
    def tool_turn_stops(self) -> tuple[str, ...]:
        """Stops of a turn on which a tool can be called: a closing tag, or an invented observation."""
        return (*(f"</{t.tag}>" for t in self.tools), OBSERVATION_OPEN)

    def parse(self, text: str) -> ParsedCall | None:
        """The first complete tool tag of ``text`` as a call, or None."""
        m = self._complete.search(text)
        if m is None:
            return None
        tool = self._by_tag[m.group(1)]
        body = m.group(3).strip()
        args: dict[str, Any] = {}
        if tool.prefix is not None:
            args[tool.prefix] = text[: m.start()].strip()
        value: Any = body
        if tool.integer_body:
            n = parse_integer(body)
            value = body if n is None else n
        args[tool.body] = value
        for key, attr in _ATTR.findall(m.group(2) or ""):
            args.setdefault(key, attr)
        return ParsedCall(tool.tool, args, tool.tag)

    def restore_stop(self, reply: str) -> str:
        """``reply`` with the closing tag that generation stopped at put back (lm-eval strips the
        stop sequence), when the last tool tag of the reply is still open at its end."""
        last = None
        for m in self._open.finditer(reply):
            last = m
        if last is None or f"</{last.group(1)}>" in reply[last.end() :]:
            return reply
        return f"{reply}</{last.group(1)}>"

    def render_call(self, name: str, arguments: str) -> str:
        """The tag a recorded call (tool name, JSON arguments) would have been written as."""
        tool = self._by_tool.get(name)
        tag = tool.tag if tool is not None else name
        try:
            args = json.loads(arguments)
        except json.JSONDecodeError:
            args = None
        if tool is None or not isinstance(args, dict):
            return f"<{tag}>{arguments}</{tag}>"
        skip = {tool.body, tool.prefix}
        attrs = "".join(f' {k}="{v}"' for k, v in args.items() if k not in skip and v is not None)
        out = f"<{tag}{attrs}>{args.get(tool.body, '')}</{tag}>"
        before = args.get(tool.prefix) if tool.prefix else None
        return f"{before} {out}" if before else out

    def render(self, messages: Iterable[Mapping[str, Any]], *, tools_offered: bool) -> list[dict[str, str]]:
        """Chat messages for a template without tools: the instructions join the system message
        (when tools are offered), tool results become user messages in observation tags, and an
        assistant turn that holds only tool calls is written as its first call's tag."""
        out: list[dict[str, str]] = []
        for m in messages:
            role, content = str(m["role"]), m.get("content")
            if role == "system" and tools_offered:
                out.append({"role": "system", "content": f"{content}\n\n{self.instructions}"})
            elif role == "tool":
                out.append({"role": "user", "content": observation_block(str(content))})
            elif role == "assistant" and not content and m.get("tool_calls"):
                call = m["tool_calls"][0]["function"]
                out.append({"role": "assistant", "content": self.render_call(call["name"], call.get("arguments", ""))})
            else:
                out.append({"role": role, "content": str(content or "")})
        return out


def stops_for(protocol: TextProtocol | None, tool_turn: bool, extra: Sequence[str] = ()) -> list[str]:
    """The stop sequences of a turn (tool turn or answer turn), then ``extra`` ones not already there."""
    own = protocol.tool_turn_stops if (tool_turn and protocol is not None) else ANSWER_TURN_STOPS
    known = set(ANSWER_TURN_STOPS) | set(protocol.tool_turn_stops if protocol is not None else ())
    return [*own, *(s for s in extra if s not in known)]
