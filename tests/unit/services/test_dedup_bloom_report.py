"""The seen-set's Bloom filters are sized from the crawl-wide setting, and their memory and expected
false-positive rate are reported as metrics."""

from __future__ import annotations

import asyncio

from prometheus_client import REGISTRY
from streamcrawl_core.traps import TrapConfig
from streamcrawl_dedup.handler import DedupHandler
from streamcrawl_dedup.seen import SeenSet
from streamcrawl_dedup.settings import DedupSettings
from streamcrawl_runtime.memory import MemoryBlobStore, MemoryCrawlState


def _gauge(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    assert value is not None, name
    return value


def test_filters_are_sized_per_partition_from_the_crawl_wide_setting_and_reported(monkeypatch) -> None:
    monkeypatch.setenv("STREAMCRAWL_DEDUP_BLOOM_CRAWL_URLS", "800000")
    monkeypatch.setenv("STREAMCRAWL_PARTITIONS", "8")
    settings = DedupSettings()
    per_partition = -(-settings.bloom_crawl_urls // settings.stack.partitions)
    assert per_partition == 100_000
    seen = SeenSet(MemoryCrawlState(), MemoryBlobStore(), per_partition, settings.bloom_fp_rate)
    h = DedupHandler(MemoryCrawlState(), seen, TrapConfig(), partitions=8)
    asyncio.run(h.on_assign([0, 1, 2]))
    size, urls, fp = seen.stats()
    # 100k URLs at 1%: ~9.6 bits each, ~120 kB per partition; nothing in them yet
    assert 3 * 115_000 < size < 3 * 125_000 and urls == 0 and fp == 0.0
    assert _gauge("streamcrawl_dedup_bloom_bytes") == size
    seen.blooms[1].add_many(list(range(100_000)))  # one partition filled to its design capacity
    h.report_bloom()
    assert _gauge("streamcrawl_dedup_bloom_urls") >= 99_000
    assert 0.007 < _gauge("streamcrawl_dedup_bloom_expected_fp_ratio") < 0.013
    asyncio.run(h.on_revoke([0, 1, 2]))
    assert _gauge("streamcrawl_dedup_bloom_bytes") == 0
