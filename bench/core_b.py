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


def run_once(hosts: int, pairs: int) -> tuple[float, int]:
    urls_per_host = max(1, -(-pairs // hosts)) + 1
    f = build(hosts, urls_per_host)
    # Simulated clock: 1 s min delay per host, so advancing now by 1/hosts per pair keeps
    # roughly every host's timer expiring just in time -- a steady state with a full heap.
    step = 1.0 / hosts
    now = 0.0
    served = 0
    nxt, done = f.next, f.done
    t0 = time.perf_counter()
    for _ in range(pairs):
        item = nxt(now)
        if item is not None:
            done(item.host, now, 0.01, 200)
            served += 1
        now += step
    elapsed = time.perf_counter() - t0
    return elapsed, served


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--pairs", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    rates = []
    for r in range(args.repeats):
        elapsed, served = run_once(args.hosts, args.pairs)
        # A next() that returns None is still an op; done() only happens when one was served.
        ops = args.pairs + served
        rates.append(ops / elapsed)
        print(f"repeat {r}: {ops} ops ({served} served) in {elapsed:.3f}s = {ops / elapsed:,.0f} ops/s")
    print(f"median: {statistics.median(rates):,.0f} ops/s "
          f"(= {statistics.median(rates) / 2:,.0f} next+done pairs/s); hosts={args.hosts}")


if __name__ == "__main__":
    main()
