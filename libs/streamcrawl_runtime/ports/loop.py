"""The run loop's port: what a handler receives (`Record`), what it returns (`Output`) and what it
implements (`Handler`). Driver-free, so a handler can be read and tested without Kafka in view; the Kafka
adapter that drives handlers is `streamcrawl_runtime.kafka_loop`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from streamcrawl_contracts.messages import Envelope
from streamcrawl_contracts.topics import TopicSpec


@dataclass(frozen=True)
class Output:
    """A message to produce: the topic, its key (the host for host-keyed topics) and the payload."""

    topic: TopicSpec
    key: str | None
    value: Envelope


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: str | None
    value: bytes
    # True when the record was produced after this process was assigned its partition, so no other
    # instance (a crashed or revoked previous owner) can have handled it before; False = maybe a replay.
    # Lets a handler skip a replay check for new records. Unknown (no watermark, or the loop's
    # mark_fresh is off) counts as False. A retried record is never fresh: its first attempt may have
    # done part of the work.
    fresh: bool = False


class Handler(Protocol):
    """What a service plugs into the loop. All methods may do I/O; none may block the event loop long."""

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]: ...

    async def on_assign(self, partitions: list[int]) -> None: ...

    async def on_revoke(self, partitions: list[int]) -> None: ...

    async def tick(self, now: float) -> Sequence[Output]: ...

    # Optional (the loop looks it up with getattr): ``tick_due(now) -> float``, the wall-clock time the
    # handler next has timed work for ``tick`` (a politeness timer, a periodic flush; ``math.inf``: none).
    # The loop then ticks at that time (never more often than its tick_interval_s) and sleeps in poll
    # until then; records handled meanwhile may bring it forward. Without it the loop ticks every
    # tick_interval_s.


class StatelessHandler:
    """Base for handlers that keep no per-partition state and do no periodic work (fetcher, parser)."""

    async def on_assign(self, partitions: list[int]) -> None:
        return None

    async def on_revoke(self, partitions: list[int]) -> None:
        return None

    async def tick(self, now: float) -> Sequence[Output]:
        return ()

    def tick_due(self, now: float) -> float:
        return math.inf  # no timed work: the loop never wakes up for a tick
