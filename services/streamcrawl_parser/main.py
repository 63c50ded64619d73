"""Entry point `streamcrawl-parser`: settings → S3 blob store → run loop over FETCH_RESULTS."""

from __future__ import annotations

import logging

from prometheus_client import start_http_server
from streamcrawl_contracts.messages import FetchResult
from streamcrawl_contracts.topics import FETCH_RESULTS
from streamcrawl_runtime.blobstore import S3BlobStore
from streamcrawl_runtime.connect import minio_client
from streamcrawl_runtime.kafka_loop import LoopConfig, run_loop
from streamcrawl_runtime.logs import setup_logging

from streamcrawl_parser.handler import ParserHandler
from streamcrawl_parser.settings import ParserSettings

log = logging.getLogger("streamcrawl.parser")


def build_handler(settings: ParserSettings) -> ParserHandler:
    blobs = S3BlobStore(minio_client(settings), settings.s3_bucket)
    return ParserHandler(blobs, settings.max_links_per_page, settings.simhash_max_chars)


def loop_config(settings: ParserSettings) -> LoopConfig:
    return LoopConfig(service="parser", group_id=settings.parser_group_id,
                      subscriptions={FETCH_RESULTS.name: FetchResult}, bootstrap=settings.kafka_bootstrap,
                      max_in_flight=settings.parser_max_in_flight,
                      resume_below=max(1, settings.parser_max_in_flight // 2), settle_heap=True)


def main() -> None:
    settings = ParserSettings()
    setup_logging("parser", settings.log_level)
    if settings.parser_metrics_port:
        try:
            start_http_server(settings.parser_metrics_port, addr="127.0.0.1")
        except OSError as exc:  # the port is taken on this machine: run without metrics
            log.warning("metrics endpoint unavailable",
                        extra={"port": settings.parser_metrics_port, "error": str(exc)})
    log.info("starting", extra={"max_links": settings.max_links_per_page})
    run_loop(loop_config(settings), build_handler(settings))


if __name__ == "__main__":
    main()
