"""Agent loops against any environment client: a tool-calling chat model and a scripted policy.

:func:`run_chat_agent` drives any chat function ``(messages, tools) -> assistant message`` (an
OpenAI-compatible endpoint via :func:`openai_chat`, or a scripted fake in tests) through one task:
tool calls are executed by the environment, observations are fed back as ``tool`` messages,
refusals (bad arguments) are fed back as error observations, and the loop ends at the first
accepted ``submit_prediction`` or after ``max_turns`` (unfinished: no reward).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
