"""Rebalance callbacks make no blocking client call on the thread whose consume() runs them: confluent-kafka
keeps one call state per client and thread, a nested blocking call clears the one consume() set, and the
next callback of that consume() aborts the process. Checked against a stand-in consumer that runs the
loop's callbacks from inside its poll, as librdkafka does, and records on which thread each call ran."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from confluent_kafka import TopicPartition
from streamcrawl_contracts.messages import Envelope, SeedMessage
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.ports.loop import Output, Record

from tests.unit.runtime.test_loop_idle import NoProducer

TOPIC = "t"


class CallbackConsumer:
    """Its first poll assigns partition 0 (then its second revokes it), calling the loop's callbacks from
    the poll's own thread; every blocking call notes its thread."""

    def __init__(self) -> None:
        self.on_assign: Any = None
        self.on_revoke: Any = None
        self.polls = 0
        self.poll_threads: set[int] = set()
        self.blocking: list[tuple[str, int]] = []

    def subscribe(self, topics: list[str], on_assign: Any = None, on_revoke: Any = None, **_: Any) -> None:
        self.on_assign, self.on_revoke = on_assign, on_revoke

    def _poll(self) -> None:
        self.polls += 1
        self.poll_threads.add(threading.get_ident())
        tp = [TopicPartition(TOPIC, 0)]
        if self.polls == 1:
            self.on_assign(self, tp)
        elif self.polls == 2:
            self.on_revoke(self, tp)

    def poll(self, timeout: float) -> None:
        self._poll()
        time.sleep(min(timeout, 0.01))

    def consume(self, n: int, timeout: float) -> list[Any]:
        self._poll()
        return []

    # blocking calls (each takes a call state in the real client)
    def _note(self, name: str) -> None:
        self.blocking.append((name, threading.get_ident()))

    def list_topics(self, topic: str, timeout: float) -> Any:
        self._note("list_topics")
        return SimpleNamespace(topics={topic: SimpleNamespace(partitions={0: None})})

    def committed(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        self._note("committed")
        return [TopicPartition(tp.topic, tp.partition, 0) for tp in tps]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        self._note("get_watermark_offsets")
        return 0, 0

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> None:
        self._note("commit")

    # non-blocking calls the callbacks may make in place
    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        pass

    def pause(self, tps: list[TopicPartition]) -> None:
        pass

    def resume(self, tps: list[TopicPartition]) -> None:
        pass

    def seek(self, tp: TopicPartition) -> None:
        pass

    def close(self) -> None:
        pass


class Quiet:
    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        return []

    async def on_assign(self, partitions: list[int]) -> None:
        pass

    async def on_revoke(self, partitions: list[int]) -> None:
        pass


def test_no_blocking_client_call_runs_on_the_polling_thread() -> None:
    loop = RunLoop(LoopConfig(service="t", group_id="g", subscriptions={TOPIC: SeedMessage}, bootstrap="127.0.0.1:1",
                              mark_fresh=True, idle_wait_s=0.05), Quiet(),  # type: ignore[arg-type]
                   producer=NoProducer())  # type: ignore[arg-type]
    loop.consumer.close()
    consumer = CallbackConsumer()
    loop.consumer = consumer  # type: ignore[assignment]

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        for _ in range(100):
            if consumer.polls >= 3:
                break
            await asyncio.sleep(0.02)
        loop.stop()
        await task

    asyncio.run(drive())
    assert consumer.polls >= 3
    names = {name for name, _ in consumer.blocking}
    assert {"list_topics", "get_watermark_offsets"} <= names  # the assignment's lookups ran
    on_poll_thread = [name for name, thread in consumer.blocking if thread in consumer.poll_threads]
    assert on_poll_thread == []
