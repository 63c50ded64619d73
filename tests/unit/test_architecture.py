"""The dependency rules of the code base, checked on every run (they fail on a violation):

- every core module (streamcrawl_core) is pure: importing it loads no I/O, network or driver module;
- ports (streamcrawl_runtime.ports) and the in-memory adapters are driver-free too;
- handlers import no driver, directly or through the project's own modules;
- services do not import each other;
- drivers are imported only by adapters and entrypoints (an allow-list per driver, below).

Imports are read two ways: statically (every `import` in a module's source, function bodies included)
and by importing a module in a fresh interpreter and listing what ended up in sys.modules.
"""

from __future__ import annotations

import ast
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
import streamcrawl_core

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ("frontier", "fetcher", "parser", "dedup", "recrawl", "warc", "control")

#: Third-party modules that talk to an engine or the network, or run a server.
DRIVERS = ("confluent_kafka", "acsylla", "cassandra", "minio", "httpx", "httpcore", "aiohttp", "dns", "uvicorn",
           "urllib3", "requests")
#: Standard-library I/O a pure module must not pull in either.
STDLIB_IO = ("socket", "ssl", "asyncio", "http", "urllib.request", "subprocess", "selectors")

#: Where each driver may be imported (module path prefixes, relative to the repository root).
ALLOWED = {
    "confluent_kafka": ["libs/streamcrawl_runtime/kafka_loop.py", "libs/streamcrawl_runtime/kafka_output.py",
                        "libs/streamcrawl_runtime/kafka_rebalance.py", "libs/streamcrawl_runtime/kafka_producer.py",
                        "libs/streamcrawl_runtime/kafka_stuck.py",
                        "libs/streamcrawl_runtime/kafka_replay.py", "libs/streamcrawl_runtime/provisioning.py",
                        "libs/streamcrawl_runtime/kafka_offsets.py", "libs/streamcrawl_runtime/kafka_topics.py",
                        "services/streamcrawl_control/kafka_adapters.py", "tools/"],
    "acsylla": ["libs/streamcrawl_runtime/acsylla_session.py"],
    "cassandra": [],
    "minio": ["libs/streamcrawl_runtime/s3_blobs.py", "libs/streamcrawl_runtime/s3_sigv4.py",
              "libs/streamcrawl_runtime/connect.py", "libs/streamcrawl_runtime/provisioning.py", "tools/"],
    "httpx": ["services/streamcrawl_fetcher/fetch.py", "services/streamcrawl_fetcher/transport.py",
              "libs/streamcrawl_runtime/metrics_scrape.py", "libs/streamcrawl_cli/api.py", "tools/"],
    "httpcore": ["services/streamcrawl_fetcher/fetch.py", "services/streamcrawl_fetcher/transport.py"],
    "aiohttp": ["services/streamcrawl_fetcher/fetch.py", "services/streamcrawl_fetcher/transport.py",
                "libs/streamcrawl_runtime/s3_async.py", "tools/"],
    "dns": ["services/streamcrawl_fetcher/dns.py", "tools/"],
    "uvicorn": ["services/streamcrawl_control/main.py", "tools/"],
    "urllib3": [],
    "requests": [],
}

HANDLERS = [f"streamcrawl_{s}.handler" for s in ("frontier", "fetcher", "parser", "dedup", "recrawl")]


def _py_files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module a file imports, by absolute name (relative imports are resolved to the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _loaded_after_import(module: str) -> set[str]:
    code = (f"import sys, json; import {module}; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    return set(json.loads(out.stdout))


def _hits(loaded: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if n in loaded or any(m.startswith(n + ".") for m in loaded))


CORE_MODULES = sorted(f"streamcrawl_core.{m.name}" for m in pkgutil.iter_modules(streamcrawl_core.__path__)
                      if not m.name.startswith("_"))


def test_every_core_module_is_found() -> None:
    assert len(CORE_MODULES) >= 10
    assert {"streamcrawl_core.frontier", "streamcrawl_core.lease", "streamcrawl_core.blocklist",
            "streamcrawl_core.identity", "streamcrawl_core.urls"} <= set(CORE_MODULES)


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_is_pure(module: str) -> None:
    assert _hits(_loaded_after_import(module), DRIVERS + STDLIB_IO) == []


#: What a core module's own source must not import: I/O, clocks and sleeping belong to the services.
CORE_FORBIDDEN = {"socket", "ssl", "http", "urllib3", "requests", "httpx", "aiohttp", "asyncio", "time", "threading",
                  "subprocess", "os", "io", "selectors", *DRIVERS}


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_module_source_imports_no_io_or_clock(module: str) -> None:
    path = ROOT / "libs" / Path(*module.split(".")).with_suffix(".py")
    if not path.exists():  # a package
        path = ROOT / "libs" / Path(*module.split(".")) / "__init__.py"
    assert {m.split(".")[0] for m in _imports(path)} & CORE_FORBIDDEN == set()


@pytest.mark.parametrize("module", ["streamcrawl_runtime.ports", "streamcrawl_runtime.memory",
                                    "streamcrawl_contracts.messages", "streamcrawl_contracts.topics"])
def test_ports_and_memory_adapters_are_driver_free(module: str) -> None:
    assert _hits(_loaded_after_import(module), DRIVERS) == []


@pytest.mark.parametrize("module", HANDLERS)
def test_handlers_import_no_driver(module: str) -> None:
    assert _hits(_loaded_after_import(module), DRIVERS) == []


def test_services_do_not_import_each_other() -> None:
    for service in SERVICES:
        own = f"streamcrawl_{service}"
        others = {f"streamcrawl_{s}" for s in SERVICES if s != service}
        for path in _py_files(f"services/{own}"):
            bad = {m for m in _imports(path) if m.split(".")[0] in others}
            assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_product_code_does_not_import_tools() -> None:
    for folder in ("libs", "services"):
        for path in _py_files(folder):
            bad = {m for m in _imports(path) if m.split(".")[0] in ("streamcrawl_synthweb", "streamcrawl_launcher")}
            assert not bad, f"{path.relative_to(ROOT)} imports the dev tools {sorted(bad)}"


def test_drivers_are_imported_only_by_adapters_and_entrypoints() -> None:
    problems: list[str] = []
    for folder in ("libs", "services", "tools"):
        for path in _py_files(folder):
            rel = path.relative_to(ROOT).as_posix()
            for module in _imports(path):
                top = module.split(".")[0]
                if top in ALLOWED and not any(rel.startswith(p) for p in ALLOWED[top]):
                    problems.append(f"{rel} imports {module}")
    assert problems == []


def test_the_dependency_check_can_fail() -> None:
    """The checks above see a driver when one is loaded (so a pass means something)."""
    assert _hits(_loaded_after_import("streamcrawl_runtime.kafka_loop"), DRIVERS) == ["confluent_kafka"]
    assert "socket" in _hits(_loaded_after_import("streamcrawl_runtime.s3_blobs"), DRIVERS + STDLIB_IO)
