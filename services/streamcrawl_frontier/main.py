"""Frontier entrypoint: settings → Cassandra state → handler → the shared run loop."""

from __future__ import annotations

from streamcrawl_contracts.messages import FetchResult, SeedMessage, UrlMessage
from streamcrawl_contracts.topics import FETCH_RESULTS, SEEDS, URLS
from streamcrawl_core.politeness import PolitenessConfig
from streamcrawl_runtime.kafka_loop import LoopConfig, run_loop
from streamcrawl_runtime.service import crawl_state, start_service

from streamcrawl_frontier.handler import FrontierHandler
from streamcrawl_frontier.settings import FrontierSettings


def main() -> None:
    settings = FrontierSettings()
    start_service("frontier", settings, settings.log_level, settings.metrics_port)
    politeness = PolitenessConfig(min_delay_s=settings.min_delay_s, delay_factor=settings.delay_factor,
                                  crawl_delay_cap_s=settings.crawl_delay_cap_s)
    handler = FrontierHandler(crawl_state(settings), politeness, lease_s=settings.lease_s,
                              max_request_s=settings.max_request_s,
                              discovery_share=settings.discovery_share,
                              dispatch_per_tick=settings.dispatch_per_tick, max_leases=settings.max_leases,
                              lookahead_s=settings.lookahead_s, margin_s=settings.politeness_margin_s)
    config = LoopConfig(service="frontier", group_id=settings.group_id, bootstrap=settings.kafka_bootstrap,
                        subscriptions={SEEDS.name: SeedMessage, URLS.name: UrlMessage,
                                       FETCH_RESULTS.name: FetchResult},
                        max_in_flight=1000, resume_below=500, tick_interval_s=0.05,
                        settle_heap=True)
    run_loop(config, handler)


if __name__ == "__main__":
    main()
