"""Frontier settings (STREAMCRAWL_FRONTIER_*), built once in main(). The politeness rule itself is the
shared `PolitenessSettings` (STREAMCRAWL_MIN_DELAY_S, ...)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field
from streamcrawl_runtime.settings import ServiceSettings, service_config


class FrontierSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "frontier"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9101
    model_config = service_config(SERVICE)

    #: How long a fetcher has to start the request. It bounds how long a crashed frontier's hosts wait: a
    #: lease whose request never reached Kafka (written just before a kill -9) blocks its host until then.
    lease_s: float = 60.0
    #: The early check (streamcrawl_core.lease): this long after the grant (later while requests take
    #: long to start anyway), a lease whose request has not started is fenced and its URL put back, so a
    #: request stuck in an engine blocks its host ~20 s instead of the whole lease. 0: no early check.
    lease_check_s: float = Field(default=20.0, ge=0)
    max_request_s: float = 130.0     # the longest a started request can run (fetcher total_timeout_s + connect)
    discovery_share: float = 0.3
    dispatch_per_tick: int = 500
    max_leases: int = 1000           # outstanding fetch requests per frontier instance
    politeness_margin_s: float = 0.01  # added to the fetcher's end-of-response time (see handler)
    lookahead_s: float = 0.3         # dispatch this early; the fetcher waits for not_before (< its 5 s cap)
    #: Memory bounds (streamcrawl_frontier.shards): hosts held in memory per instance, and URLs of each
    #: host's queue held in memory; the rest waits in Cassandra. A few KB per host in memory with a full
    #: window (docs/benchmarks-scale.md): the defaults keep one instance well under 512 MB however large
    #: the crawl, and 50,000 hosts is far more than the fetchers can keep busy (pages/s × delay).
    max_hosts: int = Field(default=50_000, ge=1)
    host_window: int = Field(default=8, ge=1)
    #: Hosts loaded from the owned partitions' indexes per tick, while there is room.
    load_per_tick: int = Field(default=500, ge=1)
    #: Host-index pages read per tick (each owned partition's index is HOST_BUCKETS buckets, one read each
    #: at least), and how often each owned partition's index is read again to drop rows of hosts with
    #: nothing queued that a crash left behind.
    index_pages_per_tick: int = Field(default=64, ge=1)
    index_sweep_s: float = Field(default=300.0, gt=0)
