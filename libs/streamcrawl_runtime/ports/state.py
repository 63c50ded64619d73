"""The crawl-state port: the rows of url_state, host_state, the frontier's queues and due_index as plain data,
and one small protocol per role that reads or writes them (frontier, fetcher, dedup, recrawl). Each
service's handler depends on its role only; `CrawlState` is all of them, which the Cassandra adapter
(`streamcrawl_runtime.cassandra_state`) and the in-memory one (`streamcrawl_runtime.memory`) implement.

Every write is an idempotent upsert (or delete), so a replayed message (at-least-once delivery)
rewrites the same row. Writes of one message often go as one unlogged batch: not atomic, so callers
say how a replay repairs a batch that landed in part.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from streamcrawl_core.lease import LeaseMarks
from streamcrawl_core.politeness import HostOverride


class QueueKey(NamedTuple):
    """A URL's place in its host's durable queue (the clustering key): lower priority first."""

    priority: int
    url_fp: int


@dataclass
class QueuedUrl:
    part: int
    host: str
    url_fp: int
    url: str
    priority: int
    kind: str
    not_before: float
    depth: int
    enqueued_at: float
    #: The URL's redirect chain (streamcrawl_core.redirects): fingerprints of the URLs that redirected to it.
    redirect_chain: tuple[int, ...] = ()

    @property
    def key(self) -> QueueKey:
        return QueueKey(self.priority, self.url_fp)


@dataclass
class HostState:
    host: str
    robots_status: int | None = None
    robots_body: str | None = None
    robots_fetched_at: float | None = None
    crawl_delay_s: float | None = None
    last_fetch_ms: float | None = None
    next_allowed_at: float | None = None
    backoff_level: int = 0
    lease_id: str | None = None
    lease_url: str | None = None
    lease_expires_at: float | None = None
    urls_this_cycle: int = 0
    soft404_signature: str | None = None
    cycle: int | None = None  # the crawl cycle urls_this_cycle counts (dedup's page budget); None: never written


@dataclass
class UrlState:
    host: str
    url_fp: int
    url: str
    depth: int = 0
    status: str | None = None
    http_status: int | None = None
    content_type: str | None = None
    content_hash: str | None = None
    simhash: int | None = None
    storage_key: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    fetched_at: float | None = None
    fetch_count: int = 0
    change_count: int = 0
    last_changed_at: float | None = None
    change_interval_s: float | None = None
    next_visit_at: float | None = None
    canonical_url: str | None = None
    discovered_at: float | None = None
    sched_hash: str | None = None
    discovered_by: str | None = None
    frontier_done_at: float | None = None
    sched_visits: int = 0
    sched_first_at: float | None = None
    #: The newest sitemap <lastmod> of the URL (dedup), and the recrawl scheduler's dated-visit statistics
    #: (LastmodStats; migration 0041).
    sitemap_lastmod: float | None = None
    lm_visits: int = 0
    lm_changes: int = 0
    lm_exposure_s: float = 0.0
    lm_conflicts: int = 0
    #: The payload digest (hex SHA-256) of the URL's last capture as its WARC record holds it: the body as
    #: transferred, Content-Encoding kept (dedup; migration 0042). None: the content hash is that digest (no
    #: content coding, or a capture recorded before wire bodies were, or a row older than the column).
    wire_hash: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FetchOutcome:
    """One fetch's outcome, as the host view lists it (host_outcomes)."""

    at: float  # when the exchange ended (epoch seconds)
    url: str
    outcome: str
    status: int | None = None
    fetch_ms: float | None = None


@dataclass(frozen=True)
class PartitionSummary:
    """What a frontier holds for one owned partition (frontier_summary), for stats without table scans."""

    part: int
    queued: int
    in_flight: int
    hosts: int
    top_hosts: dict[str, int]  # the hosts with the most queued URLs -> how many
    updated_at: float


class LastmodStats(NamedTuple):
    """The visits of a URL that came with a known modification time, for the change-rate estimator
    (streamcrawl_core.recrawl.ChangeHistory's lm_* fields)."""

    visits: int = 0
    changes: int = 0
    exposure_s: float = 0.0
    conflicts: int = 0


class DueRow(NamedTuple):
    next_visit_at: float
    host: str
    url_fp: int
    url: str
    depth: int = 0


class HostReader(Protocol):
    async def host_get(self, host: str) -> HostState | None: ...


class UrlReader(Protocol):
    async def url_get(self, host: str, url_fp: int) -> UrlState | None: ...


class OverridesReader(Protocol):
    async def host_overrides(self) -> dict[str, HostOverride]: ...


class LeaseReader(Protocol):
    async def host_lease(self, host: str) -> LeaseMarks:
        """The host's lease columns (streamcrawl_core.lease.NO_MARKS if it has no row)."""


class PausesReader(Protocol):
    async def crawl_pauses(self) -> set[str]:
        """The paused scopes (crawl_pauses): "*" for the whole crawl, otherwise hosts."""


class FrontierState(HostReader, UrlReader, OverridesReader, LeaseReader, PausesReader, Protocol):
    """What the frontier reads and writes: its durable queues, host timers and leases.

    The durable queue is one row per queued URL in its host's own partition, ordered by `QueueKey`, plus
    an index of the hosts that have queued URLs, per Kafka partition, spread over buckets
    (streamcrawl_core.partition.host_bucket): a frontier that gains a partition pages through that
    partition's index and the queues of its hosts, and reads nothing of other partitions. A ``priority``
    of None in a delete means "whatever its priority" (a URL not in memory, whose place is unknown).
    """

    async def summary_put(self, summary: PartitionSummary) -> None:
        """What the frontier holds for one partition (frontier_summary; an upsert of the whole row)."""
    async def queue_put(self, item: QueuedUrl, index_host: bool = True) -> None:
        """The URL's row and (with ``index_host``) its host's row in the partition's index, in one request."""
    async def queue_delete(self, part: int, host: str, priority: int | None, url_fp: int) -> None: ...
    async def queue_finish(self, part: int, host: str, priority: int | None, url_fp: int, now: float) -> None:
        """Drop the queue row and mark the URL done (url_state.frontier_done_at)."""
    async def queue_head(self, host: str, after: QueueKey | None, limit: int) -> list[QueuedUrl]:
        """Up to ``limit`` of the host's queued URLs in queue order, after ``after`` (None: from the start)."""
    async def queue_hosts(self, part: int, bucket: int, after: str | None, limit: int) -> list[str]:
        """One page of the hosts in partition ``part``'s index bucket, in order, after ``after``."""
    async def queue_unindex(self, part: int, host: str) -> None:
        """The host has nothing queued any more: drop its row from the partition's index."""
    async def queue_index_host(self, part: int, host: str) -> None:
        """(Re)write the host's row in the partition's index (idempotent)."""
    async def host_put_politeness(self, host: str, next_allowed_at: float, backoff_level: int,
                                  last_fetch_ms: float | None, crawl_delay_s: float | None) -> None:
        """Record the host's timer after a fetch and end its lease."""
    async def host_politeness_and_finish(self, host: str, next_allowed_at: float, backoff_level: int,
                                         last_fetch_ms: float | None, crawl_delay_s: float | None,
                                         part: int, priority: int | None, url_fp: int, now: float) -> None:
        """host_put_politeness and queue_finish of one fetch result in one request (an unlogged batch of
        idempotent writes). Not atomic: either part may land without the other."""
    async def host_put_lease(self, host: str, lease_id: str | None, url: str | None,
                             expires_at: float | None) -> None: ...


class RobotsState(HostReader, Protocol):
    """What the fetcher's robots.txt cache persists per host."""

    async def host_put_robots(self, host: str, status: int | None, body: str | None, fetched_at: float,
                              crawl_delay_s: float | None) -> None:
        """Store freshly fetched robots.txt rules; also clears soft404_signature, so the host's soft-404
        probe is repeated once per robots.txt lifetime."""
    async def host_put_soft404(self, host: str, signature: str) -> None:
        """The host's answer to the soft-404 probe: a signature, or "none" (see the fetcher)."""


class FetcherState(RobotsState, UrlReader, LeaseReader, Protocol):
    """What the fetcher reads and writes: lease marks (crash safety), robots.txt, validators."""

    async def host_put_fetched_lease(self, host: str, lease_id: str, outcome: FetchOutcome | None = None) -> None:
        """The fetcher finished its work under ``lease_id`` (its result is about to be produced); with
        ``outcome``, also the host's last fetch end (host_state.last_fetch_end) and a host_outcomes row, in
        the same request."""
    async def host_put_dns(self, host: str, ip: str | None, error: str | None, expires_at: float) -> None:
        """The resolver's fresh answer for the host (host_state.dns_ip / dns_error / dns_expires_at)."""
    async def host_put_started_lease(self, host: str, lease_id: str, started_at: float) -> None:
        """The fetcher is about to send a request to the host under ``lease_id``."""
    async def url_put_outcome(self, host: str, url_fp: int, url: str, depth: int, status: str,
                              http_status: int | None, fetched_at: float) -> None:
        """The url_state status of a fetch that produced no page to parse (an error, a redirect, a 304, a
        disallowed URL, a soft 404): only these columns; content, schedule and counts are left alone."""


class DedupState(HostReader, UrlReader, OverridesReader, Protocol):
    """What dedup reads and writes: the URL seen-set's exact store, content claims, the near-duplicate
    index, per-host budgets and the blocklist."""

    async def host_put_budget(self, host: str, cycle: int, urls_this_cycle: int) -> None:
        """Dedup's count of URLs admitted for the host in crawl ``cycle`` (a count of another cycle is 0)."""
    async def url_insert_discovered(self, host: str, url_fp: int, url: str, depth: int, now: float,
                                    event_id: str = "") -> None: ...
    async def url_insert_discovered_many(self, host: str, urls: list[tuple[int, str]], depth: int, now: float,
                                         event_id: str = "") -> None: ...
    async def url_put_fetch(self, st: UrlState) -> None: ...
    async def url_put_sitemap_lastmod(self, host: str, url_fp: int, lastmod: float) -> None:
        """A sitemap's <lastmod> of a known URL (url_state.sitemap_lastmod), for the recrawl estimator."""
    async def url_put_fetch_and_simhash(self, st: UrlState) -> None:
        """url_put_fetch(st) and simhash_add(st.simhash, st.url) in one request (an unlogged batch of
        idempotent upserts). Not atomic: either part may land without the other."""
    async def content_claim(self, content_hash: str, url: str, storage_key: str, now: float) -> str:
        """The canonical URL of this body: ``url`` if it is the first to claim it."""
    async def simhash_candidates(self, simhash: int) -> list[tuple[int, str]]:
        """Distinct (signed simhash, url) pairs near ``simhash``: a superset, so callers check the
        Hamming distance."""
    async def simhash_add(self, simhash: int, url: str) -> None: ...
    async def blocklist_patterns(self) -> list[str]: ...


class RecrawlState(UrlReader, OverridesReader, Protocol):
    """What the recrawl scheduler reads and writes: schedules and the due index (and, for refreshes, the
    blocklist and the hosts' page budgets)."""

    async def blocklist_patterns(self) -> list[str]: ...

    async def url_put_schedule_and_due(self, host: str, url_fp: int, url: str, depth: int, interval_s: float,
                                       next_visit_at: float, change_count: int, last_changed_at: float | None,
                                       sched_hash: str | None, visits: int = 0,
                                       first_visit_at: float | None = None,
                                       lastmod: LastmodStats | None = None) -> None:
        """The recrawl schedule in url_state and due_put(next_visit_at, ...) in one request (an unlogged
        batch of idempotent upserts). Not atomic: either part may land without the other. ``visits``,
        ``first_visit_at`` and ``lastmod``: the visit history the change-rate estimator reads back
        (sched_visits, sched_first_at, lm_*; None writes no dated visits)."""
    async def due_put(self, next_visit_at: float, host: str, url_fp: int, url: str, depth: int = 0) -> None:
        """File a visit under the host's partition (see due_range)."""
    async def due_range(self, start: float, end: float, limit: int,
                        parts: Collection[int] | None = None) -> list[DueRow]:
        """Visits due in [start, end] of the hosts of Kafka partitions ``parts`` (None: all), by time."""
    async def due_delete(self, next_visit_at: float, host: str, url_fp: int) -> None: ...


class CrawlState(FrontierState, FetcherState, DedupState, RecrawlState, Protocol):
    """Every role's reads and writes: what a full adapter implements."""


__all__ = [
    "CrawlState", "DedupState", "DueRow", "FetchOutcome", "FetcherState", "FrontierState", "HostOverride", "HostReader",
    "HostState", "LastmodStats", "LeaseMarks", "LeaseReader", "OverridesReader", "PartitionSummary", "PausesReader",
    "QueueKey", "QueuedUrl", "RecrawlState", "RobotsState", "UrlReader", "UrlState",
]
