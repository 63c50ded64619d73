"""Benchmark for streamcrawl_core part B: frontier next()+done() with 100k hosts.

Counting: each call to ``next`` and each call to ``done`` is one operation, so one leased-and-
finished URL is 2 ops. Setup (adding URLs) is not timed. Every repeat builds a fresh frontier.

Run: .venv/bin/python bench/core_b.py [--hosts 100000] [--pairs 200000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from streamcrawl_core.frontier import Frontier


def build(hosts: int, urls_per_host: int) -> Frontier:
    f = Frontier()
    for i in range(urls_per_host):
        for h in range(hosts):
            f.add(f"http://h{h}.example/p{i}", f"h{h}.example", priority=(h + i) % 10,
                  kind="refresh" if (h + i) % 3 else "discovery")
    return f


def run_once(hosts: int, pairs: int) -> tuple[float, int, float, float]:
    """(steady-state wall seconds, pairs served, cold-start seconds, steady-state CPU seconds).

    Simulated clock: min delay 1 s per host and ``now`` advancing 1/hosts per pair, so after the
    first cycle about one host's timer expires per pair -- a steady state with a full heap.
    The first cycle (every host due at once, each moving heap -> bucket on first ``next``) is
    timed separately as "cold start" and is not part of the steady-state rate.
    """
    urls_per_host = max(1, -(-pairs // hosts)) + 2
    f = build(hosts, urls_per_host)
    step = 1.0 / hosts
    nxt, done = f.next, f.done
    now = 0.0
    t0 = time.perf_counter()
    for _ in range(hosts):  # cold start: one full cycle
        item = nxt(now)
        if item is not None:
            done(item.host, now, 0.01, 200)
        now += step
    cold = time.perf_counter() - t0
    served = 0
    c0 = time.process_time()  # CPU time: less distorted than wall time on a shared machine
    t0 = time.perf_counter()
    for _ in range(pairs):
        item = nxt(now)
        if item is not None:
            done(item.host, now, 0.01, 200)
            served += 1
        now += step
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    return elapsed, served, cold, cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rates, colds, cpu_rates = [], [], []
    for r in range(args.repeats):
        elapsed, served, cold, cpu = run_once(args.hosts, args.pairs)
        # A next() that returns None is still an op; done() only happens when one was served.
        ops = args.pairs + served
        rates.append(ops / elapsed)
        colds.append(2 * args.hosts / cold)
        cpu_rates.append(ops / cpu)
        print(f"repeat {r}: steady {ops} ops ({served} served) in {elapsed:.3f}s = {ops / elapsed:,.0f} ops/s"
              f" (per CPU second {ops / cpu:,.0f}); cold start {2 * args.hosts / cold:,.0f} ops/s")
    med = statistics.median(rates)
    print(f"median steady state: {med:,.0f} ops/s (= {med / 2:,.0f} next+done pairs/s); hosts={args.hosts}")
    print(f"median steady state per CPU second: {statistics.median(cpu_rates):,.0f} ops/s")
    print(f"median cold start:   {statistics.median(colds):,.0f} ops/s")

if __name__ == "__main__":
    main()
