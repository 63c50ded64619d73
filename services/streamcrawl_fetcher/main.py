"""The fetcher: for each leased fetch request, DNS, robots.txt (RFC 9309), the soft-404 probe and a
conditional GET, within the lease and its not_before; bodies to the blob store; one fetch result out."""

from __future__ import annotations

import time

from streamcrawl_contracts.messages import FetchRequest
from streamcrawl_contracts.topics import FETCH_REQUESTS
from streamcrawl_core.politeness import required_delay
from streamcrawl_core.robots import RobotsConfig
from streamcrawl_runtime.connect import blob_store, cassandra_check, crawl_state, s3_check
from streamcrawl_runtime.ports.blobs import BlobStore
from streamcrawl_runtime.ports.state import FetcherState
from streamcrawl_runtime.service import Wiring, run_service

from streamcrawl_fetcher.dns import Resolver, parse_networks
from streamcrawl_fetcher.fetch import HttpFetcher, make_client
from streamcrawl_fetcher.handler import FetcherHandler, FetchPolicy
from streamcrawl_fetcher.robots_cache import RobotsCache, RobotsHops
from streamcrawl_fetcher.settings import FetcherSettings


def build_handler(settings: FetcherSettings, state: FetcherState, blobs: BlobStore) -> FetcherHandler:
    """Wire the handler from settings and the given state and blob store (tests pass in-memory ones)."""
    async def record_dns(host: str, ip: str | None, error: str | None, ttl_s: float) -> None:
        await state.host_put_dns(host, ip, error, time.time() + ttl_s)

    resolver = Resolver(settings.dns_server, settings.dns_port, settings.dns_timeout_s,
                        parse_networks(settings.allowed_networks), negative_ttl_s=settings.dns_negative_ttl_s,
                        on_answer=record_dns)
    client = make_client(settings.max_connections, settings.verify_tls)
    http = HttpFetcher(client, resolver, settings.user_agent, settings.connect_timeout_s, settings.read_timeout_s,
                       settings.total_timeout_s)
    politeness = settings.politeness.config()
    robots_cfg = RobotsConfig(max_age_s=settings.robots_max_age_s, crawl_delay_cap_s=politeness.crawl_delay_cap_s,
                              unreachable_retry_s=settings.robots_unreachable_retry_s)
    policy = FetchPolicy(max_body_bytes=settings.max_body_bytes, robots_max_bytes=robots_cfg.max_bytes,
                         robots_max_redirects=robots_cfg.max_redirects,
                         inline_body_max_bytes=settings.inline_body_max_bytes, warc=settings.warc,
                         sitemaps=settings.sitemaps, soft404_probe=settings.soft404_probe)

    async def fetch_robots(url: str, hops: RobotsHops) -> tuple[int | None, bytes | None]:
        # Redirect hops of robots.txt are spaced by the same politeness rule as any two requests.
        return await http.fetch_robots(url, policy.robots_max_bytes, policy.robots_max_redirects,
                                       lambda hop_s: required_delay(hop_s, None, politeness), hops)

    robots = RobotsCache(state, fetch_robots, robots_cfg, settings.robots_cache_entries)
    return FetcherHandler(http, robots, state, blobs, policy)


def build(settings: FetcherSettings) -> Wiring:
    state = crawl_state(settings.stack)
    blobs = blob_store(settings.stack)
    handler = build_handler(settings, state, blobs)

    async def close() -> None:
        await handler.http.aclose()
        await blobs.aclose()

    # mark_fresh: the handler skips its lease read for requests produced after it took their partition.
    return Wiring(handler, {FETCH_REQUESTS.name: FetchRequest},
                  loop={"max_in_flight": settings.max_in_flight, "resume_below": settings.max_in_flight // 2,
                        "mark_fresh": True},
                  checks={"cassandra": cassandra_check(state.s), "s3": s3_check(blobs.client, blobs.bucket)},
                  close=close)


def main() -> None:
    raise SystemExit(run_service("fetcher", __doc__ or "", FetcherSettings, build))


if __name__ == "__main__":
    main()
