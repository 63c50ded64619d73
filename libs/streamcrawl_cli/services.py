"""The services' console scripts (`streamcrawl-frontier`, ...): `--help` shows what the service does and the
environment variables it reads; anything else starts the service's own `main()`.

Interim: the `run_service()` bootstrap (issue 9) is to own `--help`; once it does, the scripts in
pyproject.toml point straight at `streamcrawl_<name>.main:main` again and this module keeps only SERVICES.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from pydantic_settings import BaseSettings

#: Every service and what it does (the names are those of the chart, compose and `streamcrawl service`).
SERVICES: dict[str, str] = {
    "frontier": "Owns each host's politeness state and URL queues for its partitions: turns seeds and "
                "discovered URLs into leased fetch requests, at most one in flight per host.",
    "fetcher": "Runs leased fetch requests: DNS, robots.txt, the HTTP GET; stores bodies in S3 and publishes "
               "fetch results.",
    "parser": "Parses fetched pages: charset, links, canonical, robots meta, visible text and its SimHash.",
    "dedup": "Decides what is new: URL seen-set, exact and near duplicates, trap rules and host budgets; "
             "publishes page_fetched.",
    "recrawl": "Schedules refetches: the interval halves on change and doubles when unchanged.",
    "control": "The HTTP control plane: seeds, blocklist, host overrides, stats, /metrics, /healthz, /readyz.",
}
_SECRET_WORDS = ("secret", "token", "access_key", "password")


def _settings_classes(name: str) -> list[type[BaseSettings]]:
    module = importlib.import_module(f"streamcrawl_{name}.settings")
    return [c for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, BaseSettings) and c.__module__ == module.__name__]


def env_rows(cls: type[BaseSettings]) -> list[tuple[str, str]]:
    """(environment variable, default) of every field of a settings class, and of the settings it nests."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    rows: list[tuple[str, str]] = []
    for field, info in cls.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseSettings):
            rows.extend(env_rows(ann))
            continue
        env = f"{prefix}{field}".upper()
        if info.default_factory is not None:
            default = "(computed)"
        elif any(w in field.lower() for w in _SECRET_WORDS):
            default = "(set; not shown)" if info.default else "(empty)"
        else:
            default = repr(info.default)
        rows.append((env, default))
    return rows


def _epilog(name: str) -> str:
    rows = sorted({row for cls in _settings_classes(name) for row in env_rows(cls)})
    width = max(len(env) for env, _ in rows)
    lines = [f"  {env:<{width}}  default {default}" for env, default in rows]
    return "settings (environment variables):\n" + "\n".join(lines)


def parse_service_args(name: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The service's command line: only --help; settings come from the environment."""
    parser = argparse.ArgumentParser(prog=f"streamcrawl-{name}", description=SERVICES[name], epilog=_epilog(name),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser.parse_args(argv)


def _start(name: str) -> int:
    parse_service_args(name, sys.argv[1:])
    main = importlib.import_module(f"streamcrawl_{name}.main").main
    return int(main() or 0)


def frontier() -> int:
    return _start("frontier")


def fetcher() -> int:
    return _start("fetcher")


def parser() -> int:
    return _start("parser")


def dedup() -> int:
    return _start("dedup")


def recrawl() -> int:
    return _start("recrawl")


def control() -> int:
    return _start("control")
