"""The recrawl scheduler: from each fetch outcome it files the URL's next visit (an adaptive interval),
and re-emits due URLs of its partitions to the frontier as refreshes."""

from __future__ import annotations

from streamcrawl_contracts.messages import FetchResult
from streamcrawl_contracts.topics import FETCH_RESULTS
from streamcrawl_core.recrawl import RecrawlConfig
from streamcrawl_runtime.connect import cassandra_check, crawl_state
from streamcrawl_runtime.service import Wiring, run_service

from streamcrawl_recrawl.handler import RecrawlHandler
from streamcrawl_recrawl.settings import RecrawlSettings


def build(settings: RecrawlSettings) -> Wiring:
    config = RecrawlConfig(min_interval_s=settings.min_interval_s, max_interval_s=settings.max_interval_s,
                           initial_interval_s=settings.initial_interval_s, grow_factor=settings.grow_factor,
                           estimator=settings.estimator, min_observations=settings.min_observations,
                           use_lastmod=settings.use_lastmod,
                           max_lastmod_conflict_ratio=settings.max_lastmod_conflict_ratio)
    state = crawl_state(settings.stack)
    handler = RecrawlHandler(state, config, scan_interval_s=settings.scan_interval_s,
                             scan_lookback_s=settings.scan_lookback_s, refresh_per_scan=settings.refresh_per_scan,
                             host_page_budget=settings.host_page_budget, cycle_s=settings.cycle_s,
                             partitions=settings.stack.partitions)
    return Wiring(handler, {FETCH_RESULTS.name: FetchResult}, loop={"max_in_flight": 500, "tick_interval_s": 1.0},
                  checks={"cassandra": cassandra_check(state.s)})


def main() -> None:
    raise SystemExit(run_service("recrawl", __doc__ or "", RecrawlSettings, build))


if __name__ == "__main__":
    main()
