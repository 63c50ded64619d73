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

A consumer whose check fails `wedged_after_checks` times in a row, each while the broker answers another
client (the producer), is wedged as a whole, and is replaced: its work is handed over as at a revocation (records in
flight finish, outputs flush, the handler lets its partitions go), it is closed, the completed offsets are
committed by a client outside the group, and a new member joins. A WARC writer was seen so in an
engine-fault e2e run: fenced at the end of a 30 s Kafka freeze, it took an assignment and never fetched,
while its group showed no member at all and every check, for 7 minutes, answered "Local: Unknown
partition" for partitions of a topic that had them; no call on that client brought it back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
from prometheus_client import Counter

from streamcrawl_runtime.health import Readiness
from streamcrawl_runtime.loop_config import LoopConfig
from streamcrawl_runtime.loop_offsets import PartitionOffsets
from streamcrawl_runtime.loop_ownership import TP, Ownership

log = logging.getLogger("streamcrawl.loop")

REPLACED = Counter("streamcrawl_consumer_replaced_total", "Wedged consumers replaced by a new group member",
                   ["service"])


class LoopStuckWatch:
    if TYPE_CHECKING:  # the loop's (kafka_loop.RunLoop, kafka_rebalance.LoopRebalance)
        cfg: LoopConfig
        _own: Ownership
        _offsets: dict[TP, PartitionOffsets]
        _unstarted: set[TP]
        _paused: bool
        _pause_on_first: set[TP]
        _paused_tps: set[TP]
        _fresh_from: dict[TP, int]
        _offset_fetch_failed_at: float | None
        _commit_sent_at: float | None
        _closing: bool
        consumer: Consumer
        readiness: Readiness

        def _committed_apart(self, tps: list[TopicPartition]) -> list[TopicPartition]: ...
        async def _release(self, indexes: list[int], drain_s: float,
                           commit: bool = True) -> list[TopicPartition]: ...
        async def kafka_check(self) -> None: ...
        def _new_consumer(self) -> Consumer: ...
        def _subscribe(self) -> None: ...

    def _init_stuck(self) -> None:
        # Each assigned partition's delivery position at the last check (highest offset seen, -1: none).
        self._seen_at_check: dict[TP, int] = {}
        self._next_stuck_check = time.monotonic() + self.cfg.stuck_check_s
        self._paused_since_check = False
        self.stuck_restarts = 0
        # A never-started partition's log end when its committed offset was last read and found at that end:
        # idle, not stuck, and not read again until its log grows (a probe client per check costs).
        self._idle_at_end: dict[TP, int] = {}
        self._failed_checks = 0  # in a row
        self.consumers_replaced = 0

    def _note_assigned_for_stuck(self, new: set[TP]) -> None:
        """Newly assigned partitions (called from on_assign): their baseline is "nothing delivered", and the
        next check comes stuck_after_assign_s from now, so a fetch that never starts is found that soon. The
        check is moved later as well as earlier: no partition is judged less than that after its assignment
        (a regular check delayed by at most that long, at a rebalance)."""
        if not new or self.cfg.stuck_after_assign_s <= 0:
            return
        for tp in new:
            self._seen_at_check[tp] = self._delivered_to(tp)
        self._next_stuck_check = time.monotonic() + self.cfg.stuck_after_assign_s

    def _delivered_to(self, tp: TP) -> int:
        """The highest offset of ``tp`` the loop has seen (-1: none)."""
        tracker = self._offsets.get(tp)
        return tracker.highest_seen if tracker is not None else -1

    def _note_paused(self) -> None:
        """The loop paused: records were held back on purpose, so this interval proves nothing."""
        self._paused_since_check = True

    def _still_since_check(self) -> list[TP]:
        """The partitions that delivered nothing since the last check (and the books for the next)."""
        seen = {tp: self._delivered_to(tp) for tp in self._own.assigned - self._own.held}
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
        except Exception as exc:  # the broker away (the next check), or this client wedged
            # Counted only while the broker answers another client: failures during an outage say nothing.
            if self.cfg.wedged_after_checks > 0 and await self._broker_answers():
                self._failed_checks += 1
            log.warning("stuck-partition check failed",
                        extra={"error": str(exc)[:300], "in_a_row": self._failed_checks})
            if 0 < self.cfg.wedged_after_checks <= self._failed_checks:
                await self._replace_wedged_async()
            return
        self._failed_checks = 0
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

    async def _broker_answers(self) -> bool:
        """Whether the broker answers another client (the producer): an outage is waited out, not replaced."""
        try:
            await self.kafka_check()
        except Exception:
            return False
        return True

    async def _replace_wedged_async(self) -> None:
        """Replace the consumer by a new group member (see the module docstring), between two polls."""
        old, owned = self.consumer, sorted(self._own.owned)
        log.error("consumer wedged: replaced by a new group member", extra={
            "failed_checks": self._failed_checks, "partitions": len(self._own.assigned)})
        REPLACED.labels(self.cfg.service).inc()
        self.consumers_replaced += 1
        # Handed over as at a revocation; its offsets are committed once the old member is gone (below).
        commits = await self._release(owned, drain_s=self.cfg.revoke_drain_s) if owned else []
        self._own.clear()
        self._offsets.clear()
        for books in (self._unstarted, self._pause_on_first, self._paused_tps):
            books.clear()
        self._fresh_from.clear()
        self._seen_at_check, self._idle_at_end = {}, {}
        self._paused, self._offset_fetch_failed_at, self._commit_sent_at = False, None, None
        self._failed_checks = 0
        self.readiness.assigned(0)
        # Closed on a thread of its own, given a while: a wedged client may never finish closing, and a
        # thread of the loop's executor left waiting on it would hold up the process's exit. Its late
        # callbacks are ignored (kafka_rebalance: they name a consumer that is no longer the loop's).
        closed = threading.Event()

        def close() -> None:
            try:
                old.close()
            except Exception as exc:
                log.warning("wedged consumer did not close cleanly", extra={"error": str(exc)[:300]})
            finally:
                closed.set()

        self._closing = True
        try:
            threading.Thread(target=close, name="close-wedged", daemon=True).start()
            if not await asyncio.to_thread(closed.wait, 30.0):
                log.warning("wedged consumer not closed after 30 s: left behind")
        finally:
            self._closing = False
        if commits:
            try:
                await asyncio.to_thread(self._commit_apart, commits)
            except Exception as exc:  # e.g. another member in the group: its records are replayed
                log.warning("handover commit of a wedged consumer failed; its records are replayed",
                            extra={"error": str(exc)[:300]})
        self.consumer = self._new_consumer()
        self._subscribe()

    def _commit_apart(self, offsets: list[TopicPartition]) -> None:
        """Commit by a client that never joins the group (accepted while the group has no member)."""
        probe = Consumer({"bootstrap.servers": self.cfg.bootstrap, "group.id": self.cfg.group_id,
                          "group.protocol": "classic", "enable.auto.commit": False})
        try:
            probe.commit(offsets=offsets, asynchronous=False)
        finally:
            probe.close()
