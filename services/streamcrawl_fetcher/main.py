"""Entry point `streamcrawl-fetcher`: settings → adapters (Cassandra, S3, DNS, HTTP) → run loop."""

from __future__ import annotations

import asyncio
import logging

from prometheus_client import start_http_server
from streamcrawl_contracts.messages import FetchRequest
from streamcrawl_contracts.topics import FETCH_REQUESTS
from streamcrawl_core.politeness import PolitenessConfig, required_delay
from streamcrawl_core.robots import RobotsConfig
from streamcrawl_runtime.blobstore import S3BlobStore
from streamcrawl_runtime.connect import minio_client
from streamcrawl_runtime.crawl_state import CassandraCrawlState
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.logs import setup_logging
from streamcrawl_runtime.service import crawl_state

from streamcrawl_fetcher.dns import Resolver, parse_networks
from streamcrawl_fetcher.fetch import HttpFetcher, make_client
from streamcrawl_fetcher.handler import FetcherHandler, FetchPolicy
from streamcrawl_fetcher.robots_cache import RobotsCache
from streamcrawl_fetcher.settings import FetcherSettings

log = logging.getLogger("streamcrawl.fetcher")


def build_handler(settings: FetcherSettings, state: CassandraCrawlState | None = None,
                  blobs: S3BlobStore | None = None) -> FetcherHandler:
    """Wire the handler from settings (the integration test reuses this with its own adapters)."""
    if state is None:
        state = crawl_state(settings)
    if blobs is None:
        blobs = S3BlobStore(minio_client(settings), settings.s3_bucket)
    resolver = Resolver(settings.dns_server, settings.dns_port, settings.dns_timeout_s,
                        parse_networks(settings.allowed_networks), negative_ttl_s=settings.dns_negative_ttl_s)
    client = make_client(settings.max_connections, settings.verify_tls)
    http = HttpFetcher(client, resolver, settings.user_agent, settings.connect_timeout_s, settings.read_timeout_s,
                       settings.total_timeout_s)
    robots_cfg = RobotsConfig(max_age_s=settings.robots_max_age_s,
                              crawl_delay_cap_s=settings.robots_crawl_delay_cap_s,
                              unreachable_retry_s=settings.robots_unreachable_retry_s)
    policy = FetchPolicy(max_body_bytes=settings.max_body_bytes, robots_max_bytes=robots_cfg.max_bytes,
                         robots_max_redirects=robots_cfg.max_redirects,
                         inline_body_max_bytes=settings.inline_body_max_bytes)

    politeness = PolitenessConfig(min_delay_s=settings.min_delay_s, delay_factor=settings.delay_factor)

    async def fetch_robots(url: str) -> tuple[int | None, bytes | None]:
        # Redirect hops of robots.txt are spaced by the same politeness rule as any two requests.
        return await http.fetch_robots(url, policy.robots_max_bytes, policy.robots_max_redirects,
                                       lambda hop_s: required_delay(hop_s, None, politeness))

    robots = RobotsCache(state, fetch_robots, robots_cfg, settings.robots_cache_entries)
    return FetcherHandler(http, robots, state, blobs, policy)


def loop_config(settings: FetcherSettings) -> LoopConfig:
    return LoopConfig(service="fetcher", group_id=settings.fetcher_group_id,
                      subscriptions={FETCH_REQUESTS.name: FetchRequest}, bootstrap=settings.kafka_bootstrap,
                      max_in_flight=settings.fetcher_max_in_flight,
                      resume_below=settings.fetcher_max_in_flight // 2,
                      mark_fresh=True, settle_heap=True)  # the handler skips its lease read for fresh requests


async def _run(settings: FetcherSettings) -> None:
    handler = build_handler(settings)
    try:
        await RunLoop(loop_config(settings), handler).run()
    finally:
        await handler.http.client.aclose()


def main() -> None:
    settings = FetcherSettings()
    setup_logging("fetcher", settings.log_level)
    if settings.fetcher_metrics_port:
        try:
            start_http_server(settings.fetcher_metrics_port, addr="127.0.0.1")
        except OSError as exc:  # another service on this machine holds the port: run without metrics
            log.warning("metrics endpoint unavailable",
                        extra={"port": settings.fetcher_metrics_port, "error": str(exc)})
    log.info("starting", extra={"dns": f"{settings.dns_server}:{settings.dns_port}",
                                "allowed_networks": settings.allowed_networks or "any"})
    asyncio.run(_run(settings))


if __name__ == "__main__":
    main()
