"""Entrypoint of the control plane: settings -> logging -> engine adapters -> app -> uvicorn."""

from __future__ import annotations

import logging

import uvicorn
from streamcrawl_runtime.connect import cassandra_session
from streamcrawl_runtime.logs import setup_logging

from streamcrawl_control.adapters import CassandraControlStore, KafkaSeedSink, KafkaStatsSource
from streamcrawl_control.app import create_app
from streamcrawl_control.settings import ControlSettings

log = logging.getLogger("streamcrawl.control")


def main() -> None:
    settings = ControlSettings()
    setup_logging("control", settings.log_level)
    session = cassandra_session(settings, keyspace=settings.cassandra_keyspace)
    sink = KafkaSeedSink(settings.kafka_bootstrap, flush_timeout_s=settings.seed_flush_timeout_s)
    try:
        app = create_app(
            sink,
            CassandraControlStore(session),
            KafkaStatsSource(settings.kafka_bootstrap, settings.group_prefix, settings.admin_timeout_s),
            max_seeds_per_request=settings.max_seeds_per_request,
        )
        log.info("listening", extra={"listen": f"{settings.listen_host}:{settings.listen_port}"})
        uvicorn.run(app, host=settings.listen_host, port=settings.listen_port, log_config=None,
                    access_log=False)
    finally:
        sink.close()
        session.cluster.shutdown()


if __name__ == "__main__":
    main()
