"""Chaos run (``make chaos``, not in CI): for ``--minutes`` during a crawl, kill -9 a random service instance
every ``--every`` seconds (the launcher restarts it a second later, as a supervisor would), and restart
each engine (Kafka, Cassandra, S3) once meanwhile. Then wait for the crawl to finish.

    .venv/bin/python bench/chaos.py --minutes 5 --every 15 --out docs/benchmarks-chaos.md

Runs against the stack of ``$STREAMCRAWL_STACK_DIR`` and restarts its engines: use a private stack.
Judged from the synthetic web's request log: lost URLs (reachable pages never fetched), politeness
violations, repeated fetches (pages served more than once, of all pages) and time to recover: from the
end of the chaos window until full coverage, and the longest any host waited beyond its politeness delay
after each engine restart.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from crawl_report import machine_info
from streamcrawl_launcher.faultrun import KillLoop, run_faults
from streamcrawl_launcher.faults import Fault
from streamcrawl_launcher.verdict import coverage_timeline

ENV = {"STREAMCRAWL_FETCHER_SITEMAPS": "false", "STREAMCRAWL_FETCHER_READ_TIMEOUT_S": "5"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--every", type=float, default=15.0)
    p.add_argument("--hosts", type=int, default=12)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--profile", default="deep")
    p.add_argument("--workdir", type=Path, default=Path("run/chaos"))
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    loop = KillLoop(for_s=args.minutes * 60, every_s=args.every)
    faults = [Fault(e, "restart") for e in ("kafka", "cassandra", "s3")]
    run = run_faults(args.workdir, args.hosts, args.seed, args.profile, faults, first_at_s=10.0, env=ENV,
                     kill_loop=loop, timeout_s=600, allow_timeout=True)
    v = run.verdict()
    chaos_end = max(t for t, _ in run.kills)
    timeline = coverage_timeline(run.entries, run.truth.pages, v.first_request_at, every_s=1.0)
    at_end = next((c for t, c in timeline if v.first_request_at + t >= chaos_end), 1.0)
    recover = None if v.full_coverage_at is None else max(0.0, v.full_coverage_at - chaos_end)
    killed = [n for _, n in run.kills if not n.startswith("engine")]
    info = machine_info()
    rows = [
        ("service instances killed (kill -9)", f"{len(killed)} ({', '.join(sorted(set(killed)))})"),
        ("engine restarts", ", ".join(f"{o.name} ({o.length_s:.0f} s)" for o in run.outages)),
        ("pages (reachable, allowed)", str(v.pages)),
        ("lost URLs (target 0)", str(len(v.lost))),
        ("politeness violations (target 0)", str(len(v.violations))),
        ("repeated fetches (target ≤ 1 %)", f"{v.repeats} ({100 * v.repeat_ratio:.2f} %)"),
        ("coverage when the chaos ended", f"{at_end:.2f}"),
        ("every consumer group caught up (within 600 s)", "yes" if run.idle else "no"),
        ("full coverage after the chaos ended, s", "never" if recover is None else f"{recover:.0f}"),
        ("time to full coverage from the first request, s", "never" if v.time_to_full_s is None
         else f"{v.time_to_full_s:.0f}"),
    ]
    rows += [(f"worst wait beyond politeness after {s.outage.name}, s", f"{s.excess_s:.1f}") for s in v.stalls]
    text = "\n".join([
        "# Chaos run (`make chaos`)", "",
        f"Measured {time.strftime('%Y-%m-%d')} on {info['cores']} cores ({info['cpu']}), the local single-node "
        f"stack (a private one). A crawl of the synthetic web's `{args.profile}` profile ({args.hosts} hosts, seed "
        f"{args.seed}); for {args.minutes:g} min a random service instance is killed with SIGKILL every "
        f"{args.every:g} s and restarted 1 s later, and each engine is restarted once. Judged from the web "
        "server's own request log (bench/chaos.py says how).", "",
        f"    python {' '.join(sys.argv)}", "",
        "| measure | value |", "|---|---|", *[f"| {k} | {val} |" for k, val in rows], ""])
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
