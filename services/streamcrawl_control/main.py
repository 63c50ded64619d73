"""The control plane: the /v1 HTTP API over seeds, the blocklist, per-host overrides, pause and resume,
host state and crawl statistics, and the dashboard (settings -> logging -> adapters -> app -> uvicorn)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import uvicorn
from streamcrawl_runtime.connect import crawl_cql_session
from streamcrawl_runtime.logs import setup_logging
from streamcrawl_runtime.memory import InMemoryControlStore, InMemoryMetrics, InMemorySeedSink, InMemoryStats
from streamcrawl_runtime.metrics_scrape import Scraper
from streamcrawl_runtime.settings import help_epilog

from streamcrawl_control.app import create_app
from streamcrawl_control.auth import TokenError, load_token
from streamcrawl_control.cassandra_store import CassandraControlStore
from streamcrawl_control.kafka_adapters import KafkaSeedSink, KafkaStatsSource
from streamcrawl_control.settings import ControlSettings

log = logging.getLogger("streamcrawl.control")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    argparse.ArgumentParser(prog="streamcrawl-control", description=__doc__, epilog=help_epilog(ControlSettings),
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    settings = ControlSettings()
    setup_logging("control", settings.log_level)
    try:
        token = load_token(settings.api_token.get_secret_value() if settings.api_token else None,
                           settings.api_token_file)
    except TokenError as exc:
        log.error("no usable API token", extra={"error": str(exc)})
        raise SystemExit(f"streamcrawl-control: {exc}") from exc
    if token is None:
        log.warning("no API token configured: every mutating call will be refused (401)")
    options: dict[str, Any] = {"token": token, "open_reads": settings.open_reads,
                               "sample_every_s": settings.sample_every_s,
                               "max_seeds_per_request": settings.max_seeds_per_request,
                               "partitions": settings.stack.partitions}
    if settings.backend == "memory":
        app = create_app(InMemorySeedSink(), InMemoryControlStore(), InMemoryStats(), InMemoryMetrics(), **options)
        log.warning("in-memory backend: nothing is stored or crawled")
        uvicorn.run(app, host=settings.listen_host, port=settings.listen_port, log_config=None, access_log=False)
        return
    session = crawl_cql_session(settings.stack)
    sink = KafkaSeedSink(settings.stack.kafka_bootstrap, flush_timeout_s=settings.seed_flush_timeout_s)
    scraper = Scraper([t.strip() for t in settings.metrics_targets.split(",") if t.strip()])
    try:
        app = create_app(
            sink, CassandraControlStore(session, settings.stack.partitions),
            KafkaStatsSource(settings.stack.kafka_bootstrap, settings.group_prefix, settings.admin_timeout_s),
            scraper, **options)
        log.info("listening", extra={"listen": f"{settings.listen_host}:{settings.listen_port}",
                                     "open_reads": settings.open_reads})
        uvicorn.run(app, host=settings.listen_host, port=settings.listen_port, log_config=None,
                    access_log=False)
    finally:
        sink.close()
        scraper.close()


if __name__ == "__main__":
    main()
