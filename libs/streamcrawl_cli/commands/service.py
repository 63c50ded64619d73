"""`streamcrawl service NAME [ARGS...]`: run one service in this process, exactly as its own console
script `streamcrawl-NAME` would (the container image uses either)."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from streamcrawl_cli.services import SERVICES

NAME = "service"
HELP = "run one service (frontier, fetcher, parser, dedup, recrawl, control)"
DESCRIPTION = ("Run one streamcrawl service in the foreground, configured from its STREAMCRAWL_* environment. "
               "Arguments after NAME go to the service: `streamcrawl service fetcher --help` lists its settings.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=sorted(SERVICES), metavar="NAME",
                        help="one of: " + ", ".join(sorted(SERVICES)))
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the service")


def run(args: argparse.Namespace) -> int:
    script = f"streamcrawl-{args.name}"
    found = metadata.entry_points(group="console_scripts", name=script)
    if not found:
        print(f"streamcrawl: the entry point {script} is not installed (pip install streamcrawl)", file=sys.stderr)
        return 1
    entry = next(iter(found)).load()
    sys.argv = [script, *args.args]
    result = entry()
    return int(result or 0)
