"""Whole-crawl benchmark: streamcrawl vs Scrapy, equally polite, on the same synthetic web (``make bench-crawl``).

    .venv/bin/python bench/crawl_bench.py --hosts 2000 --duration 360 --out docs/benchmarks-crawl.md
    .venv/bin/python bench/crawl_bench.py --hosts 100 --profile polite --duration 240 --until-coverage \\
        --out docs/benchmarks-crawl-polite.md

Each side gets a FRESH synthetic web process (same hosts, same seed, same ports, its own request log),
one side after the other, never both at once:

* **streamcrawl**: ``streamcrawl_launcher.crawl.Crawl`` starts the synthetic web and every service as
  its own process on the local stack (it resets the crawl's topics, tables and bucket first), waits
  until the services' start-up CPU has settled, then seeds every host's home page. The window starts
  just before seeding.
* **Scrapy**: ``bench/scrapy_side.py`` in a subprocess against its own synthetic web. The window is
  the spider's own: from ``spider_opened`` to ``--duration`` seconds later.

Both are measured the same way (``crawl_sides``), over ``--duration`` seconds or, with
``--until-coverage``, until the server's log shows every ground-truth page fetched:

* **pages** = requests in the server's own log with status 200, path not robots.txt (nor its redirect
  target) and ``start`` inside the window; **requests** = every logged request started in the window.
* **crawler CPU** = utime+stime (+ waited-for children) from ``/proc/<pid>/stat`` at the window's ends,
  per service (``crawl_cpu``); for Scrapy, ``os.times()`` inside the spider (same kernel counters),
  cross-checked against ``/proc/<pid>/stat`` sampled by this script (the figure used when coverage ends
  the window).
* the synthetic web server, Kafka, Cassandra and versitygw are reported apart: none of them is crawler
  CPU, and the stack is shared, so the JVMs' CPU also includes other tenants.
* Kafka records and Cassandra statements per page from the services' /metrics at the window's ends.
* **politeness violations** from the whole request log of each side (``crawl_log``).
* ``--pyspy``: py-spy records each service for the window (collapsed stacks in the workdir; summarise
  with ``bench/pyspy_top.py``). It samples without pausing the services, but costs CPU of its own: use
  it on a run of its own, not on one whose CPU is quoted.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from crawl_cpu import (
    CLK_TCK,
    cpu_delta,
    cpu_seconds,
    infra_pids,
    machine_busy_s,
    parse_proc_stat,
    sample_cpu,
    settle,
)
from crawl_log import WindowCounts, count_window, crawl_delays, ground_truth, start_gap_violations, violation_summary
from crawl_report import bin_rates, machine_info, render
from crawl_sides import SIDES, SideResult, fresh_dir, log, run_scrapy, run_streamcrawl

__all__ = ["CLK_TCK", "SideResult", "WindowCounts", "bin_rates", "count_window", "cpu_delta", "cpu_seconds",
           "crawl_delays", "fresh_dir", "infra_pids", "machine_busy_s", "main", "parse_args", "parse_proc_stat",
           "render", "run_scrapy", "run_streamcrawl", "sample_cpu", "settle", "start_gap_violations",
           "violation_summary"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--duration", type=float, default=180.0, help="measurement window per side, seconds")
    p.add_argument("--until-coverage", action="store_true",
                   help="end each side's window as soon as every ground-truth page was fetched")
    p.add_argument("--only", choices=(*SIDES, "both"), default="both")
    p.add_argument("--repeats", type=int, default=1, help="runs of each side; the table shows medians")
    p.add_argument("--profile", default="default", help="synthetic web profile")
    p.add_argument("--web-seed", type=int, default=7)
    p.add_argument("--http-port", type=int, default=8480)
    p.add_argument("--dns-port", type=int, default=8553)
    p.add_argument("--bin", type=float, default=30.0, help="seconds per bin of the pages/s timeline")
    p.add_argument("--grace", type=float, default=60.0, help="seconds Scrapy may take to shut down")
    p.add_argument("--pyspy", action="store_true", help="py-spy record every service for the window")
    p.add_argument("--pyspy-rate", type=int, default=50, help="py-spy samples per second")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/streamcrawl-bench-crawl"))
    p.add_argument("--out", type=Path, help="write the Markdown report here (it is printed either way)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python bench/crawl_bench.py " + " ".join(sys.argv[1:] if argv is None else argv)
    info = machine_info()
    info["load_start"] = info["load"]
    truth = ground_truth(args.hosts, args.web_seed, args.profile, args.http_port)
    log(f"ground truth: {len(truth.pages)} pages on {len(truth.per_host)} hosts, "
        f"politeness lower bound {truth.lower_bound_s:.1f}s")
    sides = SIDES if args.only == "both" else (args.only,)
    runners = {"streamcrawl": run_streamcrawl, "scrapy": run_scrapy}
    results: dict[str, list[SideResult]] = {s: [] for s in sides}
    for rep in range(args.repeats):
        for side in sides:
            wd = fresh_dir(args.workdir.resolve() / f"{side}-{rep}")
            log(f"repeat {rep + 1}/{args.repeats}: {side} ({args.hosts} hosts, {args.duration:.0f}s) in {wd}")
            r = runners[side](args, wd, truth)
            results[side].append(r)
            (wd / "result.json").write_text(json.dumps(asdict(r), indent=1, default=str))
            log(f"{side}: {r.pages_per_s:.1f} pages/s, {r.cpu_ms_per_page:.1f} CPU-ms/page, coverage "
                f"{r.coverage_frac:.3f} at {r.coverage_s}, violations {r.violations}")
    info.update(machine_info())
    report = render(results, args, info, command, truth)
    print(report)
    if args.out:
        args.out.write_text(report)
        log(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
