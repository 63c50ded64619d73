"""Ports of the control plane: the small interfaces the HTTP layer talks to, and the plain data they
exchange. `adapters.py` implements them on Kafka and Cassandra, and in memory for unit tests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from streamcrawl_contracts.messages import SeedMessage


class PortError(RuntimeError):
    """An engine behind a port failed (unreachable, timed out, refused). The message is user-safe."""


@dataclass(frozen=True)
class BlockEntry:
    pattern: str
    reason: str | None
    created_at: datetime | None


@dataclass(frozen=True)
class Override:
    """A per-host politeness override; None fields keep the global value."""

    min_delay_s: float | None = None
    delay_factor: float | None = None
    page_budget: int | None = None
    note: str | None = None
    updated_at: datetime | None = None


@dataclass(frozen=True)
class KafkaStats:
    #: topic name -> sum over partitions of the end (high watermark) offset
    end_offsets: dict[str, int] = field(default_factory=dict)
    #: consumer group -> topic -> total lag over the partitions the group has committed on
    group_lag: dict[str, dict[str, int]] = field(default_factory=dict)


class SeedSink(Protocol):
    """Where accepted seeds go (the SEEDS topic)."""

    def send(self, records: Sequence[tuple[str, SeedMessage]]) -> None:
        """Produce (key, message) pairs and wait until all are acknowledged; PortError otherwise."""
        ...

    def ping(self) -> None:
        """Raise PortError if the engine is unreachable."""
        ...


class ControlStore(Protocol):
    """Blocklist, host overrides and host state (Cassandra)."""

    def list_blocklist(self) -> list[BlockEntry]: ...

    def put_block(self, pattern: str, reason: str | None) -> BlockEntry: ...

    def delete_block(self, pattern: str) -> bool:
        """Remove a pattern; False if it was not there."""
        ...

    def get_override(self, host: str) -> Override | None: ...

    def put_override(self, host: str, override: Override) -> Override: ...

    def delete_override(self, host: str) -> bool: ...

    def get_host_state(self, host: str) -> dict[str, Any] | None:
        """The host_state row as JSON-friendly values, or None."""
        ...

    def counts(self) -> dict[str, int]:
        """Cheap row counts (never a full scan of a large table)."""
        ...

    def ping(self) -> None: ...


class StatsSource(Protocol):
    """Kafka offsets and consumer-group lag."""

    def kafka_stats(self) -> KafkaStats: ...
