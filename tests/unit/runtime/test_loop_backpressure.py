"""The run loop's backpressure and busy polling, against a stand-in consumer (no broker).

- A partition is never paused or resumed before it has delivered a record since its assignment: in
  librdkafka a pause or resume right after an assignment can overtake the assignment's fetch start, which is
  then dropped, and the partition never fetches again (librdkafka issues 2190 and 5591). Partitions assigned
  under backpressure are paused at their first record instead, and resumed with the others.
- A busy loop (records in flight) blocks in poll for at most busy_wait_s instead of polling and sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import TopicPartition
from streamcrawl_contracts.messages import Envelope, SeedMessage
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.ports.loop import Output, Record

from tests.unit.runtime.test_loop_idle import NoProducer, Timed

SEED = SeedMessage(url="http://a.example/", source="test").model_dump_json().encode()


class Msg:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def error(self) -> None:
        return None

    def key(self) -> bytes:
        return b"a.example"

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes:
        return SEED


class Recorder:
    """Records assign / pause / resume calls; poll hands out queued records, else waits and returns None."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []
        self.queue: list[Msg] = []
        self.poll_waits: list[float] = []
        self.zero_consumes = 0

    def _log(self, what: str, tps: list[TopicPartition]) -> None:
        self.calls.append((what, sorted((tp.topic, tp.partition) for tp in tps)))

    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        self._log("assign", tps)

    def pause(self, tps: list[TopicPartition]) -> None:
        self._log("pause", tps)

    def resume(self, tps: list[TopicPartition]) -> None:
        self._log("resume", tps)

    def subscribe(self, topics: list[str], **_: Any) -> None:
        pass

    def poll(self, timeout: float) -> Msg | None:
        if self.queue:
            return self.queue.pop(0)
        self.poll_waits.append(timeout)
        time.sleep(timeout)
        return None

    def consume(self, n: int, timeout: float) -> list[Msg]:
        if timeout == 0:
            self.zero_consumes += 1
        out, self.queue = self.queue[:n], self.queue[n:]
        return out

    def close(self) -> None:
        pass


class Slow(Timed):
    """Each record takes ``hold_s``; ticked every tick_interval_s (no tick_due)."""

    tick_due = None  # type: ignore[assignment]

    def __init__(self, hold_s: float) -> None:
        super().__init__(every_s=None)
        self.hold_s = hold_s
        self.handled = 0

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        await asyncio.sleep(self.hold_s)
        self.handled += 1
        return []


def _loop(handler: Slow, **cfg: Any) -> tuple[RunLoop, Recorder]:
    loop = RunLoop(LoopConfig(service="t", group_id="g", subscriptions={"t": SeedMessage},
                              bootstrap="127.0.0.1:1", **cfg), handler, producer=NoProducer())  # type: ignore[arg-type]
    loop.consumer.close()
    rec = Recorder()
    loop.consumer = rec  # type: ignore[assignment]
    return loop, rec


def test_partitions_assigned_under_backpressure_are_paused_at_their_first_record_not_in_the_callback() -> None:
    loop, rec = _loop(Slow(hold_s=10.0), max_in_flight=2, resume_below=1)

    async def drive() -> None:
        loop._event_loop = asyncio.get_running_loop()
        await asyncio.to_thread(loop._on_assign, rec, [TopicPartition("t", 0)])
        loop._accept(Msg("t", 0, 0))  # type: ignore[arg-type]
        loop._accept(Msg("t", 0, 1))  # type: ignore[arg-type]
        loop._backpressure()  # 2 in flight: paused
        assert loop._paused
        await asyncio.to_thread(loop._on_assign, rec, [TopicPartition("t", 1)])  # gained while paused
        assert ("pause", [("t", 1)]) not in rec.calls  # not in the callback
        loop._accept(Msg("t", 1, 0))  # type: ignore[arg-type]
        assert rec.calls[-1] == ("pause", [("t", 1)])  # at its first record
        for task in list(loop._tasks):
            task.cancel()
        await asyncio.gather(*loop._tasks, return_exceptions=True)
        loop._backpressure()  # nothing in flight: resumed, both
        assert rec.calls[-1] == ("resume", [("t", 0), ("t", 1)])

    asyncio.run(drive())
    assert rec.calls[0] == ("assign", [("t", 0)]) and rec.calls[1] == ("pause", [("t", 0)])


def test_backpressure_leaves_a_partition_that_has_not_delivered_yet_alone_until_it_does() -> None:
    loop, rec = _loop(Slow(hold_s=10.0), max_in_flight=1, resume_below=0)

    async def drive() -> None:
        loop._event_loop = asyncio.get_running_loop()
        await asyncio.to_thread(loop._on_assign, rec, [TopicPartition("t", 0), TopicPartition("t", 1)])
        loop._accept(Msg("t", 0, 0))  # type: ignore[arg-type]  # partition 1 delivers nothing yet
        loop._backpressure()
        assert rec.calls[-1] == ("pause", [("t", 0)])
        loop._accept(Msg("t", 1, 0))  # type: ignore[arg-type]
        assert rec.calls[-1] == ("pause", [("t", 1)])
        for task in list(loop._tasks):
            task.cancel()
        await asyncio.gather(*loop._tasks, return_exceptions=True)
        loop._backpressure()
        assert rec.calls[-1] == ("resume", [("t", 0), ("t", 1)])

    asyncio.run(drive())


def test_a_busy_loop_blocks_in_poll_instead_of_polling_and_sleeping() -> None:
    handler = Slow(hold_s=1.5)
    loop, rec = _loop(handler, busy_wait_s=0.1)
    rec.queue.append(Msg("t", 0, 0))
    loop._own.assign([("t", 0)])

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        await asyncio.sleep(1.2)  # the record is in flight all this time
        loop.stop()
        await task

    asyncio.run(drive())
    busy_waits = [w for w in rec.poll_waits if w > 0]
    # ~1.2 s of 0.1 s blocking polls (a commit due may shorten one): about 12 passes, not 60 of 20 ms
    assert 6 <= len(rec.poll_waits) <= 16, rec.poll_waits
    assert busy_waits and max(busy_waits) <= 0.1 + 1e-9
    assert rec.zero_consumes <= 2
