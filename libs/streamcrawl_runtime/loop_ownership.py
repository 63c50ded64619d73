"""Which partition indexes a run loop's handler owns, apart from the Kafka driver.

A service's handler keeps state per partition index (the frontier's queues of partition i serve the
records of partition i of seeds, urls and fetch_results alike), so it owns index i only while partition i
of *every* topic it reads is assigned to this instance. The broker's range assignor moves an index's
partitions together; should an assignment ever hold some of an index's partitions and not the others,
those are *held* (paused, and re-read from their committed offsets once the index is complete) rather
than handled by a handler that does not own the index.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

TP = tuple[str, int]  # (topic, partition)


class Ownership:
    def __init__(self, topics: Sequence[str]) -> None:
        self.topics = tuple(topics)
        self.assigned: set[TP] = set()
        self.owned: set[int] = set()
        self.held: set[TP] = set()  # assigned, but their index is not complete

    def _complete(self, index: int) -> bool:
        return all((t, index) in self.assigned for t in self.topics)

    def assign(self, tps: Iterable[TP]) -> tuple[list[int], list[TP], list[TP]]:
        """Add partitions. Returns (indexes now owned, partitions to hold, held partitions to release:
        their index became complete, so they are read again from their committed offsets)."""
        new = set(tps) - self.assigned
        self.assigned |= new
        gained = sorted({p for _, p in new if p not in self.owned and self._complete(p)})
        self.owned.update(gained)
        release = sorted(tp for tp in self.held if tp[1] in gained)
        self.held -= set(release)
        hold = sorted(tp for tp in new if tp[1] not in self.owned)
        self.held.update(hold)
        return gained, hold, release

    def revoke(self, tps: Iterable[TP]) -> tuple[list[int], list[TP]]:
        """Remove partitions. Returns (indexes no longer owned, partitions still assigned that are now
        held because their index lost a partition)."""
        gone = set(tps) & self.assigned
        self.assigned -= gone
        self.held -= gone
        lost = sorted({p for _, p in gone if p in self.owned})
        self.owned.difference_update(lost)
        hold = sorted(tp for tp in self.assigned if tp[1] in lost)
        self.held.update(hold)
        return lost, hold

    def clear(self) -> list[int]:
        """Everything goes (the consumer closes): the indexes that were owned."""
        owned = sorted(self.owned)
        self.assigned.clear()
        self.owned.clear()
        self.held.clear()
        return owned
