"""Offset bookkeeping of the run loop, apart from the Kafka driver: which offsets of a partition are done,
so that only the contiguous completed prefix is committed (at-least-once delivery)."""

from __future__ import annotations


class PartitionOffsets:
    """Tracks which offsets of one partition are done, to commit only a contiguous completed prefix."""

    def __init__(self) -> None:
        self.pending: set[int] = set()
        self.highest_seen = -1
        self.committed = -1  # next offset already committed (-1: nothing yet)

    def start(self, offset: int) -> None:
        self.pending.add(offset)
        self.highest_seen = max(self.highest_seen, offset)

    def finish(self, offset: int) -> None:
        self.pending.discard(offset)

    def commit_point(self) -> int | None:
        """The next offset to commit, or None if nothing new completed."""
        point = min(self.pending) if self.pending else self.highest_seen + 1
        return point if point > self.committed and point > 0 else None
