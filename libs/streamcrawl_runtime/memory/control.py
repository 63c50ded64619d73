"""The control plane's ports in memory: for unit tests and the control plane's test mode
(`STREAMCRAWL_CONTROL_BACKEND=memory`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_core.politeness import HostOverride

from streamcrawl_runtime.observe import Sample, Scrape
from streamcrawl_runtime.ports.control import BlockEntry, KafkaStats, PauseRow, PortError
from streamcrawl_runtime.ports.state import FetchOutcome, PartitionSummary, QueuedUrl


def json_value(value: Any) -> Any:
    """A column value as JSON-friendly data (a timestamp as ISO 8601, UTC: drivers return naive UTC)."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value



class InMemorySeedSink:
    """Records what would be produced; `fail` makes send() raise like an unreachable broker."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, SeedMessage]] = []
        self.fail = False

    def send(self, records: Sequence[tuple[str, SeedMessage]]) -> list[str | None]:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory sink told to fail)")
        self.sent.extend(records)
        return [None] * len(records)

    def ping(self) -> None:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory sink told to fail)")


class InMemoryControlStore:
    def __init__(self) -> None:
        self.blocks: dict[str, BlockEntry] = {}
        self.overrides: dict[str, HostOverride] = {}
        self.host_states: dict[str, dict[str, Any]] = {}
        self.queue: dict[str, list[QueuedUrl]] = {}  # host -> its frontier_host_queue rows
        self.outcomes: dict[str, list[FetchOutcome]] = {}  # host -> host_outcomes rows, oldest first
        self.pauses: dict[str, PauseRow] = {}
        self.partition_summaries: dict[int, PartitionSummary] = {}
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            raise PortError("cassandra: unreachable (in-memory store told to fail)")

    async def list_blocklist(self) -> list[BlockEntry]:
        self._check()
        return [self.blocks[k] for k in sorted(self.blocks)]

    async def put_block(self, pattern: str, reason: str | None) -> BlockEntry:
        self._check()
        entry = BlockEntry(pattern, reason, datetime.now(UTC))
        self.blocks[pattern] = entry
        return entry

    async def delete_block(self, pattern: str) -> bool:
        self._check()
        return self.blocks.pop(pattern, None) is not None

    async def get_override(self, host: str) -> HostOverride | None:
        self._check()
        return self.overrides.get(host)

    async def put_override(self, host: str, override: HostOverride) -> HostOverride:
        self._check()
        o = HostOverride(override.min_delay_s, override.delay_factor, override.page_budget, override.note,
                     datetime.now(UTC))
        self.overrides[host] = o
        return o

    async def delete_override(self, host: str) -> bool:
        self._check()
        return self.overrides.pop(host, None) is not None

    async def get_host_state(self, host: str) -> dict[str, Any] | None:
        self._check()
        row = self.host_states.get(host)
        return None if row is None else {k: json_value(v) for k, v in row.items()}

    async def host_queue(self, part: int, host: str, first: int) -> tuple[int, list[QueuedUrl]]:
        self._check()
        rows = [r for r in self.queue.get(host, []) if r.part == part]
        return len(rows), sorted(rows, key=lambda r: (r.priority, r.enqueued_at))[:first]

    async def host_outcomes(self, host: str, limit: int) -> list[FetchOutcome]:
        self._check()
        return sorted(self.outcomes.get(host, []), key=lambda o: -o.at)[:limit]

    async def list_pauses(self) -> list[PauseRow]:
        self._check()
        return [self.pauses[k] for k in sorted(self.pauses)]

    async def put_pause(self, scope: str, reason: str | None) -> PauseRow:
        self._check()
        row = self.pauses[scope] = PauseRow(scope, reason, datetime.now(UTC))
        return row

    async def delete_pause(self, scope: str) -> bool:
        self._check()
        return self.pauses.pop(scope, None) is not None

    async def summaries(self) -> list[PartitionSummary]:
        self._check()
        return [self.partition_summaries[k] for k in sorted(self.partition_summaries)]

    async def ping(self) -> None:
        self._check()


class InMemoryStats:
    def __init__(self, stats: KafkaStats | None = None) -> None:
        self.stats = stats or KafkaStats()
        self.fail = False

    def kafka_stats(self) -> KafkaStats:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory stats told to fail)")
        return self.stats


class InMemoryMetrics:
    """Serves a fixed (or test-updated) sample as if scraped from every service."""

    def __init__(self, sample: Sample | None = None, t: float | None = None) -> None:
        self.sample: Sample = dict(sample or {})
        self.t = t
        self.fail = False

    def scrape(self) -> Scrape:
        status = "unreachable (in-memory metrics told to fail)" if self.fail else "ok"
        return Scrape(self.t if self.t is not None else time.time(), {} if self.fail else dict(self.sample),
                      {"memory": status})
