"""The control plane's ports in memory: for unit tests and the control plane's test mode
(`STREAMCRAWL_CONTROL_BACKEND=memory`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_core.politeness import HostOverride

from streamcrawl_runtime.ports.control import BlockEntry, KafkaStats, PortError


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

    def send(self, records: Sequence[tuple[str, SeedMessage]]) -> None:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory sink told to fail)")
        self.sent.extend(records)

    def ping(self) -> None:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory sink told to fail)")


class InMemoryControlStore:
    def __init__(self) -> None:
        self.blocks: dict[str, BlockEntry] = {}
        self.overrides: dict[str, HostOverride] = {}
        self.host_states: dict[str, dict[str, Any]] = {}
        self.frontier_queue = 0
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

    async def counts(self) -> dict[str, int]:
        self._check()
        return {"frontier_queue": self.frontier_queue, "blocklist": len(self.blocks),
                "host_overrides": len(self.overrides)}

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
