"""What a busy run loop costs while it waits (``make bench-loop-busy``): the CPU of one process whose run loop
has records in flight that take long (a fetcher waiting on politeness is like this all the time), with the
busy cycle of before (``busy_wait_s=0``: a non-blocking consume in a worker thread, then a 20 ms sleep) and
the blocking poll of now (``busy_wait_s=0.1``), alternated, each in its own process, against the local
stack's Kafka.

    .venv/bin/python bench/loop_busy.py --seconds 20 --repeats 3 --out docs/benchmarks-loop-busy.md

Each process subscribes a fresh consumer group to a one-partition topic holding a few records, handles them
with a handler that holds each for the whole run, and measures its own utime+stime (all threads: the event
loop, the poll's worker thread and librdkafka's) over ``--seconds`` once the records are in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

TOPIC = "streamcrawl-bench.loop-busy"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child(bootstrap: str, busy_wait_s: float, seconds: float) -> dict[str, float]:
    from streamcrawl_contracts.messages import Envelope, SeedMessage
    from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
    from streamcrawl_runtime.ports.loop import Output, Record

    class Hold:
        def __init__(self) -> None:
            self.in_flight = 0

        async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
            self.in_flight += 1
            await asyncio.sleep(3600)
            return []

        async def on_assign(self, partitions: list[int]) -> None:
            pass

        async def on_revoke(self, partitions: list[int]) -> None:
            pass

        async def tick(self, now: float) -> Sequence[Output]:
            return []

    handler = Hold()
    loop = RunLoop(LoopConfig(service="bench", group_id=f"bench-loop-busy-{uuid.uuid4().hex[:8]}",
                              subscriptions={TOPIC: SeedMessage}, bootstrap=bootstrap, busy_wait_s=busy_wait_s,
                              revoke_drain_s=0.0), handler)

    async def drive() -> dict[str, float]:
        task = asyncio.create_task(loop.run(install_signals=False))
        deadline = time.time() + 60
        while handler.in_flight == 0 and time.time() < deadline:
            await asyncio.sleep(0.1)
        if handler.in_flight == 0:
            raise SystemExit("no record reached the handler within 60 s")
        await asyncio.sleep(2.0)  # past the first commits
        c0, t0 = _cpu(), time.monotonic()
        await asyncio.sleep(seconds)
        c1, t1 = _cpu(), time.monotonic()
        loop.stop()
        await task
        return {"cpu_s": c1 - c0, "wall_s": t1 - t0, "in_flight": handler.in_flight}

    return asyncio.run(drive())


def ensure_topic(bootstrap: str) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    from streamcrawl_contracts.messages import SeedMessage

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if TOPIC not in admin.list_topics(timeout=10).topics:
        for fut in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            fut.result(30)
        time.sleep(1.0)
        prod = Producer({"bootstrap.servers": bootstrap})
        for i in range(3):
            msg = SeedMessage(url=f"http://host{i}.example/", source="bench")
            prod.produce(TOPIC, key=f"host{i}.example".encode(), value=msg.model_dump_json().encode())
        prod.flush(30)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--bootstrap", default="127.0.0.1:19092")
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", type=Path)
    p.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.bootstrap, args.child, args.seconds)))
        return 0
    ensure_topic(args.bootstrap)
    modes = {"before: poll-and-sleep cycle (busy_wait_s=0)": 0.0, "now: blocking poll (busy_wait_s=0.1)": 0.1}
    results: dict[str, list[float]] = {m: [] for m in modes}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for _ in range(args.repeats):
        for name, wait in modes.items():  # alternated, so that a noisy minute hits both
            out = subprocess.run([sys.executable, __file__, "--bootstrap", args.bootstrap, "--seconds",
                                  str(args.seconds), "--child", str(wait)], capture_output=True, text=True, check=True)
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[name].append(100.0 * r["cpu_s"] / r["wall_s"])
            print(f"{name}: {results[name][-1]:.2f}% of a core", flush=True)
    med = {m: statistics.median(v) for m, v in results.items()}
    before, now = med.values()
    lines = ["# A busy run loop's cost while it waits", "",
             f"Re-run: `make bench-loop-busy` (= `.venv/bin/python bench/loop_busy.py --seconds {args.seconds:.0f} "
             f"--repeats {args.repeats} --out docs/benchmarks-loop-busy.md`); what is measured: the docstring of "
             "`bench/loop_busy.py`.", "",
             f"Run {started}, {args.repeats} alternated runs of {args.seconds:.0f} s per mode; medians. One "
             "process, records in flight throughout, nothing arriving.", "",
             "| loop | CPU, % of one core (median) | runs |", "|---|---|---|"]
    for m, v in results.items():
        lines.append(f"| {m} | {med[m]:.2f} | {', '.join(f'{x:.2f}' for x in v)} |")
    lines += ["", f"Ratio now / before: **{now / before:.2f}×** (saves {before - now:.2f}% of a core for every "
              "busy process)."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
