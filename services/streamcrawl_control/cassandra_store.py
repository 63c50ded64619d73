"""The control plane's Cassandra adapter: blocklist, host overrides, host state and counts, with
prepared statements on the services' `CqlSession` (acsylla), on the API's event loop."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_core.politeness import HostOverride
from streamcrawl_runtime.memory.control import json_value
from streamcrawl_runtime.ports.control import BlockEntry, PauseRow, PortError
from streamcrawl_runtime.ports.cql import CqlSession
from streamcrawl_runtime.ports.state import FetchOutcome, PartitionSummary, QueuedUrl

#: host_state columns GET /hosts/{host} reports (robots_body and the lease ids stay internal).
HOST_STATE_COLUMNS = (
    "host", "robots_status", "robots_fetched_at", "crawl_delay_s", "last_fetch_ms", "last_fetch_end",
    "next_allowed_at", "backoff_level", "dns_ip", "dns_error", "dns_expires_at", "cycle", "urls_this_cycle",
    "lease_url", "lease_expires_at",
)  # fmt: skip


def _utc(value: datetime | None) -> datetime | None:
    """The driver returns naive UTC datetimes; make them aware."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _epoch(value: datetime | None) -> float:
    v = _utc(value)
    return 0.0 if v is None else v.timestamp()


def _now_ms() -> datetime:
    """Now, truncated to the millisecond precision a Cassandra timestamp keeps."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)



class CassandraControlStore:
    """Control tables with prepared statements. `session` must be bound to the streamcrawl keyspace."""

    def __init__(self, session: CqlSession, host_partitions: int = DEFAULT_PARTITIONS) -> None:
        self.session = session
        self.host_partitions = host_partitions
        p = str  # a statement is its CQL text: the session prepares each text once, on first use
        self._list_blocks = p("SELECT pattern, reason, created_at FROM blocklist LIMIT 100000")
        self._get_block = p("SELECT pattern FROM blocklist WHERE pattern = ?")
        self._put_block = p("INSERT INTO blocklist (pattern, reason, created_at) VALUES (?, ?, ?)")
        self._del_block = p("DELETE FROM blocklist WHERE pattern = ?")
        self._get_override = p(
            "SELECT min_delay_s, delay_factor, page_budget, note, updated_at"
            " FROM host_overrides WHERE host = ?")
        self._put_override = p(
            "INSERT INTO host_overrides (host, min_delay_s, delay_factor, page_budget, note, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)")
        self._del_override = p("DELETE FROM host_overrides WHERE host = ?")
        self._host_state = p(f"SELECT {', '.join(HOST_STATE_COLUMNS)} FROM host_state WHERE host = ?")
        # The host's own queue partition (frontier_host_queue), in the frontier's order: priority, fingerprint.
        self._queue_count = p("SELECT COUNT(*) FROM frontier_host_queue WHERE host = ?")
        self._queue_rows = p("SELECT url, priority, kind, not_before, depth, url_fp, enqueued_at"
                             " FROM frontier_host_queue WHERE host = ? LIMIT ?")
        self._outcomes = p("SELECT at, url, outcome, status, fetch_ms FROM host_outcomes WHERE host = ? LIMIT ?")
        self._pauses = p("SELECT scope, reason, paused_at FROM crawl_pauses")
        self._put_pause = p("INSERT INTO crawl_pauses (scope, reason, paused_at) VALUES (?, ?, ?)")
        self._get_pause = p("SELECT scope FROM crawl_pauses WHERE scope = ?")
        self._del_pause = p("DELETE FROM crawl_pauses WHERE scope = ?")
        self._summaries = p("SELECT part, queued, in_flight, hosts, top_hosts, updated_at FROM frontier_summary"
                            " WHERE part IN ?")

    async def _run(self, stmt: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return await self.session.execute(stmt, params)
        except Exception as exc:  # the driver raises many unrelated types; all mean "engine failed"
            raise PortError(f"cassandra: {type(exc).__name__}: {exc}") from exc

    async def _one(self, stmt: str, params: Sequence[Any] = ()) -> Any:
        rows = await self._run(stmt, params)
        return rows[0] if rows else None

    async def list_blocklist(self) -> list[BlockEntry]:
        rows = await self._run(self._list_blocks)
        entries = [BlockEntry(r.pattern, r.reason, _utc(r.created_at)) for r in rows]
        return sorted(entries, key=lambda e: e.pattern)

    async def put_block(self, pattern: str, reason: str | None) -> BlockEntry:
        now = _now_ms()
        await self._run(self._put_block, (pattern, reason, now))
        return BlockEntry(pattern, reason, now)

    async def delete_block(self, pattern: str) -> bool:
        if await self._one(self._get_block, (pattern,)) is None:
            return False
        await self._run(self._del_block, (pattern,))
        return True

    async def get_override(self, host: str) -> HostOverride | None:
        r = await self._one(self._get_override, (host,))
        if r is None:
            return None
        return HostOverride(r.min_delay_s, r.delay_factor, r.page_budget, r.note, _utc(r.updated_at))

    async def put_override(self, host: str, override: HostOverride) -> HostOverride:
        now = _now_ms()
        o = override
        await self._run(self._put_override, (host, o.min_delay_s, o.delay_factor, o.page_budget, o.note, now))
        return HostOverride(o.min_delay_s, o.delay_factor, o.page_budget, o.note, now)

    async def delete_override(self, host: str) -> bool:
        if await self.get_override(host) is None:
            return False
        await self._run(self._del_override, (host,))
        return True

    async def get_host_state(self, host: str) -> dict[str, Any] | None:
        r = await self._one(self._host_state, (host,))
        if r is None:
            return None
        return {col: json_value(getattr(r, col)) for col in HOST_STATE_COLUMNS}

    async def host_queue(self, part: int, host: str, first: int) -> tuple[int, list[QueuedUrl]]:
        count = int((await self._one(self._queue_count, (host,)))[0])
        rows = await self._run(self._queue_rows, (host, first))  # stored in the frontier's order
        return count, [QueuedUrl(part, host, r.url_fp, r.url, 5 if r.priority is None else r.priority,
                                 r.kind or "discovery", _epoch(r.not_before), r.depth or 0, _epoch(r.enqueued_at))
                       for r in rows]

    async def host_outcomes(self, host: str, limit: int) -> list[FetchOutcome]:
        rows = await self._run(self._outcomes, (host, limit))
        return [FetchOutcome(_epoch(r.at), r.url, r.outcome, r.status, r.fetch_ms) for r in rows]

    async def list_pauses(self) -> list[PauseRow]:
        rows = await self._run(self._pauses)
        return sorted((PauseRow(r.scope, r.reason, _utc(r.paused_at)) for r in rows), key=lambda p: p.scope)

    async def put_pause(self, scope: str, reason: str | None) -> PauseRow:
        now = _now_ms()
        await self._run(self._put_pause, (scope, reason, now))
        return PauseRow(scope, reason, now)

    async def delete_pause(self, scope: str) -> bool:
        if await self._one(self._get_pause, (scope,)) is None:
            return False
        await self._run(self._del_pause, (scope,))
        return True

    async def summaries(self) -> list[PartitionSummary]:
        rows = await self._run(self._summaries, (list(range(self.host_partitions)),))
        return [PartitionSummary(r.part, r.queued or 0, r.in_flight or 0, r.hosts or 0, dict(r.top_hosts or {}),
                                 _epoch(r.updated_at)) for r in rows]

    async def ping(self) -> None:
        await self._run("SELECT release_version FROM system.local")
