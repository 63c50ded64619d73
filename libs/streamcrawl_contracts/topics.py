"""The topic registry: every Kafka topic's name, key, partition count and retention, in one place.

All host-keyed topics share one partition count, so that a host (the message key) maps to the same
partition index on every topic. Consumers use the range assignor, so partition i of every topic a
service reads lands on the same instance (co-partitioning, as Kafka Streams does).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Key(str, Enum):
    """What a topic's message key is."""

    HOST = "host"  # the lowercase host: streamcrawl_core.partition.host_key()
    NONE = "none"  # unkeyed; consumers must not rely on placement
    FETCH = "fetch"  # the fetch's exchange id: spread over partitions, a replay lands where its first copy did


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: Key
    partitions: int
    retention_ms: int
    description: str

    def config(self) -> dict[str, str]:
        return {"retention.ms": str(self.retention_ms), "cleanup.policy": "delete"}


#: Partition count shared by every host-keyed topic. Changing it re-homes hosts: do it only on an empty
#: cluster (the frontier's politeness state is rebuilt per partition from Cassandra on assignment).
HOST_PARTITIONS = 8

_DAY_MS = 24 * 3600 * 1000

SEEDS = TopicSpec("streamcrawl.seeds", Key.HOST, HOST_PARTITIONS, 7 * _DAY_MS,
                  "Seed URLs from users and the control plane (may arrive unkeyed; the frontier re-routes).")
URLS = TopicSpec("streamcrawl.urls", Key.HOST, HOST_PARTITIONS, 7 * _DAY_MS,
                 "New URLs (after dedup) and due refreshes (from recrawl-scheduler) for the frontier.")
URL_CANDIDATES = TopicSpec("streamcrawl.url_candidates", Key.HOST, HOST_PARTITIONS, 7 * _DAY_MS,
                           "Out-links keyed by their target host, for the dedup URL seen-set of that host.")
FETCH_REQUESTS = TopicSpec("streamcrawl.fetch_requests", Key.HOST, HOST_PARTITIONS, 1 * _DAY_MS,
                           "Leased fetch requests from the frontier (at most one in flight per host).")
FETCH_RESULTS = TopicSpec("streamcrawl.fetch_results", Key.HOST, HOST_PARTITIONS, 7 * _DAY_MS,
                          "Fetch outcomes: status, timings, headers, body storage key.")
PARSED = TopicSpec("streamcrawl.parsed", Key.HOST, HOST_PARTITIONS, 7 * _DAY_MS,
                   "Parsed pages: links, text SimHash, title, robots meta.")
PAGE_FETCHED = TopicSpec("page_fetched", Key.HOST, HOST_PARTITIONS, 14 * _DAY_MS,
                         "PUBLIC: new or changed pages for indexers (see README, 'The page_fetched contract').")
ARCHIVE = TopicSpec("streamcrawl.archive", Key.FETCH, HOST_PARTITIONS, 7 * _DAY_MS,
                    "Fetches to write as WARC records (from dedup), then published on page_fetched by the writer.")
DEAD_LETTER = TopicSpec("streamcrawl.dead_letter", Key.NONE, 1, 30 * _DAY_MS,
                        "Poison or undecodable messages with the reason, source topic, partition and offset.")

ALL_TOPICS: tuple[TopicSpec, ...] = (
    SEEDS, URLS, URL_CANDIDATES, FETCH_REQUESTS, FETCH_RESULTS, PARSED, ARCHIVE, PAGE_FETCHED, DEAD_LETTER,
)


def by_name(name: str) -> TopicSpec:
    for spec in ALL_TOPICS:
        if spec.name == name:
            return spec
    raise KeyError(name)
