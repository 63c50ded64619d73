"""The run loop's idle behaviour, against a stand-in consumer (no broker): with nothing in flight it blocks
in poll until the handler's next timed work (`tick_due`) or at most `idle_wait_s`, and ticks only then."""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from collections.abc import Sequence
from typing import Any

from streamcrawl_contracts.messages import Envelope, SeedMessage
from streamcrawl_runtime.health import Readiness
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.ports.loop import Output, Record


class IdleConsumer:
    """Answers every poll with nothing after the requested wait; records the waits."""

    def __init__(self) -> None:
        self.waits: list[float] = []
        self.consumes = 0

    def subscribe(self, topics: list[str], **_: Any) -> None:
        pass

    def poll(self, timeout: float) -> None:
        self.waits.append(timeout)
        time.sleep(timeout)

    def consume(self, n: int, timeout: float) -> list[Any]:
        self.consumes += 1
        return []

    def close(self) -> None:
        pass


class NoProducer:
    def __bool__(self) -> bool:
        return True

    def __len__(self) -> int:
        return 0

    def flush(self, timeout: float) -> int:
        return 0

    def poll(self, timeout: float) -> int:
        return 0


class Timed:
    def __init__(self, every_s: float | None) -> None:
        self.every_s = every_s
        self.ticks: list[float] = []
        self.start = time.time()

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        return []

    async def on_assign(self, partitions: list[int]) -> None:
        pass

    async def on_revoke(self, partitions: list[int]) -> None:
        pass

    async def tick(self, now: float) -> Sequence[Output]:
        self.ticks.append(now)
        return []

    def tick_due(self, now: float) -> float:
        if self.every_s is None:
            return math.inf
        return (self.ticks[-1] if self.ticks else self.start) + self.every_s


def _run(handler: Timed, seconds: float, readiness: Readiness | None = None, **cfg: Any) -> IdleConsumer:
    loop = RunLoop(LoopConfig(service="t", group_id="g", subscriptions={"t": SeedMessage},
                              bootstrap="127.0.0.1:1", **cfg), handler, producer=NoProducer(),  # type: ignore[arg-type]
                   readiness=readiness)
    loop.consumer.close()
    consumer = IdleConsumer()
    loop.consumer = consumer  # type: ignore[assignment]

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        if readiness is not None:
            await readiness.probe_once()
        await asyncio.sleep(seconds)
        loop.stop()
        await task

    asyncio.run(drive())
    return consumer


def test_idle_loop_sleeps_in_poll_until_the_next_tick() -> None:
    h = Timed(every_s=0.4)
    t0 = time.time()
    c = _run(h, 1.3, tick_interval_s=0.05)
    elapsed = time.time() - t0
    # Ticks follow tick_due (0.4 s apart), not tick_interval_s (0.05 s).
    assert len(h.ticks) >= 3 and len(h.ticks) <= elapsed / 0.4 + 1
    assert all(0.39 <= b - a <= 0.45 for a, b in itertools.pairwise(h.ticks))
    assert max(c.waits) >= 0.35  # a poll waits out the gap to the next tick
    assert len(c.waits) <= 3 * len(h.ticks) and c.consumes == 0  # no busy polling while nothing is in flight


def test_idle_loop_without_timed_work_polls_at_most_once_per_idle_wait() -> None:
    h = Timed(every_s=None)
    c = _run(h, 1.2, idle_wait_s=0.5)
    assert h.ticks == []  # no timed work: never ticked
    # each poll waits the longest allowed
    assert c.waits and all(abs(w - 0.5) < 0.01 for w in c.waits) and c.consumes == 0


def test_idle_loop_keeps_its_polls_short_while_the_readiness_probes_run() -> None:
    # A check of several awaits, each needing a turn of the event loop that the blocking poll holds: with
    # 1 s polls, five steps outlast the 3 s probe timeout; with short polls meanwhile it answers at once.
    async def check() -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    readiness = Readiness({"engine": check}, timeout_s=3.0, need_assignment=False)
    t0 = time.monotonic()
    c = _run(Timed(every_s=None), 0.0, readiness=readiness, idle_wait_s=1.0)
    assert readiness.engines == {"engine": "ok"}
    assert time.monotonic() - t0 < 2.0  # the probe (and the stop after it) took a few short polls
    assert min(c.waits) <= 0.05 and not readiness.probing


def test_an_assignment_the_handler_fails_with_an_outage_is_retried_until_applied() -> None:
    from streamcrawl_runtime.ports.errors import TransientError

    class Flaky(Timed):
        def __init__(self) -> None:
            super().__init__(every_s=None)
            self.assigns: list[list[int]] = []

        async def on_assign(self, partitions: list[int]) -> None:
            self.assigns.append(partitions)
            if len(self.assigns) < 3:
                raise TransientError("cassandra away")

    h = Flaky()
    loop = RunLoop(LoopConfig(service="t", group_id="g", subscriptions={"t": SeedMessage}, bootstrap="127.0.0.1:1",
                              transient_backoff_s=0.01), h, producer=NoProducer())  # type: ignore[arg-type]
    loop.consumer.close()
    asyncio.run(loop._until_applied("assign", h.on_assign, [0, 1]))
    assert h.assigns == [[0, 1]] * 3


def test_a_handler_whose_work_is_due_now_is_ticked_every_tick_interval_without_spinning() -> None:
    # tick_due answers the `now` it is asked with (the frontier does so while cold hosts wait to be loaded):
    # with the clock read twice, the comparison's read came first, the tick never fired and the loop spun.
    class DueNow(Timed):
        def tick_due(self, now: float) -> float:
            return now

    h = DueNow(every_s=None)
    c = _run(h, 1.0, tick_interval_s=0.2)
    assert 4 <= len(h.ticks) <= 7, h.ticks  # one per tick_interval_s over ~1 s
    assert len(c.waits) <= 3 * len(h.ticks) + 3, len(c.waits)  # polls wait for the next tick: no spin
