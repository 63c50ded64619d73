"""DedupHandler.on_assign restores partitions' Bloom filters several at a time (an assignment of 64
partitions one by one held the dedup for 17 s after a Kafka freeze), at most RESTORE_CONCURRENCY at once,
and a failed restore is raised as itself, the partition left unowned."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from streamcrawl_core.traps import TrapConfig
from streamcrawl_dedup.handler import RESTORE_CONCURRENCY, DedupHandler
from streamcrawl_dedup.seen import SeenSet
from streamcrawl_runtime.memory import MemoryBlobStore, MemoryCrawlState
from streamcrawl_runtime.ports.errors import TransientError


class Replays:
    """A replay (in a worker thread, as the Kafka one) that records how many run at once."""

    def __init__(self, fail_on: int | None = None) -> None:
        self.lock = threading.Lock()
        self.running = self.most = 0
        self.fail_on = fail_on

    def __call__(self, part: int, start: int) -> tuple[list[int], int]:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.05)  # long enough for the others to start, if they may
            if part == self.fail_on:
                raise TransientError("kafka: log end unknown")
            return [part * 1000 + 1], start + 1
        finally:
            with self.lock:
                self.running -= 1


def _handler(replay: Replays) -> tuple[DedupHandler, SeenSet]:
    seen = SeenSet(MemoryCrawlState(), MemoryBlobStore(), capacity=1_000, fp_rate=0.01, replay=replay)
    return DedupHandler(MemoryCrawlState(), seen, TrapConfig(), partitions=64), seen


def test_partitions_are_restored_several_at_a_time_within_the_bound():
    replay = Replays()
    h, seen = _handler(replay)
    asyncio.run(h.on_assign(list(range(32))))
    assert sorted(seen.blooms) == list(range(32))
    assert all(len(seen.blooms[p]) == 1 for p in range(32))
    assert 1 < replay.most <= RESTORE_CONCURRENCY


def test_a_failed_restore_is_raised_as_itself_and_its_partition_is_not_owned():
    replay = Replays(fail_on=5)
    h, seen = _handler(replay)
    with pytest.raises(TransientError):
        asyncio.run(h.on_assign(list(range(16))))
    assert 5 not in seen.blooms
    assert 5 not in h._owned
    # the loop retries the whole assignment; restores are idempotent
    replay.fail_on = None
    asyncio.run(h.on_assign(list(range(16))))
    assert sorted(seen.blooms) == list(range(16))
    assert h._owned == set(range(16))
