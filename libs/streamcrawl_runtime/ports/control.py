"""Ports of the control plane: the small interfaces its HTTP layer talks to, and the plain data they
exchange. The Kafka and Cassandra adapters are in the control service; the in-memory ones (tests, and
the control plane's test mode) in `streamcrawl_runtime.memory`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_core.politeness import HostOverride

from streamcrawl_runtime.observe import Scrape
from streamcrawl_runtime.ports.state import FetchOutcome, PartitionSummary, QueuedUrl


class PortError(RuntimeError):
    """An engine behind a port failed (unreachable, timed out, refused). The message is user-safe."""


@dataclass(frozen=True)
class BlockEntry:
    pattern: str
    reason: str | None
    created_at: datetime | None


@dataclass(frozen=True)
class PauseRow:
    scope: str  # "*" or a host
    reason: str | None
    paused_at: datetime | None


@dataclass(frozen=True)
class KafkaStats:
    #: topic name -> sum over partitions of the end (high watermark) offset
    end_offsets: dict[str, int] = field(default_factory=dict)
    #: consumer group -> topic -> total lag over the partitions the group has committed on
    group_lag: dict[str, dict[str, int]] = field(default_factory=dict)
    #: topic name -> records held (end less start offset, summed over partitions): the lag of a group that
    #: has committed nothing on the topic yet (or does not exist yet: its first member has not joined)
    held: dict[str, int] = field(default_factory=dict)


class SeedSink(Protocol):
    """Where accepted seeds go (the SEEDS topic). Blocking: the API calls it from a worker thread."""

    def send(self, records: Sequence[tuple[str, SeedMessage]]) -> list[str | None]:
        """Produce (key, message) pairs and wait for the acknowledgements: per record, in order, None once
        acknowledged, else why not. PortError if the engine is unreachable (nothing was produced)."""
        ...

    def ping(self) -> None:
        """Raise PortError if the engine is unreachable."""
        ...


class ControlStore(Protocol):
    """Blocklist, host overrides and host state (Cassandra). Async: it runs on the API's event loop."""

    async def list_blocklist(self) -> list[BlockEntry]: ...

    async def put_block(self, pattern: str, reason: str | None) -> BlockEntry: ...

    async def delete_block(self, pattern: str) -> bool:
        """Remove a pattern; False if it was not there."""
        ...

    async def get_override(self, host: str) -> HostOverride | None: ...

    async def put_override(self, host: str, override: HostOverride) -> HostOverride: ...

    async def delete_override(self, host: str) -> bool: ...

    async def get_host_state(self, host: str) -> dict[str, Any] | None:
        """The host_state row as JSON-friendly values, or None."""
        ...

    async def host_queue(self, part: int, host: str, first: int) -> tuple[int, list[QueuedUrl]]:
        """How many URLs of the host are queued, and the first ``first`` in the frontier's order. Reads the
        host's own queue partition (frontier_host_queue) only."""
        ...

    async def host_outcomes(self, host: str, limit: int) -> list[FetchOutcome]:
        """The host's latest outcomes, newest first."""
        ...

    async def list_pauses(self) -> list[PauseRow]: ...

    async def put_pause(self, scope: str, reason: str | None) -> PauseRow: ...

    async def delete_pause(self, scope: str) -> bool: ...

    async def summaries(self) -> list[PartitionSummary]:
        """Every partition's frontier_summary row (one per partition: never a scan of the queue)."""
        ...

    async def ping(self) -> None: ...


class StatsSource(Protocol):
    """Kafka offsets and consumer-group lag. Blocking: called from a worker thread."""

    def kafka_stats(self) -> KafkaStats: ...


class MetricsSource(Protocol):
    """The services' /metrics, summed over instances. Blocking: called from a worker thread."""

    def scrape(self) -> Scrape: ...
