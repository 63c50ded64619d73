"""The run loop's watch for partitions librdkafka stopped fetching (a mixin of kafka_loop.RunLoop): an
assigned partition that has records to read, is not paused by the loop, and delivered nothing over a
whole check interval is restarted: resumed, unassigned and assigned again at the next offset the loop has
not seen (or, if it never delivered a record, at its committed offset), which starts a new fetch.

Why a watch rather than one more fix: every way seen so far of a partition that stays assigned and never
fetches again was silent, nothing logged and the group stable (librdkafka issues 5586 without the error
reaching the application, 2190 and 5591 for pauses racing a fetch start, a pause kept across a revocation).
The last CI runs showed two: a parser sat on 48 partitions after a Kafka freeze, and a recrawl scheduler on
one partition of fetch results (16 records) for ten minutes in the scale e2e test, after a kill -9 of its
peer, with nothing in its log.

The check costs one ListOffsets request per leader every `stuck_check_s`, and only for partitions whose
delivery position did not move since the previous check; the positions are local. A partition restarted
for nothing (its records were on their way) is read from where it was: nothing is skipped or read twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from streamcrawl_runtime.loop_config import LoopConfig
from streamcrawl_runtime.loop_offsets import PartitionOffsets
from streamcrawl_runtime.loop_ownership import TP, Ownership

log = logging.getLogger("streamcrawl.loop")


class LoopStuckWatch:
    if TYPE_CHECKING:  # the loop's (kafka_loop.RunLoop, kafka_rebalance.LoopRebalance)
        cfg: LoopConfig
        _own: Ownership
        _offsets: dict[TP, PartitionOffsets]
        _unstarted: set[TP]
        _paused: bool

        def _committed_apart(self, tps: list[TopicPartition]) -> list[TopicPartition]: ...

    def _init_stuck(self) -> None:
        # Each assigned partition's delivery position at the last check (highest offset seen, -1: none).
        self._seen_at_check: dict[TP, int] = {}
        self._next_stuck_check = time.monotonic() + self.cfg.stuck_check_s
        self._paused_since_check = False
        self.stuck_restarts = 0
        # A never-started partition's log end when its committed offset was last read and found at that end:
        # idle, not stuck, and not read again until its log grows (a probe client per check costs).
        self._idle_at_end: dict[TP, int] = {}

    def _note_paused(self) -> None:
        """The loop paused: records were held back on purpose, so this interval proves nothing."""
        self._paused_since_check = True

    def _still_since_check(self) -> list[TP]:
        """The partitions that delivered nothing since the last check (and the books for the next)."""
        seen = {tp: (self._offsets[tp].highest_seen if tp in self._offsets else -1)
                for tp in self._own.assigned - self._own.held}
        still = [tp for tp, pos in seen.items() if self._seen_at_check.get(tp) == pos]
        self._seen_at_check = seen
        return still

    async def _watch_stuck_async(self, consumer: Consumer) -> None:
        """Called by the loop after a poll returned; a check every stuck_check_s (in a worker thread)."""
        now = time.monotonic()
        if now < self._next_stuck_check or self.cfg.stuck_check_s <= 0:
            return
        self._next_stuck_check = now + self.cfg.stuck_check_s
        paused, self._paused_since_check = self._paused_since_check or self._paused, False
        still = self._still_since_check()
        if paused or not still or self.cfg.group_protocol != "consumer":
            return  # eager assignment: no incremental calls to restart one partition with
        try:
            n = await asyncio.to_thread(self._restart_stuck, consumer, still)
        except Exception as exc:  # an engine away: the next check
            log.warning("stuck-partition check failed", extra={"error": str(exc)[:300]})
            return
        if n:
            self.stuck_restarts += n
            log.warning("partitions with records to read delivered nothing: restarted", extra={"partitions": n})

    def _restart_stuck(self, consumer: Consumer, still: list[TP]) -> int:
        """Restart those of ``still`` that have records beyond the loop's position. Returns how many."""
        ends = consumer.offsets_for_times([TopicPartition(t, p, OFFSET_END) for t, p in still], timeout=5.0)
        end_of = {(tp.topic, tp.partition): tp.offset for tp in ends if tp.error is None and tp.offset >= 0}
        at: dict[TP, int] = {}
        never = []
        for tp in still:
            tracker = self._offsets.get(tp)
            if tracker is not None and tracker.highest_seen >= 0:
                at[tp] = tracker.highest_seen + 1
            else:
                never.append(tp)
        if never:  # never delivered: where the group would start them (read only if they could be stuck)
            maybe = [tp for tp in never if end_of.get(tp, 0) > 0 and self._idle_at_end.get(tp) != end_of[tp]]
            for c in self._committed_apart([TopicPartition(t, p) for t, p in maybe]) if maybe else []:
                if c.error is not None:
                    continue
                key = (c.topic, c.partition)
                if c.offset >= 0 and c.offset >= end_of[key]:
                    self._idle_at_end[key] = end_of[key]
                at[key] = c.offset if c.offset >= 0 else OFFSET_BEGINNING
        stuck = []
        for tp, pos in at.items():
            end = end_of.get(tp)
            if end is None or tp not in self._own.assigned or tp in self._own.held:
                continue
            # A never-started partition without a commit starts at the log start: stuck if anything is there
            # (a log emptied by retention is restarted once per check, harmlessly).
            if (pos == OFFSET_BEGINNING and end > 0) or 0 <= pos < end:
                stuck.append(TopicPartition(tp[0], tp[1], pos))
        if not stuck:
            return 0
        plain = [TopicPartition(tp.topic, tp.partition) for tp in stuck]
        consumer.resume(plain)  # a pause librdkafka kept (or raced) goes with the old fetch state
        consumer.incremental_unassign(plain)
        consumer.incremental_assign(stuck)
        for restarted in stuck:  # a new fetch: not to be paused before its first record (see _on_assign)
            self._unstarted.add((restarted.topic, restarted.partition))
        return len(stuck)
