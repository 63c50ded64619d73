"""The control plane: an HTTP API over seeds, the blocklist, per-host overrides, host state and crawl
statistics (settings -> logging -> adapters -> app -> uvicorn)."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn
from streamcrawl_runtime.connect import crawl_cql_session
from streamcrawl_runtime.logs import setup_logging
from streamcrawl_runtime.memory import InMemoryControlStore, InMemorySeedSink, InMemoryStats
from streamcrawl_runtime.settings import help_epilog

from streamcrawl_control.app import create_app
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
    if settings.backend == "memory":
        app = create_app(InMemorySeedSink(), InMemoryControlStore(), InMemoryStats(),
                         max_seeds_per_request=settings.max_seeds_per_request)
        log.warning("in-memory backend: nothing is stored or crawled")
        uvicorn.run(app, host=settings.listen_host, port=settings.listen_port, log_config=None, access_log=False)
        return
    session = crawl_cql_session(settings.stack)
    sink = KafkaSeedSink(settings.stack.kafka_bootstrap, flush_timeout_s=settings.seed_flush_timeout_s)
    try:
        app = create_app(
            sink,
            CassandraControlStore(session),
            KafkaStatsSource(settings.stack.kafka_bootstrap, settings.group_prefix, settings.admin_timeout_s),
            max_seeds_per_request=settings.max_seeds_per_request,
        )
        log.info("listening", extra={"listen": f"{settings.listen_host}:{settings.listen_port}"})
        uvicorn.run(app, host=settings.listen_host, port=settings.listen_port, log_config=None,
                    access_log=False)
    finally:
        sink.close()


if __name__ == "__main__":
    main()
