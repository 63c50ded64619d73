"""Partitions move between live instances of the run loop without two instances ever working on one key
at once, against the real broker (Kafka 4's consumer group protocol, KIP-848, server-side range assignor).

- Co-partitioning: at every assignment and revocation, a member holds partition i of all subscribed
  topics or of none.
- Live handover: a second instance joins while the first is busy (records take a while, like a fetch);
  then the first stops (SIGTERM). No key is ever handled by both instances at overlapping times, every
  record is handled, and the survivor takes over within seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Callable, Sequence

import pytest
from confluent_kafka import Consumer, Producer
from streamcrawl_contracts.messages import Envelope, SeedMessage
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop, group_protocol_config
from streamcrawl_runtime.ports.loop import Output, Record

from tests.integration.kafka_helpers import make_topics

pytestmark = pytest.mark.integration
PARTS = 8


def test_the_range_assignor_moves_whole_partition_indexes(stack, unique):
    topics = [f"t-cop-{unique}-{n}" for n in "abc"]
    make_topics(stack.kafka_bootstrap, *topics, partitions=PARTS)
    group = f"g-cop-{unique}"
    owned: dict[str, set[tuple[str, int]]] = {}
    partial: list[tuple[str, dict[int, int]]] = []
    moves: list[int] = []
    lock = threading.Lock()

    def check(name: str) -> None:
        per_index: dict[int, int] = {}
        for _, p in owned[name]:
            per_index[p] = per_index.get(p, 0) + 1
        bad = {p: n for p, n in per_index.items() if n != len(topics)}
        if bad:
            partial.append((name, bad))

    def member(name: str, stop: threading.Event) -> None:
        owned[name] = set()
        c = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": group, "enable.auto.commit": False,
                      **group_protocol_config("consumer")})

        def on_assign(_c: Consumer, parts: list) -> None:
            with lock:
                owned[name] |= {(tp.topic, tp.partition) for tp in parts}
                moves.append(len(parts))
                check(name)

        def on_revoke(_c: Consumer, parts: list) -> None:
            with lock:
                owned[name] -= {(tp.topic, tp.partition) for tp in parts}
                check(name)

        c.subscribe(topics, on_assign=on_assign, on_revoke=on_revoke)
        while not stop.is_set():
            c.consume(100, 0.1)
        c.close()

    stops = {n: threading.Event() for n in ("m1", "m2", "m3")}
    threads = {n: threading.Thread(target=member, args=(n, e)) for n, e in stops.items()}
    for n in ("m1", "m2", "m3"):
        threads[n].start()
        time.sleep(4)
    stops["m2"].set()
    threads["m2"].join()
    time.sleep(4)
    with lock:  # m1 and m3 share every index between them, each whole
        final = {n: {p for _, p in owned[n]} for n in ("m1", "m3")}
    for n in ("m1", "m3"):
        stops[n].set()
        threads[n].join()
    assert partial == []
    assert sum(moves) >= 3 * PARTS and all(m % len(topics) == 0 for m in moves)
    assert final["m1"] | final["m3"] == set(range(PARTS)) and not final["m1"] & final["m3"]
    assert final["m1"] and final["m3"]


class Slow:
    """Each record takes ``work_s`` (like a fetch); every execution is logged with its instance and times."""

    def __init__(self, name: str, log: list[tuple[str, str, int, float, float]], work_s: float) -> None:
        self.name = name
        self.log = log
        self.work_s = work_s
        self.owned: set[int] = set()

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        assert isinstance(message, SeedMessage)
        t0 = time.monotonic()
        await asyncio.sleep(self.work_s)
        self.log.append((self.name, record.key or "", record.offset, t0, time.monotonic()))
        return []

    async def on_assign(self, partitions: list[int]) -> None:
        self.owned.update(partitions)

    async def on_revoke(self, partitions: list[int]) -> None:
        self.owned.difference_update(partitions)

    async def tick(self, now: float) -> Sequence[Output]:
        return []


def test_live_handover_never_overlaps_a_key(stack, unique):
    src = f"t-hand-{unique}"
    make_topics(stack.kafka_bootstrap, src, partitions=PARTS)
    keys = [f"h{i}.{unique}.test" for i in range(24)]
    log: list[tuple[str, str, int, float, float]] = []
    a, b = Slow("a", log, 0.4), Slow("b", log, 0.4)

    def loop(handler: Slow) -> RunLoop:
        return RunLoop(LoopConfig(service="test", group_id=f"g-hand-{unique}", subscriptions={src: SeedMessage},
                                  bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2, revoke_drain_s=10.0),
                       handler)

    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})
    sent = 0

    async def feed(seconds: float) -> None:
        nonlocal sent
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for k in keys:
                prod.produce(src, key=k.encode(), value=SeedMessage(url=f"http://{k}/{sent}").model_dump_json().encode())
                sent += 1
            prod.poll(0)
            await asyncio.sleep(0.5)
        assert prod.flush(30) == 0

    stopped_at = 0.0

    async def drive() -> None:
        nonlocal stopped_at
        la, lb = loop(a), loop(b)
        ta = asyncio.create_task(la.run(install_signals=False))
        await feed(5)
        tb = asyncio.create_task(lb.run(install_signals=False))  # scale out while a is busy
        await feed(8)
        assert a.owned and b.owned and not a.owned & b.owned
        la.stop()  # scale in: a hands its partitions over
        await ta
        stopped_at = time.monotonic()
        await feed(4)
        deadline = time.monotonic() + 30
        while len({(k, o) for _, k, o, _, _ in log}) < sent and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        lb.stop()
        await tb

    asyncio.run(drive())
    assert len({(k, o) for _, k, o, _, _ in log}) == sent  # every record handled
    by_key: dict[str, list[tuple[float, float, str]]] = {}
    for name, key, _o, t0, t1 in log:
        by_key.setdefault(key, []).append((t0, t1, name))
    overlaps = []
    for key, runs in by_key.items():
        runs.sort()
        for (_s0, e0, n0), (s1, _e1, n1) in itertools.pairwise(runs):
            if s1 < e0:
                overlaps.append((key, n0, n1, round(e0 - s1, 3)))
    assert overlaps == []
    handed = [t0 for name, _k, _o, t0, _ in log if name == "b" and t0 > stopped_at]
    assert handed and min(handed) - stopped_at < 5.0  # the survivor carries on within seconds
    # Drained and committed before each handover: nothing is handled twice.
    assert len(log) == sent


class Gated(Slow):
    """Records wait on a gate while it is closed (a loop under backpressure); every record handled is kept.
    The partitions it owns are Slow's."""

    def __init__(self, gated: bool) -> None:
        super().__init__("gated", [], 0.0)
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        self.handled: list[tuple[int, int]] = []  # (partition, offset)

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        await self.gate.wait()
        self.handled.append((record.partition, record.offset))
        return []


def test_a_partition_paused_when_revoked_is_read_again_when_it_comes_back(stack, unique):
    """librdkafka keeps a partition's pause across its revocation. A loop paused under backpressure that
    loses partitions and is given them back must read them again: before the loop resumed what it gave
    up, those partitions never fetched again (a parser fenced in the burst after a Kafka freeze sat so on
    48 partitions). Here: a's records wait on a gate, so a pauses with every partition started; b joins
    (a hands half over) and leaves (a gets them back, still paused); the gate opens and new records go
    to every partition: a must handle all of them."""
    src = f"t-pause-{unique}"
    make_topics(stack.kafka_bootstrap, src, partitions=PARTS)
    a, b = Gated(gated=True), Gated(gated=False)

    def loop(handler: Gated) -> RunLoop:
        return RunLoop(LoopConfig(service="test", group_id=f"g-pause-{unique}", subscriptions={src: SeedMessage},
                                  bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2, revoke_drain_s=1.0,
                                  max_in_flight=PARTS, resume_below=1), handler)

    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap})

    def send(round_: int) -> None:  # one record per partition, each its own key
        for p in range(PARTS):
            prod.produce(src, partition=p, key=f"h{p}.{unique}.test".encode(),
                         value=SeedMessage(url=f"http://h{p}.{unique}.test/{round_}").model_dump_json().encode())
        assert prod.flush(30) == 0

    came_back: set[int] = set()
    paused_when_back: list[bool] = []

    async def until(cond: Callable[[], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while not cond() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        return cond()

    async def drive() -> None:
        la = loop(a)
        ta = asyncio.create_task(la.run(install_signals=False))
        assert await until(lambda: len(a.owned) == PARTS, 30)
        send(0)
        assert await until(lambda: la._paused and len(la._tasks) == PARTS, 30)  # every partition started, paused
        lb = loop(b)
        tb = asyncio.create_task(lb.run(install_signals=False))
        assert await until(lambda: bool(b.owned) and len(a.owned) < PARTS, 30)
        moved = set(b.owned)
        assert await until(lambda: len(b.handled) >= len(moved), 30)  # a's cancelled records, replayed by b
        lb.stop()
        await tb
        assert await until(lambda: len(a.owned) == PARTS, 30)
        came_back.update(moved)
        paused_when_back.append(la._paused)
        a.gate.set()
        send(1)
        await until(lambda: {(p, 1) for p in range(PARTS)} <= set(a.handled), 20)
        la.stop()
        await ta

    asyncio.run(drive())
    assert came_back and paused_when_back == [True]  # given back while a was still paused
    assert {p for p, o in a.handled if o == 1} == set(range(PARTS))  # the second round, every partition
