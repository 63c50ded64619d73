"""The one bootstrap of every run-loop service: settings → logging → metrics and health → the topic
check → adapters → handler → the shared Kafka run loop, until SIGTERM.

The topic check: every registry topic must exist with the deployment's partition count
(STREAMCRAWL_PARTITIONS); otherwise the service exits with code 2 and one line saying why
(streamcrawl_runtime.kafka_topics), before it joins a consumer group.

A service's ``main.py`` is its settings class, a ``build`` function that wires adapters into its handler
and returns a `Wiring`, and one call of `run_service`. ``--help`` prints what the service does and every
environment variable it reads.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from streamcrawl_contracts.messages import Envelope

from streamcrawl_runtime.health import Check, HealthServer, Readiness
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.kafka_topics import TopicMismatch, check_topics
from streamcrawl_runtime.logs import setup_logging
from streamcrawl_runtime.ports.loop import Handler
from streamcrawl_runtime.settings import ServiceSettings, help_epilog

log = logging.getLogger("streamcrawl.service")

S = TypeVar("S", bound=ServiceSettings)

#: The exit code of a service that found the topics missing or with another partition count.
EXIT_TOPICS = 2


@dataclass
class Wiring:
    """What a service's ``build`` returns: its handler, the topics it reads (name → payload model), run-loop
    options (LoopConfig fields), engine probes for /readyz beside Kafka's, a hook that sees the built loop
    (e.g. dedup's snapshot progress) and cleanup to run after the loop has drained."""

    handler: Handler
    subscriptions: dict[str, type[Envelope]]
    loop: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Check] = field(default_factory=dict)
    on_loop: Callable[[RunLoop], None] | None = None
    close: Callable[[], Awaitable[None]] | None = None


Build = Callable[[S], "Wiring | Awaitable[Wiring]"]


def parse_args(service: str, description: str, settings_cls: type[ServiceSettings],
               argv: Sequence[str] | None) -> argparse.Namespace:
    """``--help`` lists the service's environment variables; there are no other options: a service is
    configured through its environment only (12-factor), the same way on a laptop and in a pod."""
    parser = argparse.ArgumentParser(prog=f"streamcrawl-{service}", description=description,
                                     epilog=help_epilog(settings_cls),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    return parser.parse_args(argv)


def run_service(service: str, description: str, settings_cls: type[S], build: Build[S],
                argv: Sequence[str] | None = None) -> int:
    """Run ``service`` until SIGTERM/SIGINT; returns the process exit code."""
    parse_args(service, description, settings_cls, sys.argv[1:] if argv is None else argv)
    settings = settings_cls()
    setup_logging(service, settings.log_level)
    # A crash inside a C extension (the Kafka or Cassandra driver) prints every thread's Python stack to
    # stderr (the service's log) before the process dies, instead of a bare exit code.
    faulthandler.enable()
    readiness = Readiness()
    server: HealthServer | None = None
    if settings.metrics_port:
        try:
            server = HealthServer(readiness, settings.metrics_bind, settings.metrics_port).start()
        except OSError as exc:  # the port is taken on this machine: run without the endpoints
            log.warning("metrics endpoint unavailable", extra={"port": settings.metrics_port, "error": str(exc)})
    log.info("starting", extra={"kafka": settings.stack.kafka_bootstrap, "cassandra": settings.stack.cassandra_hosts,
                                "metrics": f"{settings.metrics_bind}:{settings.metrics_port}" if server else None})
    try:
        check_topics(settings.stack.kafka_bootstrap, settings.stack.partitions)
    except TopicMismatch as exc:
        log.error("topics do not match this deployment", extra={"error": str(exc)})
        print(f"streamcrawl-{service}: {exc}", file=sys.stderr)
        if server is not None:
            server.close()
        return EXIT_TOPICS
    try:
        asyncio.run(_serve(service, settings, build, readiness))
    finally:
        if server is not None:
            server.close()
    return 0


async def _serve(service: str, settings: S, build: Build[S], readiness: Readiness) -> None:
    built = build(settings)
    wiring: Wiring = await built if inspect.isawaitable(built) else built  # type: ignore[assignment]
    options: dict[str, Any] = {"settle_heap": True, **wiring.loop}
    config = LoopConfig(service=service, group_id=settings.group_id, bootstrap=settings.stack.kafka_bootstrap,
                        subscriptions=wiring.subscriptions, group_protocol=settings.stack.kafka_group_protocol,
                        linger_ms=settings.stack.kafka_linger_ms, **options)
    loop = RunLoop(config, wiring.handler, readiness=readiness)
    readiness.checks = {"kafka": loop.kafka_check, **wiring.checks}
    readiness.engines = {name: "not probed yet" for name in readiness.checks}
    if wiring.on_loop is not None:
        wiring.on_loop(loop)
    watcher = asyncio.create_task(readiness.watch())
    try:
        await loop.run()
    finally:
        watcher.cancel()
        if wiring.close is not None:
            await wiring.close()
