"""Dedup settings, built once in main()."""

from __future__ import annotations

from streamcrawl_runtime.settings import StackSettings


class DedupSettings(StackSettings):
    group_id: str = "streamcrawl-dedup"
    bloom_capacity: int = 2_000_000     # URLs per owned partition before the FP rate exceeds bloom_fp_rate
    bloom_fp_rate: float = 0.01
    snapshot_interval_s: float = 30.0
    host_page_budget: int = 1000
    max_depth: int = 15
    simhash_distance: int = 3
    metrics_port: int = 0
    log_level: str = "INFO"
