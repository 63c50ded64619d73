"""Recrawl scheduler entrypoint: settings → Cassandra state → handler → the shared run loop."""

from __future__ import annotations

from streamcrawl_contracts.messages import FetchResult
from streamcrawl_contracts.topics import FETCH_RESULTS
from streamcrawl_core.recrawl import RecrawlConfig
from streamcrawl_runtime.kafka_loop import LoopConfig, run_loop
from streamcrawl_runtime.service import crawl_state, start_service

from streamcrawl_recrawl.handler import RecrawlHandler
from streamcrawl_recrawl.settings import RecrawlSettings


def main() -> None:
    settings = RecrawlSettings()
    start_service("recrawl", settings, settings.log_level, settings.metrics_port)
    config = RecrawlConfig(min_interval_s=settings.min_interval_s, max_interval_s=settings.max_interval_s,
                           initial_interval_s=settings.initial_interval_s, grow_factor=settings.grow_factor)
    handler = RecrawlHandler(crawl_state(settings), config, scan_interval_s=settings.scan_interval_s,
                             scan_lookback_s=settings.scan_lookback_s, refresh_per_scan=settings.refresh_per_scan)
    loop = LoopConfig(service="recrawl", group_id=settings.group_id, bootstrap=settings.kafka_bootstrap,
                      subscriptions={FETCH_RESULTS.name: FetchResult}, max_in_flight=500, tick_interval_s=1.0,
                      settle_heap=True)
    run_loop(loop, handler)


if __name__ == "__main__":
    main()
