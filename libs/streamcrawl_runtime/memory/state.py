"""The crawl state in memory: the in-memory adapter of the `CrawlState` port, for unit tests and for
running a service without Cassandra. Cassandra's semantics are kept where they matter: writes are upserts
of the named columns only, timestamps keep milliseconds, url_get returns a copy (a read, not a live
reference), content_claim is first-claimer-wins, and the near-duplicate index has the same layout
(streamcrawl_core.neardup) as the Cassandra adapter's."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Collection
from typing import Any

from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_core.neardup import candidate_keys, index_keys, signed64
from streamcrawl_core.partition import host_bucket, partition_for

from streamcrawl_runtime.ports.state import (
    DueRow,
    FetchOutcome,
    HostOverride,
    HostState,
    LastmodStats,
    LeaseMarks,
    PartitionSummary,
    QueuedUrl,
    QueueKey,
    UrlState,
)


def _ms(epoch: float | None) -> float | None:
    """Cassandra `timestamp` keeps milliseconds: what a value reads back as."""
    return None if epoch is None else math.floor(epoch * 1000.0) / 1000.0


class MemoryCrawlState:
    """CrawlState in dicts, with Cassandra's semantics where they matter: writes are upserts of the
    named columns only, timestamps keep milliseconds, url_get returns a copy (a read, not a live
    reference), content_claim is first-claimer-wins. `calls` logs every write, in order."""

    def __init__(self, partitions: int = DEFAULT_PARTITIONS) -> None:
        self.partitions = partitions  # STREAMCRAWL_PARTITIONS: the due index's part is the host's partition
        self.hosts: dict[str, HostState] = {}
        self.fetched_leases: dict[str, str] = {}  # host → host_state.fetched_lease
        self.started_leases: dict[str, tuple[str, float]] = {}  # host → (started_lease, started_at)
        self.urls: dict[tuple[str, int], UrlState] = {}
        self.robots_writes = 0
        self.queue: dict[tuple[int, str, int], QueuedUrl] = {}  # (part, host, url_fp): one row per URL
        self.queue_index: set[tuple[int, int, str]] = set()  # frontier_hosts: (part, bucket, host)
        self.queue_reads = 0  # queue_head and queue_hosts calls
        self.content: dict[str, str] = {}  # content_hash -> canonical url
        # index key -> {(signed fp, url)}: the table's clustering key, so a URL keeps a row per fingerprint
        self.simhash_index: dict[int, dict[tuple[int, str], None]] = {}
        self.due: dict[tuple[float, str, int], str] = {}  # (next_visit_at, host, url_fp) -> url
        self.due_depth: dict[tuple[float, str, int], int] = {}
        self.overrides: dict[str, HostOverride] = {}
        self.blocklist: list[str] = []
        self.pauses: set[str] = set()  # crawl_pauses scopes
        self.summaries: dict[int, PartitionSummary] = {}
        self.outcomes: dict[str, list[FetchOutcome]] = {}  # host -> host_outcomes rows, oldest first
        self.last_fetch_end: dict[str, float] = {}
        self.dns: dict[str, tuple[str | None, str | None, float]] = {}  # host -> (ip, error, expires_at)
        self.calls: list[tuple[Any, ...]] = []
        self.host_reads: list[str] = []  # host_get calls, in order

    async def host_get(self, host: str) -> HostState | None:
        self.host_reads.append(host)
        return self.hosts.get(host)

    async def host_put_robots(self, host: str, status: int | None, body: str | None, fetched_at: float,
                              crawl_delay_s: float | None) -> None:
        hs = self.hosts.setdefault(host, HostState(host))
        hs.robots_status, hs.robots_body, hs.robots_fetched_at = status, body, fetched_at
        hs.crawl_delay_s = crawl_delay_s
        hs.soft404_signature = None  # like the CQL statement: new rules start a new probe lifetime
        self.robots_writes += 1

    async def host_put_soft404(self, host: str, signature: str) -> None:
        self.calls.append(("host_put_soft404", host, signature))
        self.hosts.setdefault(host, HostState(host)).soft404_signature = signature

    async def url_get(self, host: str, url_fp: int) -> UrlState | None:
        st = self.urls.get((host, url_fp))
        return None if st is None else dataclasses.replace(st, extra=dict(st.extra))

    # ---------------------------------------------------------------- frontier queue
    async def queue_put(self, item: QueuedUrl, index_host: bool = True) -> None:
        self.calls.append(("queue_put", item.host, item.url))
        # The row is keyed by (host, priority, url_fp) in Cassandra: a URL queued again at another priority
        # would be a second row there; the frontier never does that (it knows the URLs it has queued).
        self.queue[(item.part, item.host, item.url_fp)] = dataclasses.replace(
            item, not_before=_ms(item.not_before) or 0.0, enqueued_at=_ms(item.enqueued_at) or 0.0)
        if index_host:
            self.queue_index.add((item.part, host_bucket(item.host), item.host))

    def _drop(self, part: int, host: str, priority: int | None, url_fp: int) -> None:
        row = self.queue.get((part, host, url_fp))
        if row is not None and (priority is None or row.priority == priority):
            del self.queue[(part, host, url_fp)]

    async def queue_delete(self, part: int, host: str, priority: int | None, url_fp: int) -> None:
        self.calls.append(("queue_delete", host, url_fp))
        self._drop(part, host, priority, url_fp)

    async def queue_finish(self, part: int, host: str, priority: int | None, url_fp: int, now: float) -> None:
        self.calls.append(("queue_finish", host, url_fp))
        self._finish(part, host, priority, url_fp, now)

    def _finish(self, part: int, host: str, priority: int | None, url_fp: int, now: float) -> None:
        self._drop(part, host, priority, url_fp)
        row = self.urls.get((host, url_fp))
        if row is not None:  # like the CQL UPDATE, which would create the row: only mark known URLs here
            row.frontier_done_at = _ms(now)

    async def queue_head(self, host: str, after: QueueKey | None, limit: int) -> list[QueuedUrl]:
        self.queue_reads += 1
        rows = sorted((q for (_, h, _), q in self.queue.items() if h == host), key=lambda q: q.key)
        if after is not None:
            rows = [q for q in rows if q.key > after]
        return [dataclasses.replace(q, part=-1) for q in rows[:limit]]

    async def queue_hosts(self, part: int, bucket: int, after: str | None, limit: int) -> list[str]:
        self.queue_reads += 1
        hosts = sorted(h for p, b, h in self.queue_index if p == part and b == bucket and (after is None or h > after))
        return hosts[:limit]

    async def queue_unindex(self, part: int, host: str) -> None:
        self.calls.append(("queue_unindex", host))
        self.queue_index.discard((part, host_bucket(host), host))

    async def queue_index_host(self, part: int, host: str) -> None:
        self.calls.append(("queue_index_host", host))
        self.queue_index.add((part, host_bucket(host), host))

    def queue_of(self, part: int) -> list[QueuedUrl]:
        """Every queued URL of a partition (a test helper: the frontier never reads a whole partition)."""
        return [q for (p, _, _), q in self.queue.items() if p == part]

    # ---------------------------------------------------------------- host_state
    async def host_put_politeness(self, host: str, next_allowed_at: float, backoff_level: int,
                                  last_fetch_ms: float | None, crawl_delay_s: float | None) -> None:
        self.calls.append(("host_put_politeness", host, next_allowed_at, backoff_level))
        self._politeness(host, next_allowed_at, backoff_level, last_fetch_ms, crawl_delay_s)

    async def host_politeness_and_finish(self, host: str, next_allowed_at: float, backoff_level: int,
                                         last_fetch_ms: float | None, crawl_delay_s: float | None,
                                         part: int, priority: int | None, url_fp: int, now: float) -> None:
        self.calls.append(("host_politeness_and_finish", host, next_allowed_at, backoff_level, url_fp))  # one request
        self._politeness(host, next_allowed_at, backoff_level, last_fetch_ms, crawl_delay_s)
        self._finish(part, host, priority, url_fp, now)

    def _politeness(self, host: str, next_allowed_at: float, backoff_level: int, last_fetch_ms: float | None,
                    crawl_delay_s: float | None) -> None:
        hs = self.hosts.setdefault(host, HostState(host))
        hs.next_allowed_at, hs.backoff_level = _ms(next_allowed_at), backoff_level
        hs.last_fetch_ms, hs.crawl_delay_s = last_fetch_ms, crawl_delay_s
        hs.lease_id = hs.lease_url = None  # like the CQL statement: a finished fetch ends the lease
        hs.lease_expires_at = None

    async def host_put_lease(self, host: str, lease_id: str | None, url: str | None,
                             expires_at: float | None) -> None:
        self.calls.append(("host_put_lease", host, lease_id, url, expires_at))
        hs = self.hosts.setdefault(host, HostState(host))
        hs.lease_id, hs.lease_url, hs.lease_expires_at = lease_id, url, _ms(expires_at)

    async def host_put_budget(self, host: str, cycle: int, urls_this_cycle: int) -> None:
        self.calls.append(("host_put_budget", host, cycle, urls_this_cycle))
        hs = self.hosts.setdefault(host, HostState(host))
        hs.cycle, hs.urls_this_cycle = cycle, urls_this_cycle

    # ---------------------------------------------------------------- url_state
    def _url(self, host: str, url_fp: int, url: str) -> UrlState:
        return self.urls.setdefault((host, url_fp), UrlState(host, url_fp, url))

    async def url_insert_discovered(self, host: str, url_fp: int, url: str, depth: int, now: float,
                                    event_id: str = "") -> None:
        self.calls.append(("url_insert_discovered", host, url))
        st = self._url(host, url_fp, url)
        st.url, st.depth, st.status, st.discovered_at = url, depth, "queued", _ms(now)
        st.discovered_by = event_id or None

    async def url_insert_discovered_many(self, host: str, urls: list[tuple[int, str]], depth: int, now: float,
                                         event_id: str = "") -> None:
        self.calls.append(("url_insert_discovered_many", host, len(urls)))
        for fp, url in urls:
            await self.url_insert_discovered(host, fp, url, depth, now, event_id)

    async def url_put_outcome(self, host: str, url_fp: int, url: str, depth: int, status: str,
                              http_status: int | None, fetched_at: float) -> None:
        self.calls.append(("url_put_outcome", host, url, status))
        row = self._url(host, url_fp, url)
        row.url, row.depth, row.status, row.http_status = url, depth, status, http_status
        row.fetched_at = _ms(fetched_at)

    async def url_put_fetch(self, st: UrlState) -> None:
        self.calls.append(("url_put_fetch", st.host, st.url, st.status))
        self._put_fetch(st)

    async def url_put_sitemap_lastmod(self, host: str, url_fp: int, lastmod: float) -> None:
        self.calls.append(("url_put_sitemap_lastmod", host, url_fp, lastmod))
        self.urls.setdefault((host, url_fp), UrlState(host, url_fp, "")).sitemap_lastmod = _ms(lastmod)

    async def url_put_fetch_and_simhash(self, st: UrlState) -> None:
        self.calls.append(("url_put_fetch_and_simhash", st.host, st.url, st.status))  # one request
        assert st.simhash is not None
        self._put_fetch(st)
        self._put_simhash(st.simhash, st.url)

    def _put_fetch(self, st: UrlState) -> None:
        row = self._url(st.host, st.url_fp, st.url)
        for name in ("url", "depth", "status", "http_status", "content_type", "content_hash", "simhash",
                     "storage_key", "etag", "last_modified", "fetch_count", "canonical_url", "wire_hash"):
            setattr(row, name, getattr(st, name))
        row.fetched_at = _ms(st.fetched_at)

    async def url_put_schedule_and_due(self, host: str, url_fp: int, url: str, depth: int, interval_s: float,
                                       next_visit_at: float, change_count: int, last_changed_at: float | None,
                                       sched_hash: str | None, visits: int = 0,
                                       first_visit_at: float | None = None,
                                       lastmod: LastmodStats | None = None) -> None:
        self.calls.append(("url_put_schedule_and_due", next_visit_at, host, url_fp, interval_s))  # one request
        row = self.urls.setdefault((host, url_fp), UrlState(host, url_fp, ""))
        row.change_interval_s, row.next_visit_at = interval_s, _ms(next_visit_at)
        row.change_count, row.last_changed_at, row.sched_hash = change_count, _ms(last_changed_at), sched_hash
        row.sched_visits, row.sched_first_at = visits, _ms(first_visit_at)
        lm = lastmod or LastmodStats()
        row.lm_visits, row.lm_changes, row.lm_exposure_s, row.lm_conflicts = lm
        self._due(next_visit_at, host, url_fp, url, depth)

    # ---------------------------------------------------------------- content dedup
    async def content_claim(self, content_hash: str, url: str, storage_key: str, now: float) -> str:
        return self.content.setdefault(content_hash, url)

    async def simhash_candidates(self, simhash: int) -> list[tuple[int, str]]:
        # Like the CQL read (key IN ?): every row under the query's keys, a superset of the near duplicates.
        found: dict[tuple[int, str], None] = {}
        for key in candidate_keys(simhash):
            found.update(self.simhash_index.get(key, {}))
        return list(found)

    async def simhash_add(self, simhash: int, url: str) -> None:
        self.calls.append(("simhash_add", simhash, url))
        self._put_simhash(simhash, url)

    def _put_simhash(self, simhash: int, url: str) -> None:
        for key in index_keys(simhash):
            self.simhash_index.setdefault(key, {})[(signed64(simhash), url)] = None

    # ---------------------------------------------------------------- due index
    async def due_put(self, next_visit_at: float, host: str, url_fp: int, url: str, depth: int = 0) -> None:
        self.calls.append(("due_put", next_visit_at, host, url_fp))
        self._due(next_visit_at, host, url_fp, url, depth)

    def _due(self, next_visit_at: float, host: str, url_fp: int, url: str, depth: int) -> None:
        self.due[(_ms(next_visit_at) or 0.0, host, url_fp)] = url
        self.due_depth[(_ms(next_visit_at) or 0.0, host, url_fp)] = depth

    async def due_range(self, start: float, end: float, limit: int,
                        parts: Collection[int] | None = None) -> list[DueRow]:
        rows = sorted(DueRow(t, h, fp, url, self.due_depth.get((t, h, fp), 0))
                      for (t, h, fp), url in self.due.items()
                      if start <= t <= end and (parts is None or partition_for(h, self.partitions) in parts))
        return rows[:limit]

    async def due_delete(self, next_visit_at: float, host: str, url_fp: int) -> None:
        self.calls.append(("due_delete", next_visit_at, host, url_fp))
        self.due.pop((_ms(next_visit_at) or 0.0, host, url_fp), None)

    # ---------------------------------------------------------------- control plane
    async def host_lease(self, host: str) -> LeaseMarks:
        hs = self.hosts.get(host)
        started_lease, started_at = self.started_leases.get(host, (None, None))
        return LeaseMarks(hs.lease_id if hs else None, self.fetched_leases.get(host), started_lease,
                        _ms(started_at))

    async def host_put_fetched_lease(self, host: str, lease_id: str, outcome: FetchOutcome | None = None) -> None:
        self.calls.append(("host_put_fetched_lease", host, lease_id))
        self.fetched_leases[host] = lease_id
        if outcome is not None:
            self.last_fetch_end[host] = _ms(outcome.at) or 0.0
            self.outcomes.setdefault(host, []).append(outcome)

    async def host_put_dns(self, host: str, ip: str | None, error: str | None, expires_at: float) -> None:
        self.calls.append(("host_put_dns", host, ip))
        self.dns[host] = (ip, error, _ms(expires_at) or 0.0)

    async def crawl_pauses(self) -> set[str]:
        return set(self.pauses)

    async def summary_put(self, summary: PartitionSummary) -> None:
        self.summaries[summary.part] = summary

    async def host_put_started_lease(self, host: str, lease_id: str, started_at: float) -> None:
        self.calls.append(("host_put_started_lease", host, lease_id))
        self.started_leases[host] = (lease_id, started_at)

    async def host_overrides(self) -> dict[str, HostOverride]:
        return dict(self.overrides)

    async def blocklist_patterns(self) -> list[str]:
        return list(self.blocklist)
