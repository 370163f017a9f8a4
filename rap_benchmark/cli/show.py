"""``rap show``: print a field's written codebook, or exactly what an agent receives in an episode."""

from __future__ import annotations

import argparse
import json
import textwrap

from rap_benchmark.core.errors import InputError

EPILOG = """examples:
  rap show build/mini --field f003
  rap show build/mini --field f003 --origin 2025-01-01 --condition A1
  rap show build/mini --field f003 --origin 2025-01-01 --condition A1 --json

Without --origin the field's codebook is printed: each direction's name, definition, inclusion,
exclusion and exemplars (ids and titles). With --origin and --condition the episode's messages
(system and user prompt) and the Search tool schema are printed exactly as the runner sends them.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "show",
        help="print a field's codebook, or the messages and tool schema of one episode",
        description="Show what a field's codebook says, or exactly what an agent receives in one episode.",
        epilog=EPILOG,
    )
    p.add_argument("instance", metavar="DIR", help="built instance folder")
    p.add_argument("--field", required=True, help="field id, e.g. f003")
    p.add_argument("--origin", default=None, help="forecast origin T, YYYY-MM-DD (with --condition)")
    p.add_argument("--condition", default=None, help="A0..A4 (with --origin)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=run)


def codebook_text(cb, titles: dict[str, str]) -> str:
    """The codebook of one field as readable text (exemplar titles from ``titles`` when the
    codebook does not record them)."""
    lines = [f"{cb.field_id}  {cb.name}", textwrap.fill(cb.definition, 100), ""]
    for d in cb.directions:
        ex_titles = d.exemplar_titles or tuple(titles.get(e, "") for e in d.exemplars)
        lines.append(f"{d.key}. {d.name}")
        for label, text in (("Definition", d.definition), ("Includes", d.inclusion), ("Excludes", d.exclusion)):
            lines.append(textwrap.fill(text, 100, initial_indent=f"    {label}: ", subsequent_indent="      "))
        lines.append("    Exemplars:")
        lines.extend(f"      {e}  {t}" for e, t in zip(d.exemplars, ex_titles, strict=True))
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def episode_payload(inst, field_id: str, origin: str, condition: str) -> dict:
    """The messages and tools an agent receives for one (field, origin, condition)."""
    from rap_benchmark.agents import prompts
    from rap_benchmark.agents.runner import SearchTools
    from rap_benchmark.core.records import Condition

    cond = Condition(condition)
    cb = inst.codebooks[field_id]
    messages = prompts.initial_messages(prompts.condition_prompt(cb, origin, cond, inst.spec))
    tools = []
    if cond.regime is not None:
        _, schema = SearchTools(inst).bind(field_id, origin, cond.regime)
        tools = [schema]
    return {"messages": messages, "tools": tools, "prompt_version": prompts.PROMPT_VERSION}


def run(args: argparse.Namespace) -> int:
    from rap_benchmark.core.artifacts import load_instance
    from rap_benchmark.core.dates import parse_date
    from rap_benchmark.core.records import Condition, parse_enum

    if (args.origin is None) != (args.condition is None):
        raise InputError("--origin and --condition go together (without both, the codebook is shown)")
    if args.condition is not None:
        parse_enum(Condition, args.condition)
    inst = load_instance(args.instance)
    if args.field not in inst.codebooks:
        known = sorted(inst.codebooks)
        if not known:
            raise InputError(f"{args.instance} has no fields (its build kept none): there is no codebook to show")
        raise InputError(f"no field {args.field!r} in {args.instance} (fields {known[0]}..{known[-1]})")
    if args.origin is None:
        cb = inst.codebooks[args.field]
        if args.json:
            from rap_benchmark.core.artifacts import codebook_to_dict

            print(json.dumps(codebook_to_dict(cb), indent=1, ensure_ascii=False))
        else:
            wanted = {e for d in cb.directions for e in d.exemplars}
            rows = inst.papers.loc[inst.papers["arxiv_id"].isin(wanted), ["arxiv_id", "title"]]
            print(codebook_text(cb, dict(zip(rows["arxiv_id"], rows["title"], strict=True))))
        return 0
    try:
        origin = parse_date(args.origin).isoformat()
    except ValueError as exc:
        raise InputError(f"bad --origin: {exc}") from None
    if origin not in inst.spec.origins:
        raise InputError(f"origin {origin} is not one of the instance's origins ({', '.join(inst.spec.origins)})")
    payload = episode_payload(inst, args.field, origin, args.condition)
    if args.json:
        print(json.dumps(payload, indent=1, ensure_ascii=False))
        return 0
    for m in payload["messages"]:
        print(f"===== {m['role']} =====")
        print(m["content"])
    print("===== tools =====")
    print(json.dumps(payload["tools"], indent=1, ensure_ascii=False) if payload["tools"] else "(none: closed book)")
    print(f"===== prompt version {payload['prompt_version']} =====")
    return 0
