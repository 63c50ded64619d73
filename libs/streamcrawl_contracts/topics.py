"""The topic registry: every Kafka topic's name, key, partition count and retention, in one place.

All host-keyed topics share one partition count, the deployment setting ``STREAMCRAWL_PARTITIONS``
(`StackSettings.partitions`, default `DEFAULT_PARTITIONS`), so that a host (the message key) maps to the
same partition index on every topic. Consumers use the broker's range assignor, so partition i of every
topic a service reads lands on the same instance (co-partitioning, as Kafka Streams does).

The count is fixed for the life of a crawl: a host's partition is murmur2(host) mod the count, and the
frontier's queues, the dedup seen-set snapshots and the recrawl scheduler's ownership are all per
partition. Provisioning refuses to change it on existing topics, and every service refuses to start
against topics with another count (README, "Choosing the partition count").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Key(str, Enum):
    """What a topic's message key is."""

    HOST = "host"  # the lowercase host: streamcrawl_core.partition.host_key()
    NONE = "none"  # unkeyed; consumers must not rely on placement
    FETCH = "fetch"  # the fetch's exchange id: spread over partitions, a replay lands where its first copy did


#: The default of STREAMCRAWL_PARTITIONS: at least as many partitions as the most instances of one service
#: a deployment would run (an instance beyond the partition count owns nothing), and small enough that a
#: single-machine crawl does not pay for many idle partitions.
DEFAULT_PARTITIONS = 64


@dataclass(frozen=True)
class TopicSpec:
    name: str
    key: Key
    retention_ms: int
    description: str
    #: None: the deployment's partition count (every host-keyed topic); else this count, whatever the setting.
    fixed_partitions: int | None = None

    def partitions(self, host_partitions: int) -> int:
        """The topic's partition count in a deployment whose STREAMCRAWL_PARTITIONS is ``host_partitions``."""
        return self.fixed_partitions if self.fixed_partitions is not None else host_partitions

    def config(self) -> dict[str, str]:
        return {"retention.ms": str(self.retention_ms), "cleanup.policy": "delete"}


_DAY_MS = 24 * 3600 * 1000

SEEDS = TopicSpec("streamcrawl.seeds", Key.HOST, 7 * _DAY_MS,
                  "Seed URLs from users and the control plane (may arrive unkeyed; the frontier re-routes).")
URLS = TopicSpec("streamcrawl.urls", Key.HOST, 7 * _DAY_MS,
                 "New URLs (after dedup) and due refreshes (from recrawl-scheduler) for the frontier.")
URL_CANDIDATES = TopicSpec("streamcrawl.url_candidates", Key.HOST, 7 * _DAY_MS,
                           "Out-links keyed by their target host, for the dedup URL seen-set of that host.")
FETCH_REQUESTS = TopicSpec("streamcrawl.fetch_requests", Key.HOST, 1 * _DAY_MS,
                           "Leased fetch requests from the frontier (at most one in flight per host).")
FETCH_RESULTS = TopicSpec("streamcrawl.fetch_results", Key.HOST, 7 * _DAY_MS,
                          "Fetch outcomes: status, timings, headers, body storage key.")
PARSED = TopicSpec("streamcrawl.parsed", Key.HOST, 7 * _DAY_MS,
                   "Parsed pages: links, text SimHash, title, robots meta.")
PAGE_FETCHED = TopicSpec("page_fetched", Key.HOST, 14 * _DAY_MS,
                         "PUBLIC: new or changed pages for indexers (see README, 'The page_fetched contract').")
ARCHIVE = TopicSpec("streamcrawl.archive", Key.FETCH, 7 * _DAY_MS,
                    "Fetches to write as WARC records (from dedup), then published on page_fetched by the writer.")
DEAD_LETTER = TopicSpec("streamcrawl.dead_letter", Key.NONE, 30 * _DAY_MS,
                        "Poison or undecodable messages with the reason, source topic, partition and offset.",
                        fixed_partitions=1)

ALL_TOPICS: tuple[TopicSpec, ...] = (
    SEEDS, URLS, URL_CANDIDATES, FETCH_REQUESTS, FETCH_RESULTS, PARSED, ARCHIVE, PAGE_FETCHED, DEAD_LETTER,
)


def by_name(name: str) -> TopicSpec:
    for spec in ALL_TOPICS:
        if spec.name == name:
            return spec
    raise KeyError(name)


HOST_KEYED: tuple[TopicSpec, ...] = tuple(t for t in ALL_TOPICS if t.key is Key.HOST)
