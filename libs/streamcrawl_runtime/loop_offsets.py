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


class StallWatch:
    """Partitions whose oldest unfinished record has stayed the same for at least ``after_s``: a record
    that never finishes holds its partition's commit point, so the group's lag never drains, and nothing
    else says so (a scale e2e run once sat on a lag of 18 for 10 minutes with no warning anywhere)."""

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self._since: dict[tuple[str, int], tuple[int, float]] = {}  # partition → (oldest pending, seen at)

    def look(self, offsets: dict[tuple[str, int], PartitionOffsets],
             now: float) -> list[tuple[tuple[str, int], int, int, float]]:
        """(partition, oldest pending offset, records pending, seconds it has been the oldest) of each stalled
        partition."""
        since: dict[tuple[str, int], tuple[int, float]] = {}
        stalled = []
        for tp, tracker in offsets.items():
            if not tracker.pending:
                continue
            oldest = min(tracker.pending)
            prev = self._since.get(tp)
            first = prev[1] if prev is not None and prev[0] == oldest else now
            since[tp] = (oldest, first)
            if now - first >= self.after_s:
                stalled.append((tp, oldest, len(tracker.pending), round(now - first, 1)))
        self._since = since
        return stalled
