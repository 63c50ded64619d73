"""Frontier settings, built once in main()."""

from __future__ import annotations

from streamcrawl_runtime.settings import StackSettings


class FrontierSettings(StackSettings):
    group_id: str = "streamcrawl-frontier"
    lease_s: float = 120.0           # how long a fetcher has to start the request
    max_request_s: float = 130.0     # the longest a started request can run (fetcher total_timeout_s + connect)
    min_delay_s: float = 1.0
    delay_factor: float = 10.0
    crawl_delay_cap_s: float = 30.0
    discovery_share: float = 0.3
    dispatch_per_tick: int = 500
    max_leases: int = 1000           # outstanding fetch requests per frontier instance
    politeness_margin_s: float = 0.01  # added to the fetcher's end-of-response time (see handler)
    lookahead_s: float = 0.3         # dispatch this early; the fetcher waits for not_before (< its 5 s cap)
    metrics_port: int = 0            # 0 = no metrics HTTP server
    log_level: str = "INFO"
