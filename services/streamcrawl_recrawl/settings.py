"""Recrawl scheduler settings (STREAMCRAWL_RECRAWL_*), built once in main()."""

from __future__ import annotations

from typing import ClassVar, Literal

from streamcrawl_runtime.settings import ServiceSettings, service_config


class RecrawlSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "recrawl"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9105
    model_config = service_config(SERVICE)

    # Scale these down (to seconds) to watch recrawl cycles on a small crawl: the recrawl e2e test runs with
    # STREAMCRAWL_RECRAWL_INITIAL_INTERVAL_S=4, _MIN_INTERVAL_S=2, _MAX_INTERVAL_S=24, _SCAN_INTERVAL_S=1.
    min_interval_s: float = 3600.0
    max_interval_s: float = 30 * 86400.0
    initial_interval_s: float = 86400.0
    grow_factor: float = 2.0
    #: change_rate: Cho & Garcia-Molina's estimator once min_observations visits are compared (doubling before).
    estimator: Literal["change_rate", "doubling"] = "change_rate"
    min_observations: int = 3
    #: change_rate: with known modification times (the response's Last-Modified, else the newest sitemap
    #: <lastmod>) Cho & Garcia-Molina's last-change-date estimator, once min_observations dated visits agree
    #: with the body comparison and at most max_lastmod_conflict_ratio of them disagree.
    use_lastmod: bool = True
    max_lastmod_conflict_ratio: float = 0.25
    #: Refreshes per host per cycle (a control-plane page budget override of the host wins), as dedup's
    #: STREAMCRAWL_DEDUP_HOST_PAGE_BUDGET bounds its discoveries.
    host_page_budget: int = 1000
    cycle_s: float = 86400.0
    scan_interval_s: float = 5.0
    scan_lookback_s: float = 2 * 86400.0
    refresh_per_scan: int = 2000   # the refresh side of the discovery/refresh budget, per scan
