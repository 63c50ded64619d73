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

A member with no partition at all is past the stuck check's reach. One that has had none for
`orphan_after_s` asks the broker whether its group lists it, and is replaced the same way when it is
outside the group at two looks in a row (a fenced KIP-848 member that never rejoined: a dedup so after a
30 s Kafka freeze, its group empty for 7 minutes). A spare member (more members than partitions) is
listed, and left alone. After a fence ("partitions lost") the first look comes `orphan_after_fence_s`
after it: across a 30 s Kafka freeze the fenced members were the ones that stayed out (a frontier held
15 s until the orphan watch replaced it, its hosts 21 s late). A fenced member is not replaced outright:
one that has rejoined holds its partitions on the broker until its session expires, and a new member
waited 20 s for them in a trial run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
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
        self._failure_counted_at = -1e18  # monotonic time the last failed check was counted at
        # Since when the member has had no partition at all (None: it has some); and how many membership
        # looks in a row found it outside its group (see _watch_orphan_async).
        self._unassigned_since: float | None = None
        self._next_orphan_check = 0.0
        self._out_of_group = 0
        self.orphan_looks = 0
        self.consumers_replaced = 0
        self.fences = 0
        self._fenced = False  # fenced since the member last had a partition

    def _note_fenced(self) -> None:
        """The group fenced this client (from on_lost, in consume()'s thread): the orphan watch looks soon."""
        self.fences += 1
        self._fenced = True
        self._unassigned_since = time.monotonic()
        self._next_orphan_check = 0.0

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
        await self._watch_orphan_async(now)
        if now < self._next_stuck_check or self.cfg.stuck_check_s <= 0:
            return
        self._next_stuck_check = now + self.cfg.stuck_check_s
        paused, self._paused_since_check = self._paused_since_check or self._paused, False
        still = self._still_since_check()
        if paused:
            # Records were held back on purpose, so a still partition proves nothing; except one that has
            # delivered nothing since its assignment: the loop pauses those only at their first record
            # (kafka_rebalance._on_assign), so it was fetching all along, or never started. A frontier
            # partition assigned at a Kafka freeze's thaw, under the burst that follows it, was passed
            # over so and restarted only 39 s after the thaw (an engine-fault CI run).
            still = [tp for tp in still if tp in self._unstarted]
        if not still or self.cfg.group_protocol != "consumer":
            return  # eager assignment: no incremental calls to restart one partition with
        try:
            n = await asyncio.to_thread(self._restart_stuck, consumer, still)
        except Exception as exc:  # the broker away (the next check), or this client wedged
            # Looked at again soon rather than a whole interval later: a check fails when the client's
            # metadata is not back yet after an outage ("Local: Unknown partition" 9 s after a thaw), just
            # when partitions assigned at the thaw may not have started.
            if self.cfg.stuck_after_assign_s > 0:
                self._next_stuck_check = min(self._next_stuck_check, now + self.cfg.stuck_after_assign_s)
            # Counted only while the broker answers another client: failures during an outage say nothing.
            # And once a regular interval at most: the sooner looks above must not make a wedge of a
            # client whose metadata takes a few of them to come back.
            if (self.cfg.wedged_after_checks > 0 and now - self._failure_counted_at >= self.cfg.stuck_check_s
                    and await self._broker_answers()):
                self._failed_checks += 1
                self._failure_counted_at = now
            log.warning("stuck-partition check failed",
                        extra={"error": str(exc)[:300], "in_a_row": self._failed_checks})
            if 0 < self.cfg.wedged_after_checks <= self._failed_checks:
                await self._replace_wedged_async()
            return
        self._failed_checks = 0
        if n:
            self.stuck_restarts += n
            log.warning("partitions with records to read delivered nothing: restarted", extra={"partitions": n})

    async def _watch_orphan_async(self, now: float) -> None:
        """A member with no partition for orphan_after_s asks the broker whether its group still has it
        (every stuck_after_assign_s); found outside it twice in a row while the broker answers, its consumer
        is replaced by a new member. librdkafka's KIP-848 member can stay out of its group after a fence
        for good: a dedup fenced at a 30 s Kafka freeze's thaw polled on for 7 minutes with no assignment,
        its group empty, nothing logged (an engine-fault CI run); the stuck watch looks only at assigned
        partitions. A spare member (more instances than partitions) is in its group, and is left alone."""
        if self.cfg.orphan_after_s <= 0 or self._own.assigned:
            self._unassigned_since, self._out_of_group, self._fenced = None, 0, False
            return
        if self._unassigned_since is None:
            self._unassigned_since = now
        after = self.cfg.orphan_after_s
        if self._fenced and self.cfg.orphan_after_fence_s > 0:
            after = min(after, self.cfg.orphan_after_fence_s)
        if now - self._unassigned_since < after or now < self._next_orphan_check:
            return
        self._next_orphan_check = now + max(min(self.cfg.stuck_after_assign_s, after), 0.5)
        self.orphan_looks += 1
        try:
            member = await asyncio.to_thread(self._in_group, self.consumer)
        except Exception as exc:  # the broker away: nothing can be told
            log.warning("group membership look failed", extra={"error": str(exc)[:300]})
            return
        if member:
            self._out_of_group = 0
            # A spare member: looked at again much later (a look costs a client and a round trip).
            self._next_orphan_check = now + 4 * max(self.cfg.stuck_check_s, self.cfg.orphan_after_s)
            return
        self._out_of_group += 1
        if self._out_of_group < 2:
            return
        await self._replace_wedged_async(f"outside its group, no partition for {now - self._unassigned_since:.0f} s"
                                         + (" since a fence" if self._fenced else ""))
        self._unassigned_since, self._out_of_group, self._fenced = None, 0, False

    def _in_group(self, consumer: Consumer) -> bool:
        """Whether the group's description (by a client of its own) lists ``consumer``'s member id."""
        member_id = consumer.memberid()
        admin = AdminClient({"bootstrap.servers": self.cfg.bootstrap, "log_level": 0})
        described = admin.describe_consumer_groups([self.cfg.group_id], request_timeout=5.0)
        group = described[self.cfg.group_id].result(timeout=10.0)
        return bool(member_id) and any(m.member_id == member_id for m in group.members)

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

    async def _replace_wedged_async(self, why: str = "wedged") -> None:
        """Replace the consumer by a new group member (see the module docstring), between two polls."""
        old, owned = self.consumer, sorted(self._own.owned)
        log.error("consumer replaced by a new group member", extra={
            "why": why, "failed_checks": self._failed_checks, "partitions": len(self._own.assigned)})
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
        self._failed_checks, self._fenced = 0, False
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
            # Waited for only when its offsets are to be committed apart (accepted once it is gone).
            wait_s = 30.0 if commits else 2.0
            if not await asyncio.to_thread(closed.wait, wait_s):
                log.warning("wedged consumer not closed in time: left behind", extra={"waited_s": wait_s})
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
