"""The run loop's rebalance side (a mixin of kafka_loop.RunLoop): the on_assign / on_revoke / on_lost
callbacks, the handover of revoked partitions, and the bookkeeping they keep for the loop (held partitions,
each topic's partition count for the key check, each partition's fresh-from log end, readiness).

- Rebalances are incremental (Kafka 4's consumer group protocol, KIP-848, with the broker's range
  assignor, which keeps partition i of every subscribed topic on one member: see loop_ownership): a
  joining instance takes only the partitions it gets, and nothing else stops. A partition leaves an
  instance only after its records in flight have finished (or, after `revoke_drain_s`, been cancelled:
  a fetch request aborts), their outputs are flushed, their offsets committed and the handler's
  on_revoke has run: the broker hands the partition to its next owner only once the revocation is
  acknowledged, so two instances never work on one partition's keys at once.
- The callbacks run in consume()'s worker thread and wait for their work on the event loop, so the handler
  never sees records of a partition before its on_assign, nor after its on_revoke.
- confluent-kafka keeps one call state per client and thread: a blocking call made inside a callback clears
  the one consume() set, and the next callback of that consume() aborts the process (CallState_get
  assertion). So the partition-count lookup runs after the poll returns (`_note_pending_counts`, called
  by the loop), not in on_assign. The callbacks still make a few (committed in `_reread`,
  offsets_for_times for mark_fresh, the handover commit in on_revoke); add none. Running those on a
  side thread was tried and deadlocked the loop integration test.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
from prometheus_client import Counter, Histogram

from streamcrawl_runtime.health import Readiness
from streamcrawl_runtime.loop_config import LoopConfig
from streamcrawl_runtime.loop_offsets import PartitionOffsets
from streamcrawl_runtime.loop_ownership import TP, Ownership
from streamcrawl_runtime.ports.errors import is_transient
from streamcrawl_runtime.ports.loop import Handler, Record

log = logging.getLogger("streamcrawl.loop")

REBALANCES = Counter("streamcrawl_rebalance_partitions_total", "Partitions assigned, revoked, lost or held",
                     ["service", "event"])
DRAIN_SECONDS = Histogram("streamcrawl_revoke_drain_seconds", "Time to settle revoked partitions before the handover",
                          ["service"], buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60))
CANCELLED = Counter("streamcrawl_revoke_cancelled_total",
                    "Records still running when their partition had to go (cancelled, replayed by the next owner)",
                    ["service"])

T = TypeVar("T")


class LoopRebalance:
    """RunLoop's rebalance callbacks and partition handover. The state below the first line is this side's
    own (set by `_init_rebalance`); the rest is the loop's, which the handover acts on."""

    if TYPE_CHECKING:  # the loop's (kafka_loop.RunLoop)
        cfg: LoopConfig
        handler: Handler
        readiness: Readiness
        consumer: Consumer
        _event_loop: asyncio.AbstractEventLoop | None
        _own: Ownership
        _offsets: dict[TP, PartitionOffsets]
        _key_chains: dict[tuple[int, str | None], deque[Record]]
        _waiting: int
        _running: dict[int, set[asyncio.Task[None]]]
        _stopping: bool
        _closing: bool
        _paused: bool

        def _commit_points(self, tps: list[TP] | None = None) -> list[TopicPartition]: ...
        async def _flushed_async(self, flush_s: float = 30.0) -> bool: ...
        def _commit(self, offsets: list[TopicPartition]) -> None: ...
        def _note_assigned_for_stuck(self, new: set[TP]) -> None: ...
        def _note_fenced(self) -> None: ...

    def _init_rebalance(self) -> None:
        self._fresh_from: dict[TP, int] = {}  # (topic, partition) → log end when assigned
        self._partition_counts: dict[str, int] = {}  # topic → partitions, for the key check
        self._counts_pending: set[str] = set()  # assigned topics whose partition count is not known yet
        self._unstarted: set[TP] = set()  # assigned, no record delivered yet: not to be paused or resumed yet
        self._pause_on_first: set[TP] = set()  # unstarted while the loop is paused: paused at their first record
        self._paused_tps: set[TP] = set()  # what backpressure paused (and will resume)
        # When the consumer reported a failed committed-offset fetch (None: none since the last restart of
        # the unstarted partitions): see `_restart_unstarted`.
        self._offset_fetch_failed_at: float | None = None

    # The callbacks run in consume()'s worker thread. Each waits for its work on the event loop, so the
    # handler never sees records of a partition before its on_assign, nor after its on_revoke.

    def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._event_loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._event_loop).result(self.cfg.revoke_drain_s + 120.0)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if consumer is not self.consumer:
            return  # a replaced (wedged) consumer's, late (kafka_stuck): its books are gone
        # Assigned here rather than by the client after the callback, so that held partitions can be paused
        # before they deliver a record. Eager (classic) assignment passes the whole new assignment.
        if self.cfg.group_protocol == "consumer":
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        gained, hold, release = self._own.assign((tp.topic, tp.partition) for tp in partitions)
        REBALANCES.labels(self.cfg.service, "assigned").inc(len(partitions))
        if hold:
            REBALANCES.labels(self.cfg.service, "held").inc(len(hold))
            log.warning("partitions held: their index is not complete here", extra={"held": hold})
            consumer.pause([TopicPartition(t, p) for t, p in hold])
        # Under backpressure the new partitions wait like the others, but are paused only once they have
        # delivered a record (`_accept`), never here nor before that: a pause or resume right after an
        # assignment can overtake the assignment's fetch start inside librdkafka (the start is then dropped as
        # outdated), and the partition never fetches again, even after a resume, with no error anywhere
        # (librdkafka issues 2190 and 5591). A scale e2e run once sat on a parser lag of 18 for 10 minutes,
        # which this would explain (not proven: it did not recur in isolation).
        new = {(tp.topic, tp.partition) for tp in partitions} - self._own.held
        self._unstarted |= new
        self._note_assigned_for_stuck(new)
        if self._paused:
            self._pause_on_first |= new
        if release:
            self._reread(consumer, release)
        # Looked up after the poll returns, not here: confluent-kafka keeps one call state per client and
        # thread, and a blocking call made inside a callback clears the one consume() set, so the next
        # callback of that consume() aborts the process (CallState_get assertion, seen in the scale e2e).
        self._counts_pending |= {tp.topic for tp in partitions} - set(self._partition_counts)
        if self.cfg.mark_fresh:
            self._note_fresh_from(consumer, [tp for tp in partitions if tp.partition in gained]
                                  + [TopicPartition(t, p) for t, p in release])
        if gained:
            self._on_loop(self._until_applied("assign", self.handler.on_assign, gained))
        self.readiness.assigned(len(self._own.owned))

    async def _until_applied(self, what: str, call: Callable[[list[int]], Awaitable[None]],
                             partitions: list[int]) -> None:
        """Hand a rebalance to the handler, retrying it through an outage (the frontier loads a partition's
        hosts from Cassandra on assignment: a group that rebalances after a broker stall while Cassandra is
        away once stopped the frontier). The callback waits meanwhile, so no record of those partitions is
        handled before it. Handlers' rebalance callbacks are idempotent."""
        attempts = 0
        while True:
            try:
                await call(partitions)
                return
            except Exception as exc:
                if not is_transient(exc) or self._stopping:
                    raise
                log.warning("rebalance not applied, retrying", extra={"what": what, "partitions": partitions,
                                                                      "error": repr(exc)[:300]})
            self.readiness.beat()  # waiting on an engine, not stuck
            await asyncio.sleep(min(self.cfg.transient_backoff_s * 2 ** attempts, self.cfg.transient_backoff_max_s))
            attempts = min(attempts + 1, 5)

    async def _note_pending_counts(self, consumer: Consumer) -> None:
        """Look up the partition counts on_assign asked for (`_counts_pending`). The loop calls this after a
        poll returns, never from a callback (see the module docstring); in a worker thread: it blocks."""
        pending, self._counts_pending = self._counts_pending, set()
        await asyncio.to_thread(self._note_partition_counts, consumer, pending)

    def _note_partition_counts(self, consumer: Consumer, topics: set[str]) -> None:
        """Each assigned topic's partition count, so that a host-keyed record on another partition than its
        host's can be told apart. A failed lookup keeps the previous count (or none: key check only)."""
        for topic in topics:
            if topic in self._partition_counts:
                continue  # a topic's partition count does not shrink, and the loop does not follow growth
            try:
                meta = consumer.list_topics(topic, timeout=5.0).topics.get(topic)
            except Exception as exc:
                log.warning("metadata lookup failed", extra={"topic": topic, "error": str(exc)[:200]})
                continue
            if meta is not None and meta.partitions:
                self._partition_counts[topic] = len(meta.partitions)

    def _reread(self, consumer: Consumer, tps: list[TP]) -> None:
        """Held partitions whose index is now complete: read them again from their committed offsets (a
        record may have been fetched, and skipped, while they were held) and resume them."""
        committed = self._committed_apart([TopicPartition(t, p) for t, p in tps])
        for tp in committed:
            consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
        consumer.resume([TopicPartition(t, p) for t, p in tps])

    def _note_fresh_from(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Remember each new partition's log end: records from there on were produced after this
        assignment. The broker gives a partition to a new member only once the previous owner has handed
        it over (its records finished and committed) or was fenced (its session timed out), so any record
        another instance may have handled lies below it. A failed lookup leaves the partition without a
        mark: its records all count as maybe-replays."""
        if not partitions:
            return
        # One ListOffsets request per leader for all of them (timestamp -1: the log end), not a round trip
        # per partition: 64 get_watermark_offsets calls inside this callback took 26 s after a 30 s broker
        # freeze (the engine-fault e2e test), and the consumer polls nothing while the callback runs, so the
        # fetcher sat on its new assignment until its hosts' leases were nearly spent.
        try:
            ends = consumer.offsets_for_times([TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in partitions],
                                              timeout=5.0)
        except Exception as exc:
            log.warning("log end lookup failed", extra={"partitions": len(partitions), "error": str(exc)[:200]})
            ends = []
        got = {(tp.topic, tp.partition): tp.offset for tp in ends if tp.error is None and tp.offset >= 0}
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key in got:
                self._fresh_from[key] = got[key]
            else:
                self._fresh_from.pop(key, None)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._closing or consumer is not self.consumer:
            return  # run() already handed everything over
        lost, hold = self._own.revoke((tp.topic, tp.partition) for tp in partitions)
        REBALANCES.labels(self.cfg.service, "revoked").inc(len(partitions))
        if hold:
            REBALANCES.labels(self.cfg.service, "held").inc(len(hold))
            log.warning("partitions held: their index lost a partition", extra={"held": hold})
            consumer.pause([TopicPartition(t, p) for t, p in hold])
        t0 = time.monotonic()
        commits = self._on_loop(self._release(lost, self.cfg.revoke_drain_s)) if lost else []
        self._commit(commits)  # in the callback: the partitions are still ours until it returns
        DRAIN_SECONDS.labels(self.cfg.service).observe(time.monotonic() - t0)
        self._forget_partitions(consumer, partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """The group fenced this member (e.g. its session timed out): another may own the partitions
        already, so their work stops now, nothing is committed, and the handler lets them go."""
        if self._closing or consumer is not self.consumer:
            return
        lost, _hold = self._own.revoke((tp.topic, tp.partition) for tp in partitions)
        REBALANCES.labels(self.cfg.service, "lost").inc(len(partitions))
        if partitions:
            self._note_fenced()  # the orphan watch looks at the group soon (kafka_stuck)
        log.warning("partitions lost", extra={"partitions": len(partitions)})
        # Their offsets leave the books now, not when the release below has run: a periodic commit in
        # between would name partitions this member no longer has, and a synchronous commit of a member
        # that is rejoining waits for the rejoin, which waits for the poll the loop is not making while it
        # awaits that commit (a WARC writer stood still so after a 20 s Kafka freeze).
        gone = set(lost)
        dropped = [k for k in self._offsets if k[1] in gone] + [(tp.topic, tp.partition) for tp in partitions]
        for key in dropped:
            self._offsets.pop(key, None)
        if lost:
            self._on_loop(self._release(lost, drain_s=0.0, commit=False))
        self._forget_partitions(consumer, partitions)

    def _forget_partitions(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Partitions that left (revoked or lost) leave the loop's books, and leave unpaused: librdkafka
        keeps a partition's pause across its revocation, so one this member paused (backpressure, a hold)
        and is given back later would never fetch again, unknown to the loop, which resumes only what it
        paused since. A parser fenced while paused in an engine-fault e2e run (after a 30 s Kafka freeze,
        its group rejoined under the burst that followed the thaw) sat so on 48 partitions, its lag never
        drained. All of them are resumed, paused or not (held ones too, whose pause the books no longer
        know once revoked): a resume of a partition that is leaving overtakes nothing that matters, as its
        fetch stops anyway and a later assignment starts it anew."""
        if partitions:
            try:
                consumer.resume([TopicPartition(tp.topic, tp.partition) for tp in partitions])
            except Exception as exc:  # e.g. unknown to the client already: nothing left to resume
                log.warning("revoked partitions not resumed", extra={"partitions": len(partitions),
                                                                     "error": str(exc)[:200]})
        for tp in partitions:
            self._fresh_from.pop((tp.topic, tp.partition), None)
            self._forget_pause_state((tp.topic, tp.partition))
        self.readiness.assigned(len(self._own.owned))

    def _forget_pause_state(self, tp: TP) -> None:
        self._unstarted.discard(tp)
        self._pause_on_first.discard(tp)
        self._paused_tps.discard(tp)

    async def _release(self, indexes: list[int], drain_s: float, commit: bool = True) -> list[TopicPartition]:
        """Let partition indexes go (on the event loop): no new record of theirs starts; those in flight
        get ``drain_s`` to finish, then are cancelled; outputs are flushed; the handler's on_revoke runs.
        Returns the offsets to commit (the completed prefix of each of their partitions)."""
        gone = set(indexes)
        for key in [k for k in self._key_chains if k[0] in gone]:  # queued behind a key: the next owner's
            self._waiting -= len(self._key_chains[key])
            self._key_chains[key].clear()
        running = [t for i in gone for t in self._running.get(i, ())]
        commits: list[TopicPartition] = []
        tps = [tp for tp in self._offsets if tp[1] in gone]
        try:
            if running and drain_s > 0:
                await asyncio.wait(running, timeout=drain_s)
            if commit:
                # Taken before the flush: a record finishing during it may have outputs it did not wait for.
                points = self._commit_points(tps)
                if await self._flushed_async():  # raises if an output may be lost: then nothing is committed
                    commits = points
        except Exception:
            log.exception("handover of revoked partitions failed; their next owner replays them")
            commits = []
        finally:
            for tp in tps:  # records of these partitions that are still around are skipped from now on
                self._offsets.pop(tp, None)
            late = [t for t in running if not t.done()]
            for t in late:  # their offsets stay uncommitted: the next owner replays them
                t.cancel()
            if late:
                CANCELLED.labels(self.cfg.service).inc(len(late))
                log.warning("records cancelled at handover", extra={"records": len(late)})
                await asyncio.wait(late)
            try:
                await self.handler.on_revoke(sorted(gone))
            except Exception:
                log.exception("handler on_revoke failed")
        return commits

    # ------------------------------------------------------------------ partitions librdkafka never starts

    def _note_consumer_error(self, error: str) -> None:
        """A consumer error the loop saw. "Failed to fetch committed offsets": librdkafka (2.x, up to at
        least 2.16) leaves the partitions that OffsetFetch was for in its queried state when the broker
        answers with a request-level error such as NOT_COORDINATOR and no partitions (the coordinator moving
        or reloading, as after a broker freeze): it never retries, never starts their fetchers, and queries
        no partition assigned later either (librdkafka issue 5586). The consumer stays in its group, so
        nothing else notices: a frontier sat on 96 partitions of fetch results this way after a 30 s Kafka
        freeze, its hosts leased until each lease expired."""
        if "Failed to fetch committed offsets" in error:
            self._offset_fetch_failed_at = time.monotonic()

    async def _restart_unstarted_async(self, consumer: Consumer, settle_s: float = 2.0) -> None:
        """After a failed committed-offset fetch (once librdkafka's own retries had ``settle_s``): the
        assigned partitions that delivered no record since their assignment are assigned again, at their
        committed offsets read now, which starts their fetchers (what a restart of the process does). In a
        worker thread, after a poll returned (never in a callback: see the module docstring). A failure
        (the coordinator still away) is retried after ``settle_s`` again."""
        failed_at = self._offset_fetch_failed_at
        if failed_at is None or time.monotonic() - failed_at < settle_s:
            return
        self._offset_fetch_failed_at = None
        try:
            n = await asyncio.to_thread(self._restart_unstarted, consumer)
        except Exception as exc:
            log.warning("unstarted partitions not restarted, retrying", extra={"error": str(exc)[:300]})
            self._offset_fetch_failed_at = time.monotonic()
            return
        if n:
            REBALANCES.labels(self.cfg.service, "restarted").inc(n)
            log.warning("partitions restarted at their committed offsets after a failed offset fetch",
                        extra={"partitions": n})

    def _committed_apart(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        """The group's committed offsets of ``tps``, read by a client of its own that never joins the group:
        the member's own committed() timed out for minutes on end after the failed fetch (an engine-fault
        e2e run, a 30 s Kafka freeze: 25 tries, 10 s each, its hosts' results never read)."""
        probe = Consumer({"bootstrap.servers": self.cfg.bootstrap, "group.id": self.cfg.group_id,
                          "group.protocol": "classic", "enable.auto.commit": False})
        try:
            return list(probe.committed(tps, timeout=10.0))
        finally:
            probe.close()

    def _restart_unstarted(self, consumer: Consumer) -> int:
        """Re-assign the unstarted partitions (and the held ones, paused again) at their committed offsets
        (the beginning where none is committed: auto.offset.reset). A partition whose fetch had started
        but had no record yet restarts where it was: nothing is read twice or skipped. Returns how many."""
        held = sorted(self._own.held & self._own.assigned)
        tps = sorted((self._unstarted & self._own.assigned) | set(held))
        if not tps or self.cfg.group_protocol != "consumer":
            # Eager (classic) assignment has no incremental calls: a new assign() of the whole assignment
            # would restart the started partitions too, behind the records in flight. Not done there.
            return 0
        committed = self._committed_apart([TopicPartition(t, p) for t, p in tps])
        for tp in committed:
            if tp.error is not None:
                raise RuntimeError(f"committed offset of {tp.topic}[{tp.partition}]: {tp.error}")
        consumer.incremental_unassign([TopicPartition(t, p) for t, p in tps])
        consumer.incremental_assign([TopicPartition(tp.topic, tp.partition,
                                                    tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                                     for tp in committed])
        if held:
            consumer.pause([TopicPartition(t, p) for t, p in held])
        return len(tps)
