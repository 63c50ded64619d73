"""The shared run loop against the real broker: keyed round trip, partitioning that matches
streamcrawl_core.partition_for, commit only after outputs are flushed, poison → dead-letter topic."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Sequence

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from streamcrawl_contracts.messages import Envelope, SeedMessage, UrlMessage
from streamcrawl_contracts.topics import DEAD_LETTER, Key, TopicSpec
from streamcrawl_core.partition import partition_for
from streamcrawl_runtime.kafka_loop import REBALANCES, LoopConfig, RunLoop
from streamcrawl_runtime.kafka_producer import host_keyed_config
from streamcrawl_runtime.ports.errors import TransientError
from streamcrawl_runtime.ports.loop import Output, Record

from tests.integration.kafka_helpers import make_topics, read_messages

pytestmark = pytest.mark.integration
PARTS = 4


class Echo:
    """Turns each seed into a UrlMessage on the output topic; raises on a seed for host 'boom.test'."""

    def __init__(self, out: TopicSpec) -> None:
        self.out = out
        self.assigned: list[int] = []

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        assert isinstance(message, SeedMessage)
        host = message.url.split("/")[2]
        if host == "boom.test":
            raise ValueError("handler refuses this seed")
        return [Output(self.out, host, UrlMessage(url=message.url, host=host, url_fp=1))]

    async def on_assign(self, partitions: list[int]) -> None:
        self.assigned.extend(partitions)

    async def on_revoke(self, partitions: list[int]) -> None:
        pass

    async def tick(self, now: float) -> Sequence[Output]:
        return []


def test_round_trip_partitioning_commit_and_dead_letter(stack, unique):
    src, dst = f"t-src-{unique}", f"t-dst-{unique}"
    make_topics(stack.kafka_bootstrap, src, dst, partitions=PARTS)
    out_spec = TopicSpec(dst, Key.HOST, 3600_000, "test")
    hosts = [f"h{i}.{unique}.test" for i in range(40)]

    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})
    for h in hosts:
        prod.produce(src, key=h.encode(), value=SeedMessage(url=f"http://{h}/").model_dump_json().encode())
    prod.produce(src, key=b"x", value=b"\x00not json")  # undecodable
    prod.produce(src, key=b"boom.test", value=SeedMessage(url="http://boom.test/").model_dump_json().encode())
    assert prod.flush(30) == 0

    group = f"g-{unique}"
    handler = Echo(out_spec)
    loop = RunLoop(LoopConfig(service="test", group_id=group, subscriptions={src: SeedMessage},
                              bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2, max_attempts=2), handler)

    live_assignment: list[int] = []

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        deadline = time.time() + 60
        while loop.handled < len(hosts) and time.time() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)
        live_assignment.extend(tp.partition for tp in loop._assigned)  # what pause/resume acts on
        loop.stop()
        await task

    asyncio.run(drive())
    assert sorted(handler.assigned) == list(range(PARTS))
    assert sorted(live_assignment) == list(range(PARTS))

    out = read_messages(stack.kafka_bootstrap, dst, len(hosts), timeout=30)
    assert sorted(m.key().decode() for m in out) == sorted(hosts)
    for m in out:  # the keyed producer's partition is exactly partition_for(host, n)
        assert m.partition() == partition_for(m.key().decode(), PARTS)
        assert json.loads(m.value())["url"] == f"http://{m.key().decode()}/"

    # everything was handled, so everything is committed, poison included
    c = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": group})
    committed = c.committed([TopicPartition(src, p) for p in range(PARTS)], timeout=10)
    ends = [c.get_watermark_offsets(TopicPartition(src, p), timeout=10)[1] for p in range(PARTS)]
    c.close()
    assert [tp.offset for tp in committed] == ends

    dead = [json.loads(m.value()) for m in read_messages(stack.kafka_bootstrap, DEAD_LETTER.name, 10_000, timeout=10)]
    mine = [d for d in dead if d["source_topic"] == src]
    reasons = sorted(d["reason"].split(" ")[0] for d in mine)
    assert reasons == ["handler", "undecodable"], mine


class Freshness(Echo):
    """Remembers each record's ``fresh`` flag by host (of its last attempt, and of every attempt); the first
    attempt at a host in ``flaky`` fails as if an engine were down."""

    def __init__(self, out: TopicSpec, flaky: frozenset[str] = frozenset()) -> None:
        super().__init__(out)
        self.fresh: dict[str, bool] = {}
        self.attempts: dict[str, list[bool]] = {}
        self.flaky = flaky

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        assert isinstance(message, SeedMessage)
        host = message.url.split("/")[2]
        self.attempts.setdefault(host, []).append(record.fresh)
        if host in self.flaky and len(self.attempts[host]) == 1:
            raise TransientError("engine down")
        self.fresh[host] = record.fresh
        return []


def test_records_produced_after_the_assignment_are_fresh(stack, unique):
    """What was in the log when the partitions were assigned may have been handled by a previous owner
    (fresh=False); what is produced afterwards cannot have been (fresh=True), except on a retry after a
    transient failure: the failed attempt may have done part of the work."""
    src, dst = f"t-fresh-{unique}", f"t-fresh-out-{unique}"
    make_topics(stack.kafka_bootstrap, src, dst, partitions=PARTS)
    flaky = frozenset({f"new0.{unique}.test", f"new1.{unique}.test"})
    handler = Freshness(TopicSpec(dst, Key.HOST, 3600_000, "test"), flaky)
    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})

    def send(hosts: list[str]) -> None:
        for h in hosts:
            prod.produce(src, key=h.encode(), value=SeedMessage(url=f"http://{h}/").model_dump_json().encode())
        assert prod.flush(30) == 0

    old = [f"old{i}.{unique}.test" for i in range(12)]
    new = [f"new{i}.{unique}.test" for i in range(12)]
    send(old)
    loop = RunLoop(LoopConfig(service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage},
                              bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2, mark_fresh=True,
                              transient_backoff_s=0.05), handler)

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        deadline = time.time() + 60
        while len(handler.fresh) < len(old) and time.time() < deadline:
            await asyncio.sleep(0.2)
        send(new)
        while len(handler.fresh) < len(old) + len(new) and time.time() < deadline:
            await asyncio.sleep(0.2)
        loop.stop()
        await task

    asyncio.run(drive())
    assert {h: handler.fresh.get(h) for h in old} == dict.fromkeys(old, False)
    assert {h: handler.fresh.get(h) for h in new} == {h: h not in flaky for h in new}
    assert {h: handler.attempts[h] for h in flaky} == {h: [True, False] for h in flaky}


def _six_hosts_a_partition(bootstrap: str, src: str, dst: str, unique: str) -> tuple[
        Echo, list[str], dict[int, list[str]], Callable[[list[str]], None]]:
    """The two topics; an Echo handler that notes each seed's URL (the list returned); six hosts for each
    partition of ``src``; and a function that sends one seed for each host given, flushed."""
    make_topics(bootstrap, src, dst, partitions=PARTS)
    handler = Echo(TopicSpec(dst, Key.HOST, 3600_000, "test"))
    seen: list[str] = []
    inner = handler.handle

    async def counting(record: Record, message: Envelope) -> Sequence[Output]:
        assert isinstance(message, SeedMessage)
        seen.append(message.url)
        return await inner(record, message)

    handler.handle = counting  # type: ignore[method-assign]
    by_part: dict[int, list[str]] = {p: [] for p in range(PARTS)}
    i = 0
    while min(len(v) for v in by_part.values()) < 6:
        h = f"h{i}.{unique}.test"
        by_part[partition_for(h, PARTS)].append(h)
        i += 1
    prod = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})

    def send(hosts: list[str]) -> None:
        for h in hosts:
            prod.produce(src, key=h.encode(), value=SeedMessage(url=f"http://{h}/").model_dump_json().encode())
        assert prod.flush(30) == 0

    return handler, seen, by_part, send


def test_unstarted_partitions_restart_at_their_committed_offsets(stack, unique):
    """After a failed committed-offset fetch (librdkafka 5586 leaves such partitions unstarted for good), the
    loop assigns its unstarted partitions again at their committed offsets, outside any rebalance: on the
    real broker the call succeeds, their records then flow, nothing is handled twice or skipped, and the
    periodic (asynchronous) commits reach the log end while the loop runs."""
    src, dst = f"t-restart-{unique}", f"t-restart-out-{unique}"
    handler, seen, by_part, send = _six_hosts_a_partition(stack.kafka_bootstrap, src, dst, unique)

    first = by_part[0][:3] + by_part[1][:3]  # partitions 2 and 3 get nothing yet: they stay unstarted
    later = by_part[0][3:6] + by_part[1][3:6] + by_part[2][:6] + by_part[3][:6]
    send(first)
    loop = RunLoop(LoopConfig(service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage},
                              bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2), handler)
    restarted: list[set[tuple[str, int]]] = []
    committed_live: list[int] = []
    check = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": f"g-{unique}"})
    counter = REBALANCES.labels("test", "restarted")
    before = counter._value.get()

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        deadline = time.time() + 60
        while len(seen) < len(first) and time.time() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)
        restarted.append(set(loop._unstarted))
        loop._note_consumer_error('Failed to fetch committed offsets for 0 partition(s) in group "g": '
                                  'Broker: Not coordinator')
        while loop._offset_fetch_failed_at is not None and time.time() < deadline:
            await asyncio.sleep(0.2)
        send(later)
        while len(seen) < len(first) + len(later) and time.time() < deadline:
            await asyncio.sleep(0.2)
        ends = [check.get_watermark_offsets(TopicPartition(src, p), timeout=10)[1] for p in range(PARTS)]
        while time.time() < deadline:  # committed by the periodic commits, before any stop
            got = [tp.offset for tp in check.committed([TopicPartition(src, p) for p in range(PARTS)], timeout=10)]
            if got == ends:
                committed_live.extend(got)
                break
            await asyncio.sleep(0.3)
        loop.stop()
        await task

    asyncio.run(drive())
    check.close()
    assert restarted == [{(src, 2), (src, 3)}]
    assert counter._value.get() - before == 2
    assert sorted(seen) == sorted(f"http://{h}/" for h in first + later)  # each once
    assert committed_live == [6, 6, 6, 6]


class GatedFlush(Producer):
    """The real producer, whose first flush waits for ``gate`` first: a broker that does not answer."""

    def __init__(self, conf: dict[str, object], gate: threading.Event) -> None:
        super().__init__(conf)
        self.gate = gate
        self.flushes = 0

    def flush(self, timeout: float = -1) -> int:
        self.flushes += 1
        if self.flushes == 1:
            self.gate.wait(30)
        return super().flush(timeout)


def test_a_flush_that_waits_does_not_hold_up_polls_or_handlers(stack, unique):
    """The periodic flush runs beside the loop: while it waits, records keep being polled and handled
    (and a rebalance callback would run); nothing is committed before its outputs are flushed."""
    src, dst = f"t-src-{unique}", f"t-dst-{unique}"
    make_topics(stack.kafka_bootstrap, src, dst, partitions=PARTS)
    out_spec = TopicSpec(dst, Key.HOST, 3600_000, "test")
    first = [f"a{i}.{unique}.test" for i in range(20)]
    second = [f"b{i}.{unique}.test" for i in range(20)]
    seeder = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})

    def seed(hosts: list[str]) -> None:
        for h in hosts:
            seeder.produce(src, key=h.encode(), value=SeedMessage(url=f"http://{h}/").model_dump_json().encode())
        assert seeder.flush(30) == 0

    def committed_total(group: str) -> int:
        c = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": group})
        got = c.committed([TopicPartition(src, p) for p in range(PARTS)], timeout=10)
        c.close()
        return sum(max(tp.offset, 0) for tp in got)

    gate = threading.Event()
    group = f"g-{unique}"
    producer = GatedFlush(host_keyed_config(stack.kafka_bootstrap), gate)
    loop = RunLoop(LoopConfig(service="test", group_id=group, subscriptions={src: SeedMessage},
                              bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2), Echo(out_spec),
                   producer=producer)
    seen: dict[str, object] = {}

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        seed(first)
        deadline = time.time() + 60
        while (loop.handled < len(first) or producer.flushes < 1) and time.time() < deadline:
            await asyncio.sleep(0.1)
        seen["flushing_after_first"] = producer.flushes == 1 and not gate.is_set()
        await asyncio.to_thread(seed, second)  # while the first flush still waits
        deadline = time.time() + 20
        while loop.handled < len(first) + len(second) and time.time() < deadline:
            await asyncio.sleep(0.1)
        seen["handled_while_flushing"] = loop.handled
        seen["committed_while_flushing"] = await asyncio.to_thread(committed_total, group)
        gate.set()
        deadline = time.time() + 30
        while time.time() < deadline:
            if await asyncio.to_thread(committed_total, group) == len(first) + len(second):
                break
            await asyncio.sleep(0.3)
        loop.stop()
        await task

    asyncio.run(drive())
    assert seen["flushing_after_first"]
    assert seen["handled_while_flushing"] == len(first) + len(second)
    assert seen["committed_while_flushing"] == 0  # the only flush so far had not returned
    assert committed_total(group) == len(first) + len(second)
    out = read_messages(stack.kafka_bootstrap, dst, len(first) + len(second), timeout=30)
    assert sorted(m.key().decode() for m in out) == sorted(first + second)


@pytest.mark.parametrize("watch", [True, False])
def test_a_partition_that_stops_fetching_silently_is_restarted(stack, unique, watch):
    """A partition librdkafka stops fetching without a word (here: paused behind the loop's back, as a pause
    kept across a revocation or one racing a fetch start leaves it) is found by the stuck-partition watch
    and restarted where the loop was: a started partition (2) and one that never delivered (3) both
    deliver every record, each once. Without the watch (stuck_check_s 0) their records never come."""
    src, dst = f"t-stuck-{unique}", f"t-stuck-out-{unique}"
    handler, seen, by_part, send = _six_hosts_a_partition(stack.kafka_bootstrap, src, dst, unique)

    first = by_part[0][:3] + by_part[1][:3] + by_part[2][:3]  # partition 3 gets nothing yet: never started
    later = by_part[0][3:6] + by_part[1][3:6] + by_part[2][3:6] + by_part[3][:6]
    send(first)
    loop = RunLoop(LoopConfig(service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage},
                              bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2,
                              stuck_check_s=1.0 if watch else 0.0), handler)

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        deadline = time.time() + 60
        while len(seen) < len(first) and time.time() < deadline:
            await asyncio.sleep(0.2)
        loop.consumer.pause([TopicPartition(src, 2), TopicPartition(src, 3)])  # behind the loop's back
        send(later)
        end = time.time() + (30 if watch else 8)
        while len(seen) < len(first) + len(later) and time.time() < end:
            await asyncio.sleep(0.2)
        loop.stop()
        await task

    asyncio.run(drive())
    want = sorted(f"http://{h}/" for h in first + later)
    if watch:
        assert sorted(seen) == want  # each once: restarted where the loop was
        assert loop.stuck_restarts >= 2
    else:
        assert sorted(seen) == sorted(f"http://{h}/" for h in first + by_part[0][3:6] + by_part[1][3:6])
        assert loop.stuck_restarts == 0


class _NeverStartsAfterAssign(RunLoop):
    """A loop whose partition 3 never fetches after its first assignment (paused behind the loop's back right
    there, as a pause racing the fetch start leaves it: librdkafka issues 2190, 5591)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.froze: list[TopicPartition] = []

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        super()._on_assign(consumer, partitions)
        if not self.froze:
            self.froze = [tp for tp in partitions if tp.partition == 3]
            consumer.pause([TopicPartition(tp.topic, tp.partition) for tp in self.froze])


@pytest.mark.parametrize("early", [2.0, 0.0], ids=["early-look", "no-early-look"])
def test_a_partition_that_never_starts_after_an_assignment_is_restarted_soon(stack, unique, early):
    """A partition whose fetch never starts after its assignment is looked at stuck_after_assign_s after it
    and restarted, long before the next regular check (60 s here): its records all come, each once. Without
    the early look (0) they wait for that check."""
    src, dst = f"t-early-{unique}", f"t-early-out-{unique}"
    handler, seen, by_part, send = _six_hosts_a_partition(stack.kafka_bootstrap, src, dst, unique)
    hosts = [h for p in range(PARTS) for h in by_part[p][:3]]
    send(hosts)
    loop = _NeverStartsAfterAssign(LoopConfig(
        service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage}, bootstrap=stack.kafka_bootstrap,
        commit_interval_s=0.2, stuck_check_s=60.0, stuck_after_assign_s=early), handler)

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        end = time.time() + 15
        while len(seen) < len(hosts) and time.time() < end:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # a record delivered twice would come now
        loop.stop()
        await task

    asyncio.run(drive())
    assert loop.froze, "partition 3 was never assigned"
    if early:
        assert sorted(seen) == sorted(f"http://{h}/" for h in hosts)
        assert loop.stuck_restarts == 1
    else:
        assert sorted(seen) == sorted(f"http://{h}/" for p in range(PARTS) if p != 3 for h in by_part[p][:3])
        assert loop.stuck_restarts == 0


class _WedgedFirstConsumer(RunLoop):
    """A loop whose first consumer's stuck check fails as the wedged WARC writer's did (an engine-fault e2e
    run: "Local: Unknown partition", every check, for good); a replacement's checks are the real ones."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.first = self.consumer

    def _restart_stuck(self, consumer: Consumer, still: list[tuple[str, int]]) -> int:
        if consumer is self.first:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))
        return super()._restart_stuck(consumer, still)


@pytest.mark.parametrize("replace", [True, False], ids=["replace", "no-replace"])
def test_a_wedged_consumer_is_replaced_by_a_new_member(stack, unique, replace):
    """A consumer whose every stuck check fails while the broker answers (wedged_after_checks in a row) is
    replaced by a new member: its finished records are committed on the way out, so the new member delivers
    only what the old one never did, each record once, including those of the partitions that stopped
    fetching behind the loop's back (2, and 3 that never started). Without the replacement (0) those never
    come."""
    src, dst = f"t-wedged-{unique}", f"t-wedged-out-{unique}"
    handler, seen, by_part, send = _six_hosts_a_partition(stack.kafka_bootstrap, src, dst, unique)

    first = by_part[0][:3] + by_part[1][:3] + by_part[2][:3]
    later = by_part[0][3:6] + by_part[1][3:6] + by_part[2][3:6] + by_part[3][:6]
    send(first)
    loop = _WedgedFirstConsumer(LoopConfig(service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage},
                                           bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2, stuck_check_s=1.0,
                                           wedged_after_checks=3 if replace else 0), handler)

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        deadline = time.time() + 60
        while len(seen) < len(first) and time.time() < deadline:
            await asyncio.sleep(0.2)
        loop.consumer.pause([TopicPartition(src, 2), TopicPartition(src, 3)])  # behind the loop's back
        send(later)
        end = time.time() + (60 if replace else 10)
        while len(seen) < len(first) + len(later) and time.time() < end:
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)  # a record delivered twice would come now
        loop.stop()
        await task

    asyncio.run(drive())
    if replace:
        assert sorted(seen) == sorted(f"http://{h}/" for h in first + later)
        assert loop.consumers_replaced == 1
        assert loop.consumer is not loop.first
    else:
        assert sorted(seen) == sorted(f"http://{h}/" for h in first + by_part[0][3:6] + by_part[1][3:6])
        assert loop.consumers_replaced == 0
