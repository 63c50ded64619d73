"""Dedup settings (STREAMCRAWL_DEDUP_*), built once in main()."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field
from streamcrawl_runtime.settings import ServiceSettings, service_config


class DedupSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "dedup"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9104
    model_config = service_config(SERVICE)

    #: Distinct URLs the whole crawl is expected to see (over all partitions): each partition's Bloom filter
    #: is sized for its share, bloom_crawl_urls / STREAMCRAWL_PARTITIONS, at bloom_fp_rate. Memory: about
    #: 9.6 bits per URL at 1% (16M URLs: 19 MB over all partitions, shared by the dedup instances). Beyond
    #: it the false-positive rate grows (reported as streamcrawl_dedup_bloom_expected_fp_ratio): each false
    #: positive costs one exact url_state read, never a wrong answer.
    bloom_crawl_urls: int = Field(default=16_000_000, ge=1)
    bloom_fp_rate: float = Field(default=0.01, gt=0, lt=1)
    snapshot_interval_s: float = 30.0
    host_page_budget: int = 1000
    max_depth: int = 15
    simhash_distance: int = 3
    #: Hand every fetch with an HTTP exchange to the WARC writer (streamcrawl-warc), which publishes
    #: page_fetched once the page's records are in S3. False: no WARC files; page_fetched is published here.
    warc: bool = True
