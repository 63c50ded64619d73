"""Frontier settings (STREAMCRAWL_FRONTIER_*), built once in main(). The politeness rule itself is the
shared `PolitenessSettings` (STREAMCRAWL_MIN_DELAY_S, ...)."""

from __future__ import annotations

from typing import ClassVar

from streamcrawl_runtime.settings import ServiceSettings, service_config


class FrontierSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "frontier"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9101
    model_config = service_config(SERVICE)

    lease_s: float = 120.0           # how long a fetcher has to start the request
    max_request_s: float = 130.0     # the longest a started request can run (fetcher total_timeout_s + connect)
    discovery_share: float = 0.3
    dispatch_per_tick: int = 500
    max_leases: int = 1000           # outstanding fetch requests per frontier instance
    politeness_margin_s: float = 0.01  # added to the fetcher's end-of-response time (see handler)
    lookahead_s: float = 0.3         # dispatch this early; the fetcher waits for not_before (< its 5 s cap)
