"""`streamcrawl resume [HOST]`: lift the global pause or one host's (POST /v1/resume)."""

from __future__ import annotations

import argparse

from streamcrawl_cli import api
from streamcrawl_cli.commands.pause import describe

NAME = "resume"
HELP = "resume the crawl, or one host"
DESCRIPTION = ("Lift the global pause (no HOST; hosts paused one by one stay paused) or one host's pause.\n\n"
               + api.EXIT_CODES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("host", nargs="?", default=None, help="a host (default: the global pause)")
    api.add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    def work(client: api.Client) -> int:
        out = client.call("POST", "/resume", {"host": args.host})
        api.dump(out) if args.json else print(describe(out))
        return api.OK

    return api.run_call(args, work)
