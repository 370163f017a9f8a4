"""The ``rap`` command line. Every module in this package that defines ``register(subparsers)``
adds its subcommands; heavy imports live inside the command functions."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

EPILOG = """examples:
  rap demo                                   build mini and run everything on it
  rap build --instance mini --out build/mini
  rap verify build/mini
  rap info build/mini
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rap",
        description="RAP and CiteCast: research-forecasting benchmarks for LLM agents.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{mod.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
