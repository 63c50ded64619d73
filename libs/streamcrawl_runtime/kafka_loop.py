"""The one Kafka run loop every service uses: poll → decode → handle → produce → flush → commit.

- Records are handled concurrently (asyncio) up to `max_in_flight`, but records with the same key
  (the host) are handled one after another, in offset order: per-host state stays consistent without
  locks (the ordering Confluent's Parallel Consumer calls KEY).
- Offsets are committed only for the contiguous prefix of completed records of each partition, and only
  after the producer has flushed every output of those records: at-least-once delivery. Handlers are
  idempotent, so a replay after a crash is harmless.
- A poison record goes to the dead-letter topic with the reason (streamcrawl_runtime.kafka_output), and the
  loop carries on: one that does not decode (malformed, missing or oversized fields, a newer
  schema_version), whose key or partition is not its payload's host's, whose handler raises PoisonMessage
  (or another non-transient error `max_attempts` times), or whose outputs are too large. A TransientError
  (an engine is down) is retried with back-off and never dead-lettered.
- Engine outages never block the event loop (flush and commit run in a worker thread: a flush waiting for
  a frozen broker must not hold up fetches in flight, whose timing politeness reads) nor end the loop (an
  undrained flush defers the commit; a handler's on_assign that fails on an engine is retried); a record
  not finished (an error while stopping) is never committed past.
- Under backpressure (too many records in flight) the assigned partitions are paused, then resumed.
- Rebalances are incremental, and a partition leaves an instance only once its work is handed over (records
  finished or cancelled, outputs flushed, offsets committed, the handler's on_revoke run): kafka_rebalance,
  whose callbacks run in consume()'s worker thread and wait for that work on the event loop.
- SIGTERM/SIGINT: stop polling, drain in-flight records, flush, commit, run on_revoke for every owned
  partition (the handler settles its state), leave the group: the partitions move at once, with no wait
  for a session timeout.
- Idle costs next to nothing: with no record in flight the loop blocks in the consumer's poll until a
  record arrives or the handler's next timed work is due (`Handler.tick_due`, e.g. the frontier's next
  politeness timer), at most `idle_wait_s`; it does not wake up on a fixed period to find nothing to do.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections import defaultdict, deque
from dataclasses import replace

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from prometheus_client import Counter, Gauge, Histogram
from pydantic import ValidationError
from streamcrawl_contracts.topics import Key, by_name
from streamcrawl_core.partition import key_mismatch

from streamcrawl_runtime.gctune import settle_heap
from streamcrawl_runtime.health import Readiness
from streamcrawl_runtime.kafka_output import LoopOutput, dead_letter
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_runtime.kafka_rebalance import CANCELLED as CANCELLED
from streamcrawl_runtime.kafka_rebalance import DRAIN_SECONDS as DRAIN_SECONDS
from streamcrawl_runtime.kafka_rebalance import REBALANCES as REBALANCES
from streamcrawl_runtime.kafka_rebalance import LoopRebalance
from streamcrawl_runtime.kafka_stuck import LoopStuckWatch
from streamcrawl_runtime.loop_config import LoopConfig as LoopConfig
from streamcrawl_runtime.loop_config import group_protocol_config as group_protocol_config
from streamcrawl_runtime.loop_offsets import PartitionOffsets, StallWatch
from streamcrawl_runtime.loop_ownership import TP, Ownership
from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.errors import PoisonMessage, is_transient
from streamcrawl_runtime.ports.loop import Handler, Record

log = logging.getLogger("streamcrawl.loop")

MESSAGES = Counter("streamcrawl_messages_total", "Records processed", ["service", "topic", "outcome"])
HANDLE_SECONDS = Histogram("streamcrawl_handle_seconds", "Handler time per record", ["service"])
IN_FLIGHT = Gauge("streamcrawl_in_flight", "Records being handled", ["service"])
# Per-record label lookups, done once per label values (see streamcrawl_runtime.metrics).
_MESSAGES = Children(MESSAGES)
_HANDLE_SECONDS, _IN_FLIGHT = Children(HANDLE_SECONDS), Children(IN_FLIGHT)


class RunLoop(LoopRebalance, LoopStuckWatch):
    """The loop; its rebalance callbacks and partition handover are LoopRebalance's (kafka_rebalance), its
    watch for partitions that stopped fetching LoopStuckWatch's (kafka_stuck)."""

    def __init__(self, config: LoopConfig, handler: Handler, producer: Producer | None = None,
                 readiness: Readiness | None = None) -> None:
        self.cfg = config
        self.handler = handler
        self.readiness = readiness or Readiness(need_assignment=False)
        self.producer = producer or host_keyed_producer(config.bootstrap, **{"linger.ms": config.linger_ms})
        self.consumer = self._new_consumer()
        self._commit_sent_at: float | None = None  # an asynchronous commit not answered yet (monotonic)
        # The periodic flush, when one runs: what it covers, to commit once it is done.
        self._flush_task: asyncio.Task[list[tuple[TopicPartition, PartitionOffsets]]] | None = None
        self._offsets: dict[TP, PartitionOffsets] = defaultdict(PartitionOffsets)
        self._key_chains: dict[tuple[int, str | None], deque[Record]] = {}
        self._waiting = 0  # records queued behind a key that is being handled (sum of the chains' lengths)
        self._tasks: set[asyncio.Task[None]] = set()
        self._running: dict[int, set[asyncio.Task[None]]] = defaultdict(set)  # partition index → its tasks
        self._stopping = False
        self._closing = False
        self._paused = False
        self._own = Ownership(list(config.subscriptions))
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self.output = LoopOutput(self.producer, config.service)
        self._produce = self.output.produce
        self._stall = StallWatch(config.stall_warn_s)
        self._init_rebalance()  # partition counts and fresh-from marks, kept by the rebalance callbacks
        self._init_stuck()
        # Topics whose key is the host: the archive topic's records name a host but are keyed by exchange
        # id. A topic outside the registry (a test's) is checked whenever its payload names a host.
        self._host_keyed = {t: _host_keyed(t) for t in config.subscriptions}
        self.handled = 0
        self._tick_due = getattr(handler, "tick_due", None)
        self._next_tick = 0.0  # wall clock (handlers' time): the first pass ticks

    # ------------------------------------------------------------------ lifecycle

    def _new_consumer(self) -> Consumer:
        """The group member's client (also a wedged one's replacement: kafka_stuck)."""
        config = self.cfg
        return Consumer({
            "bootstrap.servers": config.bootstrap,
            "group.id": config.group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # Also the rebalance timeout: how long a member may take to hand over revoked partitions.
            "max.poll.interval.ms": 300000,
            # The broker holds a fetch on quiet partitions for up to this long, but answers as soon as a
            # record is appended (fetch.min.bytes 1): produce → poll took 0.9 ms median at both 50 and 500 ms
            # on the local broker (docs/benchmarks-idle.md). So the wait costs no hop latency, while a short
            # one makes every idle consumer ask the broker 20 times a second (its CPU and ours). 1 s (was
            # 500 ms): an idle consumer's fetch names every partition of its topics (192 for the frontier);
            # what a longer wait can delay is a partition resumed while a fetch of idle ones is out.
            "fetch.wait.max.ms": 1000,
            **group_protocol_config(config.group_protocol),
            # The periodic commits are asynchronous; their results come here, in a later poll.
            "on_commit": self._on_commit,
            **config.consumer_overrides,
        })

    def _subscribe(self) -> None:
        self.consumer.subscribe(list(self.cfg.subscriptions), on_assign=self._on_assign, on_revoke=self._on_revoke,
                                on_lost=self._on_lost)

    def processed_upto(self, topic: str, partition: int) -> int | None:
        """Every record of the partition below this offset has been handled (None: nothing seen yet).
        A snapshot of handler state taken now covers at least the records below it."""
        tracker = self._offsets.get((topic, partition))
        if tracker is None:
            return None
        if tracker.pending:
            return min(tracker.pending)
        return tracker.highest_seen + 1 if tracker.highest_seen >= 0 else None

    def stop(self) -> None:
        self._stopping = True

    @property
    def _assigned(self) -> list[TopicPartition]:
        """The partitions the consumer has (what pause/resume act on), held ones included."""
        return [TopicPartition(t, p) for t, p in sorted(self._own.assigned)]

    async def run(self, install_signals: bool = True) -> None:
        self._event_loop = asyncio.get_running_loop()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._event_loop.add_signal_handler(sig, self.stop)
        self._subscribe()
        if self.cfg.settle_heap:
            settle_heap()  # the handler and its adapters are built by now: freeze them with the rest
        last_commit = last_stats = time.monotonic()
        self.readiness.running = True
        try:
            while not self._stopping:
                self.readiness.beat()
                self._backpressure()
                # Every poll runs in a worker thread: its wait does not hold up handlers in flight (a fetch
                # waiting for its not_before, a response arriving, whose timing the politeness delay is
                # computed from), and the rebalance callbacks it runs can wait for their work on this event
                # loop (see _on_revoke). It blocks until a record arrives, or until the loop has work of its
                # own (a tick, a commit), at most idle_wait_s when nothing is in flight and busy_wait_s when
                # something is (a finished handler may have work for the loop). Paused: a poll that returns
                # no record, for the callbacks, which run only in a poll, every busy_poll_s.
                busy = bool(self._tasks)
                cycle = self._paused or (busy and self.cfg.busy_wait_s <= 0)  # busy_wait_s 0: the old cycle
                if cycle:
                    msgs = await asyncio.to_thread(self.consumer.consume, self.cfg.poll_batch, 0.0)
                else:
                    wait = self._idle_wait(last_commit)
                    msgs = await asyncio.to_thread(self._poll_idle, min(wait, self.cfg.busy_wait_s) if busy else wait)
                if self._counts_pending:  # until known, records of these topics get the key check only
                    await self._note_pending_counts(self.consumer)
                for msg in msgs:
                    self._accept(msg)
                # After the batch is taken in, never before: a partition restarted at the loop's position
                # while records of it wait in the batch would deliver them twice (the first stuck watch
                # did that: 4 fetches repeated within 0.2 s in an engine-fault e2e run).
                if self._offset_fetch_failed_at is not None:  # librdkafka left partitions unstarted
                    await self._restart_unstarted_async(self.consumer)
                await self._watch_stuck_async(self.consumer)  # partitions that stopped fetching, silently
                at = time.time()
                if at >= self._tick_at(at):
                    await self._tick()
                self._flush_result()
                now = time.monotonic()
                if now - last_commit >= self.cfg.commit_interval_s:
                    if self._flush_task is None and self._uncommitted():
                        # In the background: a flush waiting for a frozen broker must not stop the polls, or
                        # the member hears of its fence and its new assignment only once the flush gives up
                        # (the frontier rebuilt its hosts 14 s after a 30 s Kafka freeze ended, so).
                        self._flush_task = asyncio.create_task(self._flush_for_commit())
                    last_commit = time.monotonic()
                if now - last_stats >= 30.0:  # a heartbeat that shows a stuck or saturated loop at a glance
                    last_stats = now
                    log.info("loop", extra={"in_flight": len(self._tasks), "handled": self.handled,
                                            "waiting_on_key": self._waiting, "paused": self._paused,
                                            "assigned": len(self._own.owned), "held": len(self._own.held)})
                    self._warn_stalled()
                await asyncio.sleep(self.cfg.busy_poll_s if cycle and not msgs else 0)
            log.info("draining", extra={"in_flight": len(self._tasks)})
            if self._flush_task is not None:
                await asyncio.wait([self._flush_task])
                self._flush_result()
            # Hand everything over: the records in flight finish, outputs are flushed, offsets committed and
            # the handler settles its partitions, all before the group hears that this member leaves.
            owned = sorted(self._own.owned)
            commits = await self._release(owned, drain_s=self.cfg.revoke_drain_s)
            self._commit(commits)
            self._closing = True  # the revoke callback of close() finds nothing left to do
            self._own.clear()
            close = getattr(self.handler, "close", None)
            if close is not None:  # e.g. dedup writes its final Bloom snapshots
                await close()
        finally:
            self.readiness.running = False
            self._closing = True
            await asyncio.to_thread(self.consumer.close)

    def _warn_stalled(self) -> None:
        for (topic, part), offset, pending, age_s in self._stall.look(self._offsets, time.monotonic()):
            log.warning("record not finishing: the partition's commit point is stuck", extra={
                "topic": topic, "partition": part, "offset": offset, "pending": pending, "for_s": age_s,
                "running": len(self._running.get(part, ())), "owned": part in self._own.owned})

    async def kafka_check(self) -> None:
        """A readiness probe: the broker answers a metadata request (in a worker thread: it blocks)."""
        await asyncio.to_thread(self.producer.list_topics, None, 2.0)

    def _backpressure(self) -> None:
        # Counted, not summed over the chains: this runs on every pass of the loop, and a fetcher
        # holds a chain per host it is working on.
        n = len(self._tasks) + self._waiting
        _IN_FLIGHT(self.cfg.service).set(n)
        if not self._paused and n >= self.cfg.max_in_flight:
            # Partitions that have not delivered a record since their assignment are paused at their first
            # record instead (see kafka_rebalance._on_assign: a pause may overtake their fetch start).
            active = self._own.assigned - self._own.held
            self._paused_tps = active - self._unstarted
            self._pause_on_first = active & self._unstarted
            if self._paused_tps:
                self.consumer.pause([TopicPartition(t, p) for t, p in sorted(self._paused_tps)])
            self._paused = True
            self._note_paused()
        elif self._paused and n <= self.cfg.resume_below:
            back = self._paused_tps & (self._own.assigned - self._own.held)
            if back:
                self.consumer.resume([TopicPartition(t, p) for t, p in sorted(back)])
            self._paused = False
            self._paused_tps = set()
            self._pause_on_first = set()

    # ------------------------------------------------------------------ records

    def _accept(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer error", extra={"error": str(err)})
                self._note_consumer_error(str(err))
            return
        key = msg.key()
        topic, part, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
        if part not in self._own.owned or (topic, part) in self._own.held:
            return  # fetched before its partition went or was held: its next reader reads it again
        if self._unstarted and (topic, part) in self._unstarted:
            self._unstarted.discard((topic, part))  # its fetch has started: pause and resume are safe now
            if (topic, part) in self._pause_on_first:  # assigned under backpressure
                self._pause_on_first.discard((topic, part))
                self._paused_tps.add((topic, part))
                self.consumer.pause([TopicPartition(topic, part)])
        fresh_from = self._fresh_from.get((topic, part))
        rec = Record(topic, part, offset, key.decode("utf-8", "replace") if isinstance(key, bytes) else key,
                     msg.value() or b"", fresh=fresh_from is not None and offset >= fresh_from)
        self._offsets[(rec.topic, rec.partition)].start(rec.offset)
        chain_key = (rec.partition, rec.key)
        chain = self._key_chains.get(chain_key)
        if chain is not None:  # same key already being handled: keep offset order
            chain.append(rec)
            self._waiting += 1
            return
        self._key_chains[chain_key] = deque()
        self._spawn(rec)

    def _spawn(self, rec: Record) -> None:
        task = asyncio.create_task(self._process(rec))
        self._tasks.add(task)
        running = self._running[rec.partition]
        running.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(running.discard)

    async def _process(self, rec: Record) -> None:
        done = False
        try:
            await self._handle_one(rec)
            done = True
        except Exception:
            # Not handled (an outage while stopping, or its dead letter could not be produced): its offset
            # stays pending, so nothing commits past it and a restart replays it. A cancelled record (its
            # partition went before it finished) is not done either.
            log.exception("record not finished", extra={"topic": rec.topic, "partition": rec.partition,
                                                         "offset": rec.offset})
        finally:
            tracker = self._offsets.get((rec.topic, rec.partition))
            if tracker is not None and done:
                tracker.finish(rec.offset)
            chain_key = (rec.partition, rec.key)
            chain = self._key_chains.get(chain_key)
            if chain and rec.partition in self._own.owned:
                self._waiting -= 1
                self._spawn(chain.popleft())
            else:
                self._key_chains.pop(chain_key, None)

    async def _handle_one(self, rec: Record) -> None:
        if (rec.topic, rec.partition) not in self._offsets:
            return  # the partition was revoked while this record waited: its new owner replays it
        model = self.cfg.subscriptions[rec.topic]
        try:
            message = model.model_validate_json(rec.value)
        except (ValidationError, ValueError) as exc:
            self._dead_letter(rec, f"undecodable {model.__name__}: {str(exc)[:500]}", exc)
            return
        host = getattr(message, "host", None)
        # a host-keyed record: per-host order and state need it under its host's key, on its partition
        if isinstance(host, str) and self._host_keyed[rec.topic]:
            problem = key_mismatch(rec.key, rec.partition, host, self._partition_counts.get(rec.topic))
            if problem is not None:
                self._dead_letter(rec, f"misplaced {model.__name__}: {problem}", PoisonMessage(problem))
                return
        attempts = 0
        while True:
            t0 = time.perf_counter()
            try:
                outputs = await self.handler.handle(rec, message)
            except Exception as exc:
                # The failed attempt may have had effects (the fetcher's request went out before its body
                # could be stored): the retry must run the checks a possible replay gets.
                rec = replace(rec, fresh=False) if rec.fresh else rec
                if is_transient(exc):
                    # An engine is down: wait and retry, never dead-letter, never commit past it.
                    _MESSAGES(self.cfg.service, rec.topic, "retry").inc()
                    log.warning("transient failure, retrying", extra={"topic": rec.topic, "error": repr(exc)[:300]})
                    await asyncio.sleep(min(self.cfg.transient_backoff_s * 2 ** min(attempts, 5),
                                            self.cfg.transient_backoff_max_s))
                    attempts += 1 if attempts < 5 else 0
                    if self._stopping and attempts > 2:
                        raise
                    continue
                attempts += 1
                if isinstance(exc, PoisonMessage) or attempts >= self.cfg.max_attempts:  # no retry can help
                    self._dead_letter(rec, f"handler failed {attempts}x: {exc!r}"[:1000], exc)
                    return
                continue
            _HANDLE_SECONDS(self.cfg.service).observe(time.perf_counter() - t0)
            try:
                self._produce(outputs)
            except (PoisonMessage, KafkaException) as exc:  # e.g. an output over the size limit: cannot heal
                self._dead_letter(rec, f"outputs not produced: {exc}"[:1000], exc)
                return
            _MESSAGES(self.cfg.service, rec.topic, "ok").inc()
            self.handled += 1
            return

    def _dead_letter(self, rec: Record, reason: str, exc: BaseException) -> None:
        _MESSAGES(self.cfg.service, rec.topic, "dead_letter").inc()
        log.error("dead letter", extra={"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                                        "reason": reason[:300]})
        self._produce([dead_letter(self.cfg.service, rec, reason, exc)])

    # ------------------------------------------------------------------ output and commit

    async def _tick(self) -> None:
        now = time.time()
        try:
            outputs = await self.handler.tick(now)
        except Exception as exc:
            log.warning("tick failed", extra={"error": repr(exc)[:300], "transient": is_transient(exc)})
            outputs = ()
            # An engine away: try again after the records' back-off, not on every pass of the loop.
            self._next_tick = now + max(self.cfg.tick_interval_s, self.cfg.transient_backoff_s)
        else:
            self._next_tick = now + self.cfg.tick_interval_s  # at most one tick per tick_interval_s
        try:
            self._produce(outputs)
        except (PoisonMessage, KafkaException) as exc:  # an output over the size limit: no record to blame
            log.error("tick outputs not produced", extra={"error": str(exc)[:300]})

    def _tick_at(self, now: float) -> float:
        """Wall-clock time of the next tick: the handler's next timed work (`tick_due`; records it handled
        since may have brought it forward), but never sooner than tick_interval_s after the last tick. A
        handler without `tick_due` is ticked every tick_interval_s. Asked with the ``now`` it is compared
        with: a handler whose work is due now answers ``now``, and a clock read twice (once here, once for
        the comparison) made that later than the comparison's, so such a tick never came, and the idle loop
        spun with zero-length polls (a frontier loading cold hosts sat so at 100% of a core for 7 minutes,
        dispatching nothing, in a fresh-clone CI run)."""
        if self._tick_due is None:
            return self._next_tick
        due: float = self._tick_due(now)
        return max(self._next_tick, due)

    def _idle_wait(self, last_commit: float) -> float:
        """How long an idle pass may block in poll: until the next tick, or a commit of finished records,
        at most idle_wait_s."""
        at = time.time()
        wait = min(self.cfg.idle_wait_s, self._tick_at(at) - at)
        if self.readiness.probing:
            # The poll blocks the event loop and a probe needs a loop turn per step: an idle fetcher's
            # Cassandra check timed out on every probe while each await waited out a 1 s poll.
            wait = min(wait, self.cfg.busy_poll_s)
        if self._flush_task is None and self._uncommitted():  # a flush running commits when it is done
            wait = min(wait, last_commit + self.cfg.commit_interval_s - time.monotonic())
        return max(0.0, wait)

    def _poll_idle(self, wait_s: float) -> list[Message]:
        """Block up to ``wait_s`` for the first record (poll returns as soon as one is there; consume() would
        wait out its whole timeout for a full batch), then gather what else arrives within busy_poll_s: a
        burst of records is handled in one pass instead of one pass each (each pass has a fixed cost), and a
        record waits no longer than it would in a busy loop."""
        first = self.consumer.poll(wait_s)
        if first is None:
            return []
        return [first, *self.consumer.consume(self.cfg.poll_batch - 1, timeout=self.cfg.busy_poll_s)]

    def _uncommitted(self) -> bool:
        """Outputs not yet flushed, or finished records whose offsets are not yet committed."""
        if len(self.producer) or self.output.delivery_error:
            return True
        return any(t.commit_point() is not None for t in self._offsets.values())

    def _commit_points(self, tps: list[TP] | None = None) -> list[TopicPartition]:
        """The offsets to commit now: the completed prefix of each (or each of ``tps``) partition."""
        points = ((tp, self._offsets[tp].commit_point()) for tp in (self._offsets if tps is None else tps))
        return [TopicPartition(t, p, point) for (t, p), point in points if point is not None]

    def _flushed(self, remaining: int) -> bool:
        if self.output.delivery_error:
            err, self.output.delivery_error = self.output.delivery_error, None
            # Nothing is committed: the records whose outputs may be lost are replayed after restart.
            raise RuntimeError(f"producer could not deliver ({remaining} left): {err}")
        if remaining:  # the broker is away (the producer retries until message.timeout.ms): commit later
            log.warning("producer not drained, commit deferred", extra={"remaining": remaining})
        return not remaining

    async def _flushed_async(self, flush_s: float = 30.0) -> bool:
        """Flush in a worker thread, so that a stalled broker leaves the event loop running; outputs
        produced meanwhile are held and sent after it. Whether everything produced before was delivered."""
        self.output.hold()
        try:
            remaining = await asyncio.to_thread(self.producer.flush, flush_s)
        finally:
            self.output.release()
        return self._flushed(remaining)

    def _flush_result(self) -> None:
        """Take the result of a periodic flush that has finished, in the loop's own pass, between polls:
        commit what it covers. A failed delivery raises here, which stops the service with nothing
        committed past it (its records are replayed)."""
        task = self._flush_task
        if task is None or not task.done():
            return
        self._flush_task = None
        points = task.result()
        # Each point with its partition's books: a partition lost during the flush (kafka_rebalance._on_lost),
        # or revoked and assigned here again, is not committed from points taken before.
        offsets = [tp for tp, books in points if self._offsets.get((tp.topic, tp.partition)) is books]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=True)
        except Exception as exc:  # e.g. not in a group right now: the next commit
            log.warning("commit failed", extra={"error": str(exc)[:300]})
            return
        self._commit_sent_at = time.monotonic()

    async def _flush_for_commit(self, flush_s: float = 30.0) -> list[tuple[TopicPartition, PartitionOffsets]]:
        """The periodic flush, as a task beside the loop's passes: flush (in a worker thread) and return
        what was complete before it, for `_flush_result` to commit asynchronously (the result comes to
        `_on_commit` in a later poll). The commit is sent from the loop's pass, never from here: no
        consumer call may overlap a poll, whose rebalance callbacks wait for work on this event loop. A
        synchronous commit once held a loop for good after a 30 s Kafka freeze: it waited for a coordinator
        that came back only to a member that polls, and the loop, waiting for the commit, did not poll,
        until max.poll.interval.ms put the member out of its group (the recrawl scheduler of an
        engine-fault e2e run; its lag never drained). One commit is outstanding at a time, for at most
        `commit_wait_s`: then the next is sent anyway."""
        if self._commit_sent_at is not None and time.monotonic() - self._commit_sent_at < self.cfg.commit_wait_s:
            return []
        points = [(tp, self._offsets[(tp.topic, tp.partition)]) for tp in self._commit_points()]
        if await self._flushed_async(flush_s):
            return points
        return []

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """A commit's result (in the thread of the poll that serves it; no Kafka call here): the offsets
        the broker took are the partitions' committed points from now on."""
        self._commit_sent_at = None
        if err is not None and err.code() != KafkaError._NO_OFFSET:
            log.warning("commit failed", extra={"error": str(err)[:300]})
        for tp in partitions or ():
            if tp.error is not None or tp.offset < 0:
                continue
            tracker = self._offsets.get((tp.topic, tp.partition))
            if tracker is not None and tp.offset > tracker.committed:
                tracker.committed = tp.offset

    def _commit(self, offsets: list[TopicPartition]) -> None:
        """Commit synchronously offsets whose records' outputs are flushed: at a handover (in the revoke
        callback, inside a poll) and when stopping, never from the loop's periodic commit."""
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as exc:  # e.g. a rebalance in progress, or the coordinator away: the next commit
            log.warning("commit failed", extra={"error": str(exc)[:300]})
            return
        for tp in offsets:
            tracker = self._offsets.get((tp.topic, tp.partition))
            if tracker is not None:
                tracker.committed = tp.offset


def _host_keyed(topic: str) -> bool:
    try:
        return by_name(topic).key is Key.HOST
    except KeyError:
        return True


def run_loop(config: LoopConfig, handler: Handler) -> None:
    """Entry for services: run until SIGTERM/SIGINT."""
    asyncio.run(RunLoop(config, handler).run())
