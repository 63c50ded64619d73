"""The subcommands of `streamcrawl`, one module each.

A command module defines ``NAME``, ``HELP`` (one line for the command list), ``DESCRIPTION`` (its own
--help), ``add_arguments(parser)`` and ``run(args) -> int`` (the exit code). Adding a module here is
all it takes: `discover()` finds it. Another installed package may add a command module through the entry
point group ``streamcrawl.commands`` (the dev tools add `run`, the local crawl of `make run`).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
from importlib import metadata
from typing import Protocol, cast


class Command(Protocol):
    NAME: str
    HELP: str
    DESCRIPTION: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def discover() -> list[Command]:
    """Every command module in this package, sorted by command name."""
    found: list[Command] = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for attr in ("NAME", "HELP", "DESCRIPTION", "add_arguments", "run"):
            if not hasattr(module, attr):
                raise TypeError(f"{module.__name__} is not a command module: it has no {attr}")
        found.append(cast(Command, module))
    for entry in metadata.entry_points(group="streamcrawl.commands"):
        module = entry.load()
        if any(not hasattr(module, a) for a in ("NAME", "HELP", "DESCRIPTION", "add_arguments", "run")):
            raise TypeError(f"entry point {entry.name} ({entry.value}) is not a command module")
        if all(c.NAME != module.NAME for c in found):
            found.append(cast(Command, module))
    return sorted(found, key=lambda c: c.NAME)
