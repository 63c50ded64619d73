"""The frontier: owns the politeness state of the hosts of its partitions and leases one fetch at a time
per host (seeds, new URLs and fetch results in; leased fetch requests out)."""

from __future__ import annotations

from streamcrawl_contracts.messages import FetchResult, SeedMessage, UrlMessage
from streamcrawl_contracts.topics import FETCH_RESULTS, SEEDS, URLS
from streamcrawl_runtime.connect import cassandra_check, crawl_state
from streamcrawl_runtime.service import Wiring, run_service

from streamcrawl_frontier.handler import FrontierHandler
from streamcrawl_frontier.settings import FrontierSettings


def build(settings: FrontierSettings) -> Wiring:
    state = crawl_state(settings.stack)
    handler = FrontierHandler(state, settings.politeness.config(), lease_s=settings.lease_s,
                              lease_check_s=settings.lease_check_s,
                              max_request_s=settings.max_request_s, discovery_share=settings.discovery_share,
                              dispatch_per_tick=settings.dispatch_per_tick, max_leases=settings.max_leases,
                              lookahead_s=settings.lookahead_s, margin_s=settings.politeness_margin_s,
                              partitions=settings.stack.partitions, max_hosts=settings.max_hosts,
                              host_window=settings.host_window, load_per_tick=settings.load_per_tick,
                              index_sweep_s=settings.index_sweep_s, pages_per_tick=settings.index_pages_per_tick)
    return Wiring(handler, {SEEDS.name: SeedMessage, URLS.name: UrlMessage, FETCH_RESULTS.name: FetchResult},
                  loop={"max_in_flight": 1000, "resume_below": 500, "tick_interval_s": 0.05},
                  checks={"cassandra": cassandra_check(state.s)})


def main() -> None:
    raise SystemExit(run_service("frontier", __doc__ or "", FrontierSettings, build))


if __name__ == "__main__":
    main()
