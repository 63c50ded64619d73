"""Small helpers shared by the service entrypoints: logging, metrics endpoint, engine adapters."""

from __future__ import annotations

import logging

from prometheus_client import start_http_server

from streamcrawl_runtime.blobstore import S3BlobStore
from streamcrawl_runtime.connect import crawl_cql_session, minio_client
from streamcrawl_runtime.crawl_state import CassandraCrawlState
from streamcrawl_runtime.logs import setup_logging
from streamcrawl_runtime.settings import StackSettings

log = logging.getLogger("streamcrawl.service")


def start_service(name: str, settings: StackSettings, log_level: str = "INFO", metrics_port: int = 0) -> None:
    setup_logging(name, log_level)
    if metrics_port:
        start_http_server(metrics_port, addr="127.0.0.1")
    log.info("starting", extra={"kafka": settings.kafka_bootstrap, "cassandra": settings.cassandra_hosts})


def crawl_state(settings: StackSettings) -> CassandraCrawlState:
    return CassandraCrawlState(crawl_cql_session(settings))


def blob_store(settings: StackSettings) -> S3BlobStore:
    return S3BlobStore(minio_client(settings), settings.s3_bucket)
