"""Recrawl scheduler settings (STREAMCRAWL_RECRAWL_*), built once in main()."""

from __future__ import annotations

from typing import ClassVar

from streamcrawl_runtime.settings import ServiceSettings, service_config


class RecrawlSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "recrawl"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9105
    model_config = service_config(SERVICE)

    min_interval_s: float = 3600.0
    max_interval_s: float = 30 * 86400.0
    initial_interval_s: float = 86400.0
    grow_factor: float = 2.0
    scan_interval_s: float = 5.0
    scan_lookback_s: float = 2 * 86400.0
    refresh_per_scan: int = 2000   # the refresh side of the discovery/refresh budget, per scan
