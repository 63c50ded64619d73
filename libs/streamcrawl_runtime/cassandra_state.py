"""The crawl state in Cassandra (url_state, host_state, frontier_host_queue + frontier_hosts, due_index,
content_index, simhash_index): the adapter of the `CrawlState` port (streamcrawl_runtime.ports.state), with prepared
statements on the `CqlSession` port. Every write is an idempotent upsert (or delete); writes of one
message often go as one unlogged batch (one round trip), not atomic, so callers say how a replay
repairs a batch that landed in part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from datetime import UTC, datetime
from typing import Any

from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_core.neardup import candidate_keys, index_keys, signed64
from streamcrawl_core.partition import host_bucket, partition_for

from streamcrawl_runtime.cql_coalesce import WriteCoalescer
from streamcrawl_runtime.ports.cql import CqlSession
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

_Write = tuple[str, tuple[Any, ...]]  # a statement's CQL text and its parameters


def ts(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def epoch(value: datetime | None) -> float | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


DUE_BUCKET_S = 3600
#: Every priority a queued URL can have (UrlMessage.priority): a delete of a URL whose priority is unknown
#: names them all.
PRIORITIES = tuple(range(10))
#: Rows per page of the frontier's paged reads (queue heads, host index buckets).
PAGE_SIZE = 1000


class CassandraCrawlState:
    def __init__(self, session: CqlSession, partitions: int = DEFAULT_PARTITIONS) -> None:
        self.s = session
        # STREAMCRAWL_PARTITIONS: due_by_part rows are keyed by the host's Kafka partition.
        self.partitions = partitions
        # Per-row writes of concurrent handlers go out together (group commit: cql_coalesce); reads, the
        # content claim (a lightweight transaction) and the large robots.txt write stay single requests.
        self._w = WriteCoalescer(session)
        p = str  # a statement is its CQL text: the session prepares each text once, on first use
        # The frontier's queue: a partition per host (its budget bounds it), and an index of the hosts with
        # queued URLs per Kafka partition and bucket (streamcrawl_core.partition.host_bucket).
        self._q_put = p("INSERT INTO frontier_host_queue (host, priority, url_fp, url, kind, not_before, depth,"
                        " enqueued_at, redirect_chain) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
        self._q_del = p("DELETE FROM frontier_host_queue WHERE host = ? AND priority = ? AND url_fp = ?")
        self._q_del_any = p("DELETE FROM frontier_host_queue WHERE host = ? AND priority IN ? AND url_fp = ?")
        _cols = "host, priority, url_fp, url, kind, not_before, depth, enqueued_at, redirect_chain"
        self._q_head = p(f"SELECT {_cols} FROM frontier_host_queue WHERE host = ? LIMIT ?")
        self._q_head_after = p(f"SELECT {_cols} FROM frontier_host_queue WHERE host = ?"
                               " AND (priority, url_fp) > (?, ?) LIMIT ?")
        self._i_put = p("INSERT INTO frontier_hosts (part, bucket, host) VALUES (?, ?, ?)")
        self._i_del = p("DELETE FROM frontier_hosts WHERE part = ? AND bucket = ? AND host = ?")
        self._i_page = p("SELECT host FROM frontier_hosts WHERE part = ? AND bucket = ? LIMIT ?")
        self._i_page_after = p("SELECT host FROM frontier_hosts WHERE part = ? AND bucket = ? AND host > ? LIMIT ?")
        self._u_done = p("UPDATE url_state SET frontier_done_at = ? WHERE host = ? AND url_fp = ?")
        self._h_get = p("SELECT * FROM host_state WHERE host = ?")
        self._h_lease_get = p("SELECT lease_id, fetched_lease, started_lease, started_at FROM host_state"
                              " WHERE host = ?")
        self._h_fetched = p("UPDATE host_state SET fetched_lease = ? WHERE host = ?")
        self._h_fetched_end = p("UPDATE host_state SET fetched_lease = ?, last_fetch_end = ? WHERE host = ?")
        self._h_outcome = p("INSERT INTO host_outcomes (host, at, url, outcome, status, fetch_ms)"
                            " VALUES (?, ?, ?, ?, ?, ?)")
        self._h_dns = p("UPDATE host_state SET dns_ip = ?, dns_error = ?, dns_expires_at = ? WHERE host = ?")
        self._h_started = p("UPDATE host_state SET started_lease = ?, started_at = ? WHERE host = ?")
        # Politeness after a fetch also ends the host's lease: one write instead of two per page.
        self._h_pol = p("UPDATE host_state SET next_allowed_at = ?, backoff_level = ?, last_fetch_ms = ?,"
                        " crawl_delay_s = ?, lease_id = null, lease_url = null, lease_expires_at = null"
                        " WHERE host = ?")
        self._h_lease = p("UPDATE host_state SET lease_id = ?, lease_url = ?, lease_expires_at = ? WHERE host = ?")
        # New robots.txt rules start a new soft-404 probe lifetime: the old answer goes in the same write.
        self._h_robots = p("UPDATE host_state SET robots_status = ?, robots_body = ?, robots_fetched_at = ?,"
                           " crawl_delay_s = ?, soft404_signature = null WHERE host = ?")
        self._h_soft404 = p("UPDATE host_state SET soft404_signature = ? WHERE host = ?")
        # The count and its cycle in one write: a reader never pairs a count with the wrong cycle.
        self._h_budget = p("UPDATE host_state SET cycle = ?, urls_this_cycle = ? WHERE host = ?")
        self._u_get = p("SELECT * FROM url_state WHERE host = ? AND url_fp = ?")
        self._u_disc = p("INSERT INTO url_state (host, url_fp, url, depth, status, discovered_at, discovered_by)"
                         " VALUES (?, ?, ?, ?, 'queued', ?, ?)")
        self._u_fetch = p("UPDATE url_state SET url = ?, depth = ?, status = ?, http_status = ?, content_type = ?,"
                          " content_hash = ?, simhash = ?, storage_key = ?, etag = ?, last_modified = ?,"
                          " fetched_at = ?, fetch_count = ?, canonical_url = ?, wire_hash = ?"
                          " WHERE host = ? AND url_fp = ?")
        self._u_outcome = p("UPDATE url_state SET url = ?, depth = ?, status = ?, http_status = ?, fetched_at = ?"
                            " WHERE host = ? AND url_fp = ?")
        self._u_sched = p("UPDATE url_state SET change_interval_s = ?, next_visit_at = ?, change_count = ?,"
                          " last_changed_at = ?, sched_hash = ?, sched_visits = ?, sched_first_at = ?,"
                          " lm_visits = ?, lm_changes = ?, lm_exposure_s = ?, lm_conflicts = ?"
                          " WHERE host = ? AND url_fp = ?")
        self._u_sitemap = p("UPDATE url_state SET sitemap_lastmod = ? WHERE host = ? AND url_fp = ?")
        self._c_claim = p("INSERT INTO content_index (content_hash, canonical_url, storage_key, first_seen)"
                          " VALUES (?, ?, ?, ?) IF NOT EXISTS")
        self._c_get = p("SELECT canonical_url FROM content_index WHERE content_hash = ?")
        # One read of the 20 permuted-table keys (streamcrawl_core.neardup: a superset of the near duplicates).
        self._s_get = p("SELECT simhash, url FROM simhash_index WHERE key IN ?")
        self._s_put = p("INSERT INTO simhash_index (key, simhash, url) VALUES (?, ?, ?)")
        # due_by_part (0040): (partition, hour) partitions, so no hour is one hot Cassandra partition.
        self._d_put = p("INSERT INTO due_by_part (part, bucket, next_visit_at, host, url_fp, url, depth)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?)")
        self._d_range = p("SELECT next_visit_at, host, url_fp, url, depth FROM due_by_part WHERE part = ?"
                          " AND bucket = ? AND next_visit_at >= ? AND next_visit_at <= ? LIMIT ?")
        self._b_all = p("SELECT pattern FROM blocklist")
        self._o_all = p("SELECT host, min_delay_s, delay_factor, page_budget FROM host_overrides")
        self._pauses = p("SELECT scope FROM crawl_pauses")
        self._summary = p("INSERT INTO frontier_summary (part, queued, in_flight, hosts, top_hosts, updated_at)"
                          " VALUES (?, ?, ?, ?, ?, ?)")
        self._d_del = p("DELETE FROM due_by_part WHERE part = ? AND bucket = ? AND next_visit_at = ? AND host = ?"
                        " AND url_fp = ?")

    async def _exec(self, stmt: str, params: tuple[Any, ...], page_size: int | None = None) -> list[Any]:
        return await self.s.execute(stmt, params, page_size)

    async def _exec_unlogged(self, statements: list[_Write]) -> None:
        """Idempotent writes sent as one unlogged batch: one round trip, no batch log."""
        await self.s.execute_unlogged(statements)

    # ---------------------------------------------------------------- frontier queue
    # Per-row idempotent writes go through the write coalescer (one request for the writes of one
    # event-loop turn); the paged reads are single statements.
    def _queue_write(self, item: QueuedUrl) -> _Write:
        return self._q_put, (item.host, item.priority, item.url_fp, item.url, item.kind, ts(item.not_before),
                             item.depth, ts(item.enqueued_at), list(item.redirect_chain) or None)

    async def queue_put(self, item: QueuedUrl, index_host: bool = True) -> None:
        writes = [self._queue_write(item)]
        if index_host:
            writes.append((self._i_put, (item.part, host_bucket(item.host), item.host)))
        await self._w.write(writes)

    def _delete_write(self, host: str, priority: int | None, url_fp: int) -> _Write:
        if priority is None:
            return self._q_del_any, (host, list(PRIORITIES), url_fp)
        return self._q_del, (host, priority, url_fp)

    async def queue_delete(self, part: int, host: str, priority: int | None, url_fp: int) -> None:
        await self._w.write([self._delete_write(host, priority, url_fp)])

    def _finish_writes(self, host: str, priority: int | None, url_fp: int, now: float) -> list[_Write]:
        return [self._delete_write(host, priority, url_fp), (self._u_done, (ts(now), host, url_fp))]

    async def queue_finish(self, part: int, host: str, priority: int | None, url_fp: int, now: float) -> None:
        """Drop the queue row and mark the URL done, in one unlogged batch (one round trip, one partition):
        both rows are idempotent, so a half-applied batch is repaired by the replayed result."""
        await self._w.write(self._finish_writes(host, priority, url_fp, now))

    async def queue_head(self, host: str, after: QueueKey | None, limit: int) -> list[QueuedUrl]:
        if after is None:
            rows = await self._exec(self._q_head, (host, limit), page_size=min(limit, PAGE_SIZE))
        else:
            rows = await self._exec(self._q_head_after, (host, after.priority, after.url_fp, limit),
                                    page_size=min(limit, PAGE_SIZE))
        return [QueuedUrl(-1, r.host, r.url_fp, r.url, 5 if r.priority is None else r.priority,
                          r.kind or "discovery", epoch(r.not_before) or 0.0, r.depth or 0,
                          epoch(r.enqueued_at) or 0.0, tuple(r.redirect_chain or ())) for r in rows]

    async def queue_hosts(self, part: int, bucket: int, after: str | None, limit: int) -> list[str]:
        if after is None:
            rows = await self._exec(self._i_page, (part, bucket, limit), page_size=min(limit, PAGE_SIZE))
        else:
            rows = await self._exec(self._i_page_after, (part, bucket, after, limit), page_size=min(limit, PAGE_SIZE))
        return [str(r.host) for r in rows]

    async def queue_unindex(self, part: int, host: str) -> None:
        await self._w.write([(self._i_del, (part, host_bucket(host), host))])

    async def queue_index_host(self, part: int, host: str) -> None:
        await self._w.write([(self._i_put, (part, host_bucket(host), host))])

    # ---------------------------------------------------------------- host_state
    async def host_get(self, host: str) -> HostState | None:
        rows = await self._exec(self._h_get, (host,))
        if not rows:
            return None
        r = rows[0]
        return HostState(host, r.robots_status, r.robots_body, epoch(r.robots_fetched_at), r.crawl_delay_s,
                         r.last_fetch_ms, epoch(r.next_allowed_at), r.backoff_level or 0, r.lease_id, r.lease_url,
                         epoch(r.lease_expires_at), r.urls_this_cycle or 0, r.soft404_signature, r.cycle)

    async def host_lease(self, host: str) -> LeaseMarks:
        rows = await self._exec(self._h_lease_get, (host,))
        if not rows:
            return LeaseMarks(None, None)
        r = rows[0]
        return LeaseMarks(r.lease_id or None, r.fetched_lease or None, r.started_lease or None, epoch(r.started_at))

    async def host_put_fetched_lease(self, host: str, lease_id: str, outcome: FetchOutcome | None = None) -> None:
        if outcome is None:
            await self._w.write([(self._h_fetched, (lease_id, host))])
            return
        # The lease mark, the last fetch end and the outcome row: idempotent writes (same partition key) in
        # one request. A half-applied batch is rewritten by the replay.
        at = ts(outcome.at)
        await self._w.write([
            (self._h_fetched_end, (lease_id, at, host)),
            (self._h_outcome, (host, at, outcome.url, outcome.outcome, outcome.status, outcome.fetch_ms))])

    async def host_put_dns(self, host: str, ip: str | None, error: str | None, expires_at: float) -> None:
        await self._exec(self._h_dns, (ip, error, ts(expires_at), host))

    async def host_put_started_lease(self, host: str, lease_id: str, started_at: float) -> None:
        await self._w.write([(self._h_started, (lease_id, ts(started_at), host))])

    async def host_put_politeness(self, host: str, next_allowed_at: float, backoff_level: int,
                                  last_fetch_ms: float | None, crawl_delay_s: float | None) -> None:
        await self._w.write([(self._h_pol, (ts(next_allowed_at), backoff_level, last_fetch_ms, crawl_delay_s, host))])

    async def host_politeness_and_finish(self, host: str, next_allowed_at: float, backoff_level: int,
                                         last_fetch_ms: float | None, crawl_delay_s: float | None,
                                         part: int, priority: int | None, url_fp: int, now: float) -> None:
        """The host's timer (ending its lease), the queue row's delete and url_state.frontier_done_at:
        one unlogged batch, one round trip (all three rows are in the host's partitions)."""
        await self._w.write([
            (self._h_pol, (ts(next_allowed_at), backoff_level, last_fetch_ms, crawl_delay_s, host)),
            *self._finish_writes(host, priority, url_fp, now)])

    async def host_put_lease(self, host: str, lease_id: str | None, url: str | None,
                             expires_at: float | None) -> None:
        await self._w.write([(self._h_lease, (lease_id, url, ts(expires_at), host))])

    async def host_put_robots(self, host: str, status: int | None, body: str | None, fetched_at: float,
                              crawl_delay_s: float | None) -> None:
        await self._exec(self._h_robots, (status, body, ts(fetched_at), crawl_delay_s, host))

    async def host_put_soft404(self, host: str, signature: str) -> None:
        await self._exec(self._h_soft404, (signature, host))

    async def host_put_budget(self, host: str, cycle: int, urls_this_cycle: int) -> None:
        await self._w.write([(self._h_budget, (cycle, urls_this_cycle, host))])

    # ---------------------------------------------------------------- url_state
    async def url_get(self, host: str, url_fp: int) -> UrlState | None:
        rows = await self._exec(self._u_get, (host, url_fp))
        if not rows:
            return None
        r = rows[0]
        return UrlState(host, url_fp, r.url, r.depth or 0, r.status, r.http_status, r.content_type, r.content_hash,
                        r.simhash, r.storage_key, r.etag, r.last_modified, epoch(r.fetched_at), r.fetch_count or 0,
                        r.change_count or 0, epoch(r.last_changed_at), r.change_interval_s,
                        epoch(r.next_visit_at), r.canonical_url, epoch(r.discovered_at), r.sched_hash,
                        r.discovered_by, epoch(r.frontier_done_at), sched_visits=r.sched_visits or 0,
                        sched_first_at=epoch(r.sched_first_at), sitemap_lastmod=epoch(r.sitemap_lastmod),
                        lm_visits=r.lm_visits or 0, lm_changes=r.lm_changes or 0,
                        lm_exposure_s=r.lm_exposure_s or 0.0, lm_conflicts=r.lm_conflicts or 0,
                        wire_hash=r.wire_hash)

    async def url_insert_discovered(self, host: str, url_fp: int, url: str, depth: int, now: float,
                                    event_id: str = "") -> None:
        await self._w.write([(self._u_disc, (host, url_fp, url, depth, ts(now), event_id or None))])

    async def url_insert_discovered_many(self, host: str, urls: list[tuple[int, str]], depth: int, now: float,
                                         event_id: str = "") -> None:
        """(url_fp, url) pairs of one host in one single-partition batch: one request, applied atomically."""
        if len(urls) == 1:
            fp, url = urls[0]
            await self.url_insert_discovered(host, fp, url, depth, now, event_id)
            return
        await self._w.write([(self._u_disc, (host, fp, url, depth, ts(now), event_id or None)) for fp, url in urls])

    def _fetch_write(self, st: UrlState) -> _Write:
        return self._u_fetch, (st.url, st.depth, st.status, st.http_status, st.content_type, st.content_hash,
                               st.simhash, st.storage_key, st.etag, st.last_modified, ts(st.fetched_at),
                               st.fetch_count, st.canonical_url, st.wire_hash, st.host, st.url_fp)

    async def url_put_outcome(self, host: str, url_fp: int, url: str, depth: int, status: str,
                              http_status: int | None, fetched_at: float) -> None:
        await self._w.write([(self._u_outcome, (url, depth, status, http_status, ts(fetched_at), host, url_fp))])

    async def url_put_fetch(self, st: UrlState) -> None:
        await self._w.write([self._fetch_write(st)])

    async def url_put_sitemap_lastmod(self, host: str, url_fp: int, lastmod: float) -> None:
        await self._w.write([(self._u_sitemap, (ts(lastmod), host, url_fp))])

    async def url_put_fetch_and_simhash(self, st: UrlState) -> None:
        """A new canonical page: its url_state row and its 20 simhash_index rows, in batches of at most 10
        statements sent together (Cassandra warns of an unlogged batch over more than 10 partitions)."""
        if st.simhash is None:
            raise ValueError(f"no simhash to index for {st.url}")
        await self._write_spread([*self._simhash_writes(st.simhash, st.url), self._fetch_write(st)])

    async def _write_spread(self, writes: list[_Write], per_batch: int = 10) -> None:
        """Idempotent writes of many partitions: batches of ``per_batch``, in flight at once."""
        await asyncio.gather(*(self._w.write(writes[i:i + per_batch]) for i in range(0, len(writes), per_batch)))

    async def url_put_schedule_and_due(self, host: str, url_fp: int, url: str, depth: int, interval_s: float,
                                       next_visit_at: float, change_count: int, last_changed_at: float | None,
                                       sched_hash: str | None, visits: int = 0,
                                       first_visit_at: float | None = None,
                                       lastmod: LastmodStats | None = None) -> None:
        lm = lastmod or LastmodStats()
        await self._w.write([(self._u_sched, (interval_s, ts(next_visit_at), change_count, ts(last_changed_at),
                                              sched_hash, visits, ts(first_visit_at), lm.visits, lm.changes,
                                              lm.exposure_s, lm.conflicts, host, url_fp)),
                             self._due_write(next_visit_at, host, url_fp, url, depth)])

    # ---------------------------------------------------------------- content dedup
    async def content_claim(self, content_hash: str, url: str, storage_key: str, now: float) -> str:
        """The canonical URL for this body: `url` if it is the first to claim it (a lightweight
        transaction, since two dedup instances may see the same body from different hosts)."""
        rows = await self._exec(self._c_claim, (content_hash, url, storage_key, ts(now)))
        if rows and not rows[0].applied:
            return str(rows[0].canonical_url)
        return url

    async def simhash_candidates(self, simhash: int) -> list[tuple[int, str]]:
        rows = await self._exec(self._s_get, (candidate_keys(simhash),))
        # Every distinct (simhash, url): a page that changed has a row per fingerprint it had, and
        # keeping one per URL could drop the one within distance.
        return list(dict.fromkeys((r.simhash, r.url) for r in rows))

    def _simhash_writes(self, simhash: int, url: str) -> list[_Write]:
        return [(self._s_put, (key, signed64(simhash), url)) for key in index_keys(simhash)]

    async def simhash_add(self, simhash: int, url: str) -> None:
        await self._write_spread(self._simhash_writes(simhash, url))

    # ---------------------------------------------------------------- due index
    def _due_write(self, next_visit_at: float, host: str, url_fp: int, url: str, depth: int) -> _Write:
        return self._d_put, (partition_for(host, self.partitions), int(next_visit_at // DUE_BUCKET_S),
                             ts(next_visit_at), host, url_fp, url, depth)

    async def due_put(self, next_visit_at: float, host: str, url_fp: int, url: str, depth: int = 0) -> None:
        await self._w.write([self._due_write(next_visit_at, host, url_fp, url, depth)])

    async def due_range(self, start: float, end: float, limit: int,
                        parts: Collection[int] | None = None) -> list[DueRow]:
        """Oldest first per (partition, hour); up to ``limit`` rows per partition, the earliest ``limit`` kept."""
        out: list[DueRow] = []
        for part in sorted(range(self.partitions) if parts is None else parts):
            got = 0
            for bucket in range(int(start // DUE_BUCKET_S), int(end // DUE_BUCKET_S) + 1):
                rows = await self._exec(self._d_range, (part, bucket, ts(start), ts(end), limit - got))
                out.extend(DueRow(epoch(r.next_visit_at) or 0.0, r.host, r.url_fp, r.url, r.depth or 0) for r in rows)
                got += len(rows)
                if got >= limit:
                    break
        return sorted(out)[:limit]

    async def due_delete(self, next_visit_at: float, host: str, url_fp: int) -> None:
        await self._w.write([(self._d_del, (partition_for(host, self.partitions), int(next_visit_at // DUE_BUCKET_S),
                                            ts(next_visit_at), host, url_fp))])

    # ---------------------------------------------------------------- control plane
    async def blocklist_patterns(self) -> list[str]:
        return [str(r.pattern) for r in await self._exec(self._b_all, ())]

    async def crawl_pauses(self) -> set[str]:
        """Every paused scope (a handful of rows: a full read is cheap)."""
        return {str(r.scope) for r in await self._exec(self._pauses, ())}

    async def summary_put(self, summary: PartitionSummary) -> None:
        s = summary
        await self._w.write([(self._summary, (s.part, s.queued, s.in_flight, s.hosts, s.top_hosts, ts(s.updated_at)))])

    async def host_overrides(self) -> dict[str, HostOverride]:
        """Every override (the table holds the few hosts with an agreed rate, so a full read is cheap)."""
        rows = await self._exec(self._o_all, ())
        return {str(r.host): HostOverride(r.min_delay_s, r.delay_factor, r.page_budget) for r in rows}
