"""What a crawl with nothing to fetch costs: the services started (the six of `make run`), no seeds, CPU over a window.

    .venv/bin/python bench/idle_cost.py --duration 60 --out docs/benchmarks-idle.md

The launcher (``streamcrawl_launcher.crawl.Crawl``, no synthetic web) resets the crawl's topics, tables
and bucket and starts every service as its own process, exactly as ``make run`` does; once their start-up
CPU has settled the window opens. Each service's CPU (``/proc/<pid>/stat``) is reported as % of one core
over the window, with the engines (Kafka, Cassandra, versitygw: shared with other tenants) apart. What
runs while idle is in the figures: the run loops' polls, the handlers' ticks and each service's readiness
probe (every 10 s: a Kafka metadata call, plus a CQL query and/or an S3 call per engine it uses).
``--repeats`` runs the window that many times on the same services (the table shows medians).
``--pyspy`` records each service with py-spy during the (last) window: see ``bench/pyspy_top.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import crawl_cpu as cpu
from crawl_report import machine_info
from crawl_sides import PySpy, fresh_dir, log

TARGET_PCT = 2.0  # issue 15: all services together under 2% of one core


def measure(services: dict[str, int], duration: float) -> dict[str, float]:
    """% of one core per process over ``duration`` seconds (services, engines, this bench), and per service
    by thread kind under ``"<service>/<kind>"`` (main = the event loop, librdkafka, other)."""
    others = cpu.infra_pids()
    wall0, c0, o0, l0 = time.monotonic(), cpu.sample_cpu(services), cpu.sample_cpu(others), cpu.self_cpu_s()
    t0 = cpu.sample_threads(services)
    time.sleep(duration)
    wall = time.monotonic() - wall0
    c, o = cpu.cpu_delta(c0, cpu.sample_cpu(services)), cpu.cpu_delta(o0, cpu.sample_cpu(others))
    threads = cpu.threads_delta(t0, cpu.sample_threads(services), c)
    out = {k: 100.0 * v / wall for k, v in {**c, **o}.items()}
    for name, kinds in threads.items():
        out.update({f"{name}/{kind}": 100.0 * v / wall for kind, v in kinds.items()})
    out["launcher"] = 100.0 * (cpu.self_cpu_s() - l0) / wall
    return out


def render(runs: list[dict[str, float]], args: argparse.Namespace, info: dict[str, object], services: list[str],
           command: str) -> str:
    def med(key: str) -> float:
        vals = [r[key] for r in runs if key in r]
        return statistics.median(vals) if vals else float("nan")

    total = statistics.median([sum(r.get(s, 0.0) for s in services) for r in runs])
    n = len(services)
    load0, load1 = info["load_start"], info["load"]
    lines = [
        "# Benchmarks: the idle cost (a crawl with nothing to fetch)", "",
        f"Command: `{command}`.", "",
        f"**Machine:** {info['cores']} cores ({info['cpu']}), Python {info['python']}; load average at the start "
        f"{' / '.join(f'{x:.1f}' for x in load0)}, at the end {' / '.join(f'{x:.1f}' for x in load1)} "  # type: ignore[attr-defined]
        "(1/5/15 min; the machine and the engines are shared with other work).", "",
        f"The {n} services started with no seeds; {len(runs)} window(s) of {args.duration:.0f} s after their "
        "start-up CPU settled (median shown). % of one core = CPU-s ÷ wall-clock s × 100; by thread: the "
        "event loop (main thread), librdkafka's native threads (`rdk:*`) and the rest (worker threads, the "
        "Cassandra driver's).", "",
        "| process | % of one core | event loop | librdkafka | rest |", "|---|---|---|---|---|",
        *[f"| {s} | {med(s):.2f} | {med(s + '/main'):.2f} | {med(s + '/librdkafka'):.2f} | {med(s + '/other'):.2f} |"
          for s in services],
        f"| **all {n} services** (target < {TARGET_PCT:.0f}%) | **{total:.2f}** | | | |",
        f"| launcher (this bench: sleeping) | {med('launcher'):.2f} | | | |",
        *[f"| {name} (shared) | {med(key):.2f} | | | |" for key, name in
          (("kafka", "Kafka"), ("cassandra", "Cassandra"), ("versitygw", "S3 server (versitygw)"))],
        "",
    ]
    if len(runs) > 1:
        lines += [f"Per window, all {n} services: " + ", ".join(f"{sum(r.get(s, 0.0) for s in services):.2f}%"
                                                                  for r in runs) + ".", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--duration", type=float, default=60.0)
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--pyspy", action="store_true")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/streamcrawl-bench-idle"))
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    command = "python bench/idle_cost.py " + " ".join(sys.argv[1:] if argv is None else argv)
    from streamcrawl_launcher.crawl import SERVICES, Crawl, CrawlOptions

    info: dict[str, object] = machine_info()
    info["load_start"] = info["load"]
    wd = fresh_dir(args.workdir.resolve())
    crawl = Crawl(CrawlOptions(workdir=wd, synthweb=False, log_level="WARNING"))
    runs: list[dict[str, float]] = []
    try:
        crawl.start()
        services = {n: crawl.procs[n].pid for n in SERVICES}
        waited = cpu.settle(services, min_s=15.0, idle_cpu=0.1)
        log(f"idle: services settled after {waited:.0f}s")
        for i in range(args.repeats):
            spy = PySpy(services, wd, 100) if args.pyspy and i == args.repeats - 1 else None
            try:
                runs.append(measure(services, args.duration))
            finally:
                if spy is not None:
                    spy.stop()
            log(f"idle window {i + 1}: " + ", ".join(f"{k} {v:.2f}%" for k, v in runs[-1].items()))
            if crawl.dead_services():
                raise RuntimeError(f"service(s) exited: {crawl.dead_services()} (see {crawl.logs})")
    finally:
        crawl.stop()
    info.update(machine_info())
    report = render(runs, args, info, list(SERVICES), command)
    print(report)
    if args.out:
        args.out.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
