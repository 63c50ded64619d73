"""Garbage-collector settings for a long-running service process.

Why: timed with the GC probe (bench/gcprobe, bench/gc_report.py) during a 2,000-host crawl
benchmark, the collector took 11.3% of the five services' CPU with Python's defaults: 18.8% of
dedup's, 14.3% of the frontier's, 10.2% of the fetcher's. Full collections walked every
long-lived object (imported modules, the Cassandra driver's metadata, the frontier's queues,
dedup's seen-set memory), and the default young threshold (700 allocations) promoted many
short-lived objects of a crawl step (pydantic models, driver futures) into the older generations,
which then filled and triggered those full collections. With start-up frozen and a threshold of
5,000 the same benchmark measured 7.5% (25,000: 7.2%; the young collections then cost more, the
objects being colder in cache). Figures in docs/benchmarks-gc.md.
"""

from __future__ import annotations

import gc

__all__ = ["settle_heap"]

# Allocations between young collections: enough for a batch of records to be handled and freed
# before the collector looks, so little survives into the older generations.
YOUNG_THRESHOLD = 5_000


def settle_heap(young_threshold: int = YOUNG_THRESHOLD) -> None:
    """Collect once, freeze what survives start-up (collections skip it from now on; reference
    counting still frees it), and collect the young generation less often."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(young_threshold, older, oldest)
