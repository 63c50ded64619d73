"""Dedup settings (STREAMCRAWL_DEDUP_*), built once in main()."""

from __future__ import annotations

from typing import ClassVar

from streamcrawl_runtime.settings import ServiceSettings, service_config


class DedupSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "dedup"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9104
    model_config = service_config(SERVICE)

    bloom_capacity: int = 2_000_000     # URLs per owned partition before the FP rate exceeds bloom_fp_rate
    bloom_fp_rate: float = 0.01
    snapshot_interval_s: float = 30.0
    host_page_budget: int = 1000
    max_depth: int = 15
    simhash_distance: int = 3
    #: Hand every fetch with an HTTP exchange to the WARC writer (streamcrawl-warc), which publishes
    #: page_fetched once the page's records are in S3. False: no WARC files; page_fetched is published here.
    warc: bool = True
