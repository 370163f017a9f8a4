"""Agent loops against any environment client: a tool-calling chat model and a scripted policy.

:func:`run_chat_agent` drives any chat function ``(messages, tools) -> assistant message`` (an
OpenAI-compatible endpoint via :func:`openai_chat`, or a scripted fake in tests) through one task:
tool calls are executed by the environment, observations are fed back as ``tool`` messages,
refusals (bad arguments) are fed back as error observations, and the loop ends at the first
accepted ``submit_prediction`` or after ``max_turns`` (unfinished: no reward).

:func:`run_text_agent` is the same loop for models without native tool calling (the lm-eval
``citecast`` task): the tools are tags in plain text (:data:`TEXT_PROTOCOL`), generation stops at
their closing tags (:data:`TEXT_STOPS`), and the completion function is async so that many
episodes can share batched generation rounds (``rap_benchmark.integrations.lmeval.citecast_task``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from rap_benchmark.citecast.client import EnvClient
from rap_benchmark.citecast.env import EnvError
from rap_benchmark.citecast.tools import ToolArgumentError

Chat = Callable[[list[dict[str, Any]], list[dict[str, Any]]], dict[str, Any]]
MAX_OBSERVATION_CHARS = 30_000


@dataclass(frozen=True)
class RunRow:
    task_id: str
    session_id: str
    prediction: int | None
    reward: float | None
    n_tool_calls: int
    n_turns: int
    finished: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_chat_agent(client: EnvClient, task_id: str, chat: Chat, max_turns: int = 24) -> RunRow:
    started = client.start(task_id)
    sid = started["session_id"]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": started["system"]},
        {"role": "user", "content": started["prompt"]},
    ]
    n_calls = 0
    for turn in range(1, max_turns + 1):
        msg = chat(messages, started["tools"])
        messages.append(msg)
        calls = msg.get("tool_calls") or []
        if not calls:
            messages.append({"role": "user", "content": "Call submit_prediction with your integer forecast now."})
            continue
        for call in calls:
            fn = call["function"]
            n_calls += 1
            try:
                args = json.loads(fn.get("arguments") or "{}")
                result = client.call(sid, fn["name"], args)
                content = json.dumps(result["observation"], ensure_ascii=False)[:MAX_OBSERVATION_CHARS]
            except (ToolArgumentError, EnvError, json.JSONDecodeError) as exc:
                result, content = None, json.dumps({"error": str(exc)})
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": content})
            if result is not None and result["done"]:
                return RunRow(task_id, sid, result["observation"]["prediction"], result["reward"], n_calls, turn, True)
    return RunRow(task_id, sid, None, None, n_calls, max_turns, False)


def run_constant(client: EnvClient, task_id: str, value: int, research: bool = True) -> RunRow:
    """A scripted policy: (optionally) search the title and fetch the top hit, then submit ``value``."""
    started = client.start(task_id)
    sid = started["session_id"]
    n = 0
    if research:
        title = started["prompt"].split("Title: ", 1)[1].split("\n", 1)[0]
        hits = client.call(sid, "web_search", {"query": title})["observation"]
        n += 1
        if hits:
            client.call(sid, "web_fetch", {"url": hits[0]["url"]})
            n += 1
    res = client.call(sid, "submit_prediction", {"prediction": value, "justification": "constant policy"})
    return RunRow(task_id, sid, value, res["reward"], n + 1, 1, True)


def openai_chat(model: str, base_url: str | None = None, api_key: str | None = None, temperature: float = 0.0) -> Chat:
    """A :data:`Chat` over an OpenAI-compatible endpoint (tool_choice=auto, no parallel calls)."""
    from openai import OpenAI

    oa = OpenAI(base_url=base_url, api_key=api_key or "EMPTY")

    def chat(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        resp = oa.chat.completions.create(
            model=model,
            messages=messages,  # type: ignore[arg-type]
            tools=tools,  # type: ignore[arg-type]
            tool_choice="auto",
            parallel_tool_calls=False,
            temperature=temperature,
        )
        return resp.choices[0].message.model_dump(exclude_none=True)

    return chat


# -- the text tool protocol (models without native tool calling) --------------------------------

TEXT_PROTOCOL = (
    "Tool use: think briefly if you like, then end your reply with exactly one tag:\n"
    "<web_search>keywords</web_search> searches the archive (web_search);\n"
    "<web_fetch>url</web_fetch> fetches an archived page (web_fetch);\n"
    "<submit>integer</submit> submits your forecast (submit_prediction; the text before the tag is "
    "recorded as the justification). The first accepted submission ends the task.\n"
    "Results come back in the next message inside <observation> tags."
)
"""Appended to the environment's system prompt when the tools are text tags."""

TEXT_TOOLS: dict[str, str] = {"web_search": "web_search", "web_fetch": "web_fetch", "submit": "submit_prediction"}
"""Tag -> environment tool."""
TEXT_STOPS: tuple[str, ...] = (*(f"</{tag}>" for tag in TEXT_TOOLS), "<observation>")
"""Generation stops when a tool tag closes or the model starts to write an observation itself."""
FORCE_SUBMIT = "You have used all {n} web calls. Reply now with your forecast as <submit>integer</submit>."
NUDGE = (
    "Your last reply {problem}. Reply with one tool tag; to finish, reply with "
    "<submit>integer</submit> holding a nonnegative integer."
)

_TAG = re.compile(r"<(web_search|web_fetch|submit)>(.*?)</\1>", re.DOTALL)
_OPEN_TAG = re.compile(r"<(web_search|web_fetch|submit)>")
_INT = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.0*)?")


@dataclass(frozen=True)
class TextAction:
    """The first complete tool tag of a reply: the tag, its body and the text before it."""

    tag: str
    body: str
    prefix: str

    @property
    def tool(self) -> str:
        return TEXT_TOOLS[self.tag]


def restore_text_stop(reply: str) -> str:
    """``reply`` with the closing tag that generation stopped at put back (lm-eval strips the stop
    sequence), when the last tool tag of the reply is still open at its end."""
    last = None
    for m in _OPEN_TAG.finditer(reply):
        last = m
    if last is None or f"</{last.group(1)}>" in reply[last.end() :]:
        return reply
    return f"{reply}</{last.group(1)}>"


def parse_text_action(text: str) -> TextAction | None:
    """The first complete ``<web_search>``, ``<web_fetch>`` or ``<submit>`` tag of ``text``."""
    m = _TAG.search(text)
    if m is None:
        return None
    return TextAction(m.group(1), m.group(2).strip(), text[: m.start()].strip())


def parse_submission(body: str) -> int | None:
    """The integer a ``<submit>`` body holds (``42``, ``1,250``, ``12.0``; a sign is kept so the
    environment can refuse negatives itself), or None when it holds anything else."""
    s = body.strip()
    if not _INT.fullmatch(s):
        return None
    return int(s.split(".", 1)[0].replace(",", ""))


def text_messages(system: str, prompt: str) -> list[dict[str, str]]:
    """The first two messages of a text-protocol episode (system prompt + protocol, task prompt)."""
    return [{"role": "system", "content": f"{system}\n\n{TEXT_PROTOCOL}"}, {"role": "user", "content": prompt}]


def observation_message(observation: Any, max_chars: int = MAX_OBSERVATION_CHARS) -> dict[str, str]:
    body = json.dumps(observation, ensure_ascii=False)[:max_chars]
    return {"role": "user", "content": f"<observation>\n{body}\n</observation>"}


Complete = Callable[[list[dict[str, str]]], Awaitable[str]]
"""An async completion: chat messages in, the assistant's reply text out."""


@dataclass(frozen=True)
class TextRun:
    """Everything recorded about one text-protocol episode."""

    task_id: str
    session_id: str
    prediction: int | None
    reward: float | None
    valid: bool
    n_tool_calls: int
    n_turns: int
    answer_text: str
    invalid_reason: str | None
    messages: list[dict[str, str]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def run_text_agent(
    client: EnvClient,
    task_id: str,
    complete: Complete,
    *,
    max_tool_calls: int = 8,
    max_observation_chars: int = MAX_OBSERVATION_CHARS,
) -> TextRun:
    """One task through the text tool protocol, every call executed by the environment.

    At most ``max_tool_calls`` web calls (refused ones included); then a message forces the
    submission. A reply without a tag, a submission that is not an integer or that the
    environment refuses, or a web tag once the budget is spent is a failure: the first is answered
    with a nudge, the second ends the episode invalid (no prediction, no reward). The first
    submission the environment accepts ends the episode; the session's one-shot rule is the
    environment's own.
    """
    started = client.start(task_id)
    sid = started["session_id"]
    messages = text_messages(started["system"], started["prompt"])
    calls: list[dict[str, Any]] = []
    events: list[str] = []
    n_web = n_turns = failures = 0
    forced = False
    answer = ""
    reason: str | None = None
    while True:
        if n_web >= max_tool_calls and not forced:
            forced = True
            events.append(f"forced_submission after {n_web} web calls")
            messages.append({"role": "user", "content": FORCE_SUBMIT.format(n=max_tool_calls)})
        try:
            reply = await complete(list(messages))
        except Exception as exc:  # noqa: BLE001 - a failed generation is recorded, not lost
            reason = f"backend_error: {type(exc).__name__}: {exc}"
            break
        n_turns += 1
        answer = restore_text_stop(reply)
        messages.append({"role": "assistant", "content": answer})
        action = parse_text_action(answer)
        problem: str | None = None
        if action is None:
            problem = "had no tool tag"
        elif action.tag == "submit":
            value = parse_submission(action.body)
            if value is None:
                problem = f"submitted {action.body[:80]!r}, which is not an integer"
            else:
                args = {"prediction": value, "justification": action.prefix}
                try:
                    res = client.call(sid, action.tool, args)
                except (ToolArgumentError, EnvError) as exc:
                    calls.append({"name": action.tool, "arguments": args, "ok": False, "error": str(exc)})
                    problem = f"submitted a prediction the environment refused ({exc})"
                else:
                    calls.append({"name": action.tool, "arguments": args, "ok": True, "error": None})
                    obs = res["observation"]
                    n = sum(1 for c in calls if c["name"] != "submit_prediction")
                    return TextRun(
                        task_id,
                        sid,
                        obs["prediction"],
                        res["reward"],
                        True,
                        n,
                        n_turns,
                        answer,
                        None,
                        messages,
                        calls,
                        events,
                    )
        elif forced:
            problem = f"called {action.tag} after the web-call budget was spent"
        else:
            n_web += 1
            key = "query" if action.tag == "web_search" else "url"
            args = {key: action.body}
            try:
                observation = client.call(sid, action.tool, args)["observation"]
                calls.append({"name": action.tool, "arguments": args, "ok": True, "error": None})
            except (ToolArgumentError, EnvError) as exc:
                observation = {"error": str(exc)}
                calls.append({"name": action.tool, "arguments": args, "ok": False, "error": str(exc)})
            messages.append(observation_message(observation, max_observation_chars))
            continue
        failures += 1
        events.append(f"failure: {problem}")
        if failures >= 2:
            reason = f"no_valid_submission: {problem}"
            break
        messages.append({"role": "user", "content": NUDGE.format(problem=problem)})
    n = sum(1 for c in calls if c["name"] != "submit_prediction")
    return TextRun(task_id, sid, None, None, False, n, n_turns, answer, reason, messages, calls, events)
