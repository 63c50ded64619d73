"""`streamcrawl [--version] COMMAND ...`: builds the parser from the command modules and runs one.

Exit codes: see `streamcrawl_cli.api.EXIT_CODES` (0 success, 1 failure, 2 usage error, ...).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from streamcrawl_cli import commands
from streamcrawl_cli.api import EXIT_CODES
from streamcrawl_cli.commands.version import version_string


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streamcrawl",
        description="streamcrawl: a distributed, polite web crawler on Kafka, Cassandra and S3.",
        epilog="Run `streamcrawl COMMAND --help` for a command's options.\n\n" + EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_string())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in commands.discover():
        p = sub.add_parser(command.NAME, help=command.HELP, description=command.DESCRIPTION)
        command.add_arguments(p)
        p.set_defaults(_run=command.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args._run(args))
