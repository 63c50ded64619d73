"""The one Kafka run loop every service uses: poll → decode → handle → produce → flush → commit.

- Records are handled concurrently (asyncio) up to `max_in_flight`, but records with the same key
  (the host) are handled one after another, in offset order: per-host state stays consistent without
  locks (the ordering Confluent's Parallel Consumer calls KEY).
- Offsets are committed only for the contiguous prefix of completed records of each partition, and only
  after the producer has flushed every output of those records: at-least-once delivery. Handlers are
  idempotent, so a replay after a crash is harmless.
- A record that fails to decode, or whose handler raises a non-transient error `max_attempts` times, goes
  to the dead-letter topic with the reason; the loop carries on. A TransientError (an engine is down) is
  retried with back-off and never dead-lettered.
- Under backpressure (too many records in flight) the assigned partitions are paused, then resumed.
- SIGTERM/SIGINT: stop polling, drain in-flight records, flush, commit, close.
- Idle costs next to nothing: with no record in flight the loop blocks in the consumer's poll until a
  record arrives or the handler's next timed work is due (`Handler.tick_due`, e.g. the frontier's next
  politeness timer), at most `idle_wait_s`; it does not wake up on a fixed period to find nothing to do.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import signal
import time
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from prometheus_client import Counter, Gauge, Histogram
from pydantic import ValidationError
from streamcrawl_contracts.messages import DeadLetter, Envelope
from streamcrawl_contracts.topics import DEAD_LETTER

from streamcrawl_runtime.gctune import settle_heap
from streamcrawl_runtime.health import Readiness
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_runtime.loop_offsets import PartitionOffsets
from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.errors import is_transient
from streamcrawl_runtime.ports.loop import Handler, Output, Record

log = logging.getLogger("streamcrawl.loop")

MESSAGES = Counter("streamcrawl_messages_total", "Records processed", ["service", "topic", "outcome"])
OUTPUTS = Counter("streamcrawl_outputs_total", "Records produced", ["service", "topic"])
HANDLE_SECONDS = Histogram("streamcrawl_handle_seconds", "Handler time per record", ["service"])
IN_FLIGHT = Gauge("streamcrawl_in_flight", "Records being handled", ["service"])
# Per-record label lookups, done once per label values (see streamcrawl_runtime.metrics).
_MESSAGES, _OUTPUTS = Children(MESSAGES), Children(OUTPUTS)
_HANDLE_SECONDS, _IN_FLIGHT = Children(HANDLE_SECONDS), Children(IN_FLIGHT)


@dataclass
class LoopConfig:
    service: str
    group_id: str
    subscriptions: dict[str, type[Envelope]]  # topic name → payload model
    bootstrap: str
    max_in_flight: int = 256
    resume_below: int = 128
    poll_batch: int = 500
    commit_interval_s: float = 0.5
    tick_interval_s: float = 0.2
    # How often a busy loop (handlers in flight) looks for new records. Each pass costs a consume()
    # call and the loop's bookkeeping; at 5 ms py-spy profiles put it at 6-13% of each service. New
    # records wait at most this long, which a hop-by-hop crawl absorbs (the frontier sends fetches
    # ahead of their not_before) and which no politeness timing depends on.
    busy_poll_s: float = 0.02
    # The longest an idle loop (nothing in flight) blocks in poll: a stop signal, the readiness probes
    # (asyncio tasks) and a handler without `tick_due` wait at most this long.
    idle_wait_s: float = 1.0
    max_attempts: int = 3
    transient_backoff_s: float = 1.0
    consumer_overrides: dict[str, Any] = field(default_factory=dict)
    # Look up each assigned partition's log end (one broker round trip per partition, at every
    # assignment) so records can be marked Record.fresh. Only for a handler that reads the flag.
    mark_fresh: bool = False
    # Freeze the start-up heap and collect less often (gctune.settle_heap) just before consuming.
    # For service processes; off by default so a test process building loops keeps the defaults.
    settle_heap: bool = False


class RunLoop:
    def __init__(self, config: LoopConfig, handler: Handler, producer: Producer | None = None,
                 readiness: Readiness | None = None) -> None:
        self.cfg = config
        self.handler = handler
        self.readiness = readiness or Readiness(need_assignment=False)
        self.producer = producer or host_keyed_producer(config.bootstrap)
        self.consumer = Consumer({
            "bootstrap.servers": config.bootstrap,
            "group.id": config.group_id,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            # range: partition i of every subscribed topic goes to the same member (co-partitioning).
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 2000,
            "max.poll.interval.ms": 300000,
            # The broker holds a fetch on quiet partitions for up to this long, but answers as soon as a
            # record is appended (fetch.min.bytes 1): produce → poll took 0.9 ms median at both 50 and 500 ms
            # on the local broker (docs/benchmarks-idle.md). So the wait costs no hop latency, while a short
            # one makes every idle consumer ask the broker 20 times a second (its CPU and ours).
            "fetch.wait.max.ms": 500,
            **config.consumer_overrides,
        })
        self._offsets: dict[tuple[str, int], PartitionOffsets] = defaultdict(PartitionOffsets)
        self._fresh_from: dict[tuple[str, int], int] = {}  # (topic, partition) → log end when assigned
        self._key_chains: dict[tuple[int, str | None], deque[Record]] = {}
        self._waiting = 0  # records queued behind a key that is being handled (sum of the chains' lengths)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = False
        self._paused = False
        self._assigned: list[TopicPartition] = []
        self._pending_assign: list[int] = []
        self._pending_revoke: list[int] = []
        self._delivery_error: str | None = None
        self.handled = 0
        self._tick_due = getattr(handler, "tick_due", None)
        self._next_tick = 0.0  # wall clock (handlers' time): the first pass ticks

    # ------------------------------------------------------------------ lifecycle

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

    async def run(self, install_signals: bool = True) -> None:
        if install_signals:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
        self.consumer.subscribe(list(self.cfg.subscriptions), on_assign=self._on_assign, on_revoke=self._on_revoke)
        if self.cfg.settle_heap:
            settle_heap()  # the handler and its adapters are built by now: freeze them with the rest
        last_commit = last_stats = time.monotonic()
        self.readiness.running = True
        try:
            while not self._stopping:
                self.readiness.beat()
                await self._apply_rebalance()
                self._backpressure()
                # Polling blocks the event loop while it waits; with handlers in flight (a fetch waiting
                # for its not_before, a response arriving) that wait would delay them, and inflate the
                # fetch times the politeness delay is computed from. So poll without waiting when busy and
                # let the asyncio sleep below (which timers and I/O can interrupt) do the waiting. With
                # nothing in flight nothing else needs the loop: block until a record or the next tick.
                busy = bool(self._tasks)
                if self._paused:
                    msgs: list[Message] = []
                elif busy:
                    msgs = self.consumer.consume(self.cfg.poll_batch, timeout=0.0)
                else:
                    msgs = self._poll_idle(self._idle_wait(last_commit))
                # A rebalance inside the poll: the handler sees it before any record of the new assignment.
                await self._apply_rebalance()
                for msg in msgs:
                    self._accept(msg)
                if time.time() >= self._tick_at():
                    await self._tick()
                now = time.monotonic()
                if now - last_commit >= self.cfg.commit_interval_s:
                    if self._uncommitted():
                        self._flush_and_commit()
                    last_commit = now
                if now - last_stats >= 30.0:  # a heartbeat that shows a stuck or saturated loop at a glance
                    last_stats = now
                    log.info("loop", extra={"in_flight": len(self._tasks), "handled": self.handled,
                                            "waiting_on_key": self._waiting,
                                            "paused": self._paused, "assigned": len(self._assigned)})
                await asyncio.sleep(0 if msgs or not (busy or self._paused) else self.cfg.busy_poll_s)
            log.info("draining", extra={"in_flight": len(self._tasks)})
            if self._tasks:
                await asyncio.wait(self._tasks, timeout=60)
            self._flush_and_commit()
            close = getattr(self.handler, "close", None)
            if close is not None:  # e.g. dedup writes its final Bloom snapshots
                await close()
        finally:
            self.readiness.running = False
            self.consumer.close()

    async def kafka_check(self) -> None:
        """A readiness probe: the broker answers a metadata request (in a worker thread: it blocks)."""
        await asyncio.to_thread(self.producer.list_topics, None, 2.0)

    # ------------------------------------------------------------------ rebalance

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Eager (range) assignment: `partitions` is the whole new assignment. consumer.assignment() is
        # still empty inside this callback, which left pause/resume with nothing to act on.
        self._assigned = list(partitions)
        self.readiness.assigned(len({p.partition for p in partitions}))
        self._pending_assign.extend(sorted({p.partition for p in partitions}))
        self._paused = False
        if self.cfg.mark_fresh:
            self._note_fresh_from(consumer, partitions)

    def _note_fresh_from(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """Remember each new partition's log end: records from there on were produced after this
        assignment. Eager assignment revokes every previous owner first (a dead one is only replaced
        after its session timed out), so any record another instance may have handled lies below it.
        A failed lookup leaves the partition without a mark: its records all count as maybe-replays."""
        for tp in partitions:
            try:
                _low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition),
                                                            timeout=5.0, cached=False)
            except Exception as exc:
                log.warning("watermark lookup failed", extra={"topic": tp.topic, "partition": tp.partition,
                                                              "error": str(exc)[:200]})
                self._fresh_from.pop((tp.topic, tp.partition), None)
                continue
            self._fresh_from[(tp.topic, tp.partition)] = high

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Commit what is done before the partitions move, then forget their trackers: the new owner
        # replays anything not committed (at-least-once; handlers are idempotent).
        try:
            self._flush_and_commit()
        except Exception:  # a failed commit only means a longer replay
            log.warning("commit on revoke failed", exc_info=True)
        for tp in partitions:
            self._offsets.pop((tp.topic, tp.partition), None)
            self._fresh_from.pop((tp.topic, tp.partition), None)
        self._pending_revoke.extend(sorted({p.partition for p in partitions}))
        self._assigned = [tp for tp in self._assigned if tp not in partitions]
        self.readiness.assigned(len({tp.partition for tp in self._assigned}))

    async def _apply_rebalance(self) -> None:
        if self._pending_revoke:
            revoked, self._pending_revoke = self._pending_revoke, []
            await self.handler.on_revoke(sorted(set(revoked)))
        if self._pending_assign:
            assigned, self._pending_assign = self._pending_assign, []
            await self.handler.on_assign(sorted(set(assigned)))

    def _backpressure(self) -> None:
        # Counted, not summed over the chains: this runs on every pass of the loop, and a fetcher
        # holds a chain per host it is working on.
        n = len(self._tasks) + self._waiting
        _IN_FLIGHT(self.cfg.service).set(n)
        if not self._paused and n >= self.cfg.max_in_flight and self._assigned:
            self.consumer.pause(self._assigned)
            self._paused = True
        elif self._paused and n <= self.cfg.resume_below:
            if self._assigned:
                self.consumer.resume(self._assigned)
            self._paused = False

    # ------------------------------------------------------------------ records

    def _accept(self, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                log.warning("consumer error", extra={"error": str(err)})
            return
        key = msg.key()
        topic, part, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
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
        task.add_done_callback(self._tasks.discard)

    async def _process(self, rec: Record) -> None:
        try:
            await self._handle_one(rec)
        finally:
            tracker = self._offsets.get((rec.topic, rec.partition))
            if tracker is not None:
                tracker.finish(rec.offset)
            chain_key = (rec.partition, rec.key)
            chain = self._key_chains.get(chain_key)
            if chain:
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
                    await asyncio.sleep(self.cfg.transient_backoff_s * min(2 ** min(attempts, 5), 30))
                    attempts += 1 if attempts < 5 else 0
                    if self._stopping and attempts > 2:
                        raise
                    continue
                attempts += 1
                if attempts >= self.cfg.max_attempts:
                    self._dead_letter(rec, f"handler failed {attempts}x: {exc!r}"[:1000], exc)
                    return
                continue
            _HANDLE_SECONDS(self.cfg.service).observe(time.perf_counter() - t0)
            self._produce(outputs)
            _MESSAGES(self.cfg.service, rec.topic, "ok").inc()
            self.handled += 1
            return

    def _dead_letter(self, rec: Record, reason: str, exc: BaseException) -> None:
        _MESSAGES(self.cfg.service, rec.topic, "dead_letter").inc()
        log.error("dead letter", extra={"topic": rec.topic, "partition": rec.partition, "offset": rec.offset,
                                        "reason": reason[:300]})
        dl = DeadLetter(service=self.cfg.service, source_topic=rec.topic, partition=rec.partition,
                        offset=rec.offset, key=rec.key, payload_b64=base64.b64encode(rec.value[:1_000_000]).decode(),
                        reason=reason, error_type=type(exc).__name__)
        self._produce([Output(DEAD_LETTER, rec.key, dl)])

    # ------------------------------------------------------------------ output and commit

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self._delivery_error = str(err)

    def _produce(self, outputs: Sequence[Output]) -> None:
        for out in outputs:
            payload = out.value.model_dump_json().encode()
            while True:
                try:
                    self.producer.produce(out.topic.name, value=payload,
                                          key=out.key.encode() if out.key is not None else None,
                                          on_delivery=self._delivered)
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    self.producer.poll(0.1)
            _OUTPUTS(self.cfg.service, out.topic.name).inc()
        self.producer.poll(0)

    async def _tick(self) -> None:
        now = time.time()
        try:
            outputs = await self.handler.tick(now)
        except Exception as exc:
            log.warning("tick failed", extra={"error": repr(exc)[:300], "transient": is_transient(exc)})
            outputs = ()
        finally:
            self._next_tick = now + self.cfg.tick_interval_s  # at most one tick per tick_interval_s
        self._produce(outputs)

    def _tick_at(self) -> float:
        """Wall-clock time of the next tick: the handler's next timed work (`tick_due`; records it handled
        since may have brought it forward), but never sooner than tick_interval_s after the last tick. A
        handler without `tick_due` is ticked every tick_interval_s."""
        if self._tick_due is None:
            return self._next_tick
        due: float = self._tick_due(time.time())
        return max(self._next_tick, due)

    def _idle_wait(self, last_commit: float) -> float:
        """How long an idle pass may block in poll: until the next tick, or a commit of finished records,
        at most idle_wait_s."""
        wait = min(self.cfg.idle_wait_s, self._tick_at() - time.time())
        if self._uncommitted():
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
        if len(self.producer) or self._delivery_error:
            return True
        return any(t.commit_point() is not None for t in self._offsets.values())

    def _flush_and_commit(self) -> None:
        remaining = self.producer.flush(30)
        if remaining or self._delivery_error:
            err, self._delivery_error = self._delivery_error, None
            # Nothing is committed: the records whose outputs may be lost are replayed after restart.
            raise RuntimeError(f"producer could not deliver ({remaining} left): {err}")
        offsets = []
        for (topic, part), tracker in self._offsets.items():
            point = tracker.commit_point()
            if point is not None:
                offsets.append((TopicPartition(topic, part, point), tracker))
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=[tp for tp, _ in offsets], asynchronous=False)
        except Exception as exc:  # e.g. a rebalance in progress: the next commit covers it
            log.warning("commit failed", extra={"error": str(exc)[:300]})
            return
        for tp, tracker in offsets:
            tracker.committed = tp.offset


def run_loop(config: LoopConfig, handler: Handler) -> None:
    """Entry for services: run until SIGTERM/SIGINT."""
    asyncio.run(RunLoop(config, handler).run())
