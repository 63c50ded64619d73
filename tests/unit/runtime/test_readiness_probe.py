"""Readiness probes: a failing engine is probed again after `retry_s`, a healthy one every `interval_s`,
so a service turns ready within seconds of its engine's return (the engine-fault e2e test judges this on
the real stack)."""

from __future__ import annotations

import asyncio

from streamcrawl_runtime.health import Readiness


def _frozen_engine(retry_s: float) -> tuple[Readiness, dict[str, bool]]:
    """A started Readiness over one engine check that fails until ``up["ok"]`` is set."""
    up = {"ok": False}

    async def check() -> None:
        if not up["ok"]:
            raise ConnectionError("engine frozen")

    readiness = Readiness({"db": check}, interval_s=10.0, retry_s=retry_s, need_assignment=False)
    readiness.running = True
    return readiness, up


def test_a_failing_engine_is_probed_again_sooner_than_a_healthy_one() -> None:
    readiness, up = _frozen_engine(retry_s=2.0)
    asyncio.run(readiness.probe_once())
    assert readiness.ready()[0] is False
    assert readiness.next_probe_in() == 2.0
    up["ok"] = True
    asyncio.run(readiness.probe_once())
    assert readiness.ready()[0] is True
    assert readiness.next_probe_in() == 10.0


def test_the_watch_loop_turns_ready_within_the_retry_time_of_the_engines_return() -> None:
    readiness, up = _frozen_engine(retry_s=0.05)

    async def scenario() -> bool:
        task = asyncio.create_task(readiness.watch())
        await asyncio.sleep(0.02)
        assert readiness.ready()[0] is False
        up["ok"] = True
        await asyncio.sleep(0.2)  # well under interval_s: only the retry brings it back this soon
        task.cancel()
        return readiness.ready()[0]

    assert asyncio.run(scenario()) is True


def test_retry_is_never_slower_than_the_interval() -> None:
    assert Readiness(interval_s=1.0, retry_s=5.0).retry_s == 1.0
