"""`streamcrawl version`: the installed distribution's version."""

from __future__ import annotations

import argparse
from importlib import metadata

NAME = "version"
HELP = "print the installed streamcrawl version"
DESCRIPTION = "Print the version of the installed streamcrawl distribution."


def version_string() -> str:
    try:
        return f"streamcrawl {metadata.version('streamcrawl')}"
    except metadata.PackageNotFoundError:
        return "streamcrawl (not installed: running from a source tree)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options


def run(args: argparse.Namespace) -> int:
    del args
    print(version_string())
    return 0
