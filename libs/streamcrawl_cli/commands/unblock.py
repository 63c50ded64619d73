"""`streamcrawl unblock PATTERN...`: remove blocklist patterns (DELETE /v1/blocklist/{pattern})."""

from __future__ import annotations

import argparse
from urllib.parse import quote

from streamcrawl_cli import api

NAME = "unblock"
HELP = "remove hosts or patterns from the blocklist"
DESCRIPTION = "Remove blocklist patterns (exactly as they were added).\n\n" + api.EXIT_CODES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("patterns", nargs="+", metavar="HOST", help="hosts or patterns")
    api.add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    def work(client: api.Client) -> int:
        missing = 0
        for pattern in args.patterns:
            try:
                client.call("DELETE", f"/blocklist/{quote(pattern, safe='')}")
                print(f"unblocked {pattern}")
            except api.ApiError as exc:
                if exc.code != api.NOT_FOUND:
                    raise
                missing += 1
                print(f"not in the blocklist: {pattern}")
        return api.NOT_FOUND if missing else api.OK

    return api.run_call(args, work)
