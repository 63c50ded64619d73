"""Engine-fault benchmark (``make bench-faults``): the same crawl without a fault (the baseline, measured in
the same run), then with each engine frozen (SIGSTOP/SIGCONT) and restarted once, ``--at`` seconds after
seeding; each scenario ``--repeats`` times, medians reported.

    .venv/bin/python bench/engine_faults.py --hosts 100 --freeze 30 --repeats 1 --out docs/benchmarks-faults.md

Runs against the stack of ``$STREAMCRAWL_STACK_DIR`` and freezes its engines: use a private stack (README,
"Engine faults"). Judged from the synthetic web's own request log (streamcrawl_launcher.verdict):

* **full coverage**: seconds from the first request until every reachable page was fetched; **delay** is
  that minus the baseline's, and the target is at most the outage plus 30 s.
* **90 %**: seconds to 90 % coverage; **coverage at** 30/60/90/120 s.
* **worst wait**: the longest any host waited after the outage's end beyond its politeness delay;
  **held hosts**: hosts that waited more than 10 s beyond it.
* **violations**, **lost** pages, **repeats** (pages fetched more than once); **pipeline drained**: every
  consumer group caught up within 240 s of the last fault (else the crawl is judged as it stands).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import median

from crawl_report import machine_info
from streamcrawl_launcher.faultrun import run_faults
from streamcrawl_launcher.faults import Fault
from streamcrawl_launcher.verdict import coverage_timeline, excess_waits

HELD_S = 10.0
MARKS = (30, 60, 90, 120)
ENV = {"STREAMCRAWL_FETCHER_SITEMAPS": "false", "STREAMCRAWL_FETCHER_READ_TIMEOUT_S": "5"}


@dataclass
class Result:
    scenario: str
    outage_s: float
    full_s: float | None
    t90_s: float | None
    marks: list[float]
    worst_s: float
    held: int
    violations: int
    lost: int
    repeats: int
    idle: bool


def scenarios(freeze_s: float) -> list[tuple[str, Fault | None]]:
    out: list[tuple[str, Fault | None]] = [("baseline", None)]
    out += [(f"freeze {e} {freeze_s:.0f}s", Fault(e, "freeze", freeze_s)) for e in ("kafka", "cassandra", "s3")]
    out += [(f"restart {e}", Fault(e, "restart")) for e in ("kafka", "cassandra", "s3")]
    return out


def one(workdir: Path, name: str, fault: Fault | None, args: argparse.Namespace) -> Result:
    run = run_faults(workdir, args.hosts, args.seed, args.profile, [fault] if fault else [], first_at_s=args.at,
                     env=ENV, timeout_s=240, allow_timeout=True)
    v = run.verdict()
    timeline = coverage_timeline(run.entries, run.truth.pages, v.first_request_at, every_s=1.0)
    t90 = next((t for t, c in timeline if c >= 0.9), None)
    marks = [next((c for t, c in timeline if t >= m), timeline[-1][1] if timeline else 0.0) for m in MARKS]
    waits = list(excess_waits(run.entries, run.outages[0], run.truth.crawl_delays).values()) if run.outages else []
    res = Result(name, run.outages[0].length_s if run.outages else 0.0, v.time_to_full_s, t90, marks,
                 max([0.0, *waits]), sum(w > HELD_S for w in waits), len(v.violations), len(v.lost), v.repeats,
                 run.idle)
    print(f"bench-faults: {res}", flush=True)
    return res


def _med(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if len(known) == len(values) and known else None


def _f(v: float | None, nd: int = 0) -> str:
    return "never" if v is None else f"{v:.{nd}f}"


def render(rows: dict[str, list[Result]], args: argparse.Namespace, command: str) -> str:
    base = _med([r.full_s for r in rows["baseline"]])
    info = machine_info()
    out = ["# Engine faults: time to recover (`make bench-faults`)", "",
           f"Measured {time.strftime('%Y-%m-%d')} on {info['cores']} cores ({info['cpu']}), Python "
           f"{info['python']}, the local single-node stack (a private one: `STREAMCRAWL_STACK_DIR`). One crawl "
           f"per scenario of the synthetic web's `{args.profile}` profile ({args.hosts} hosts, seed {args.seed}); the "
           f"fault {args.at:.0f} s after seeding; {args.repeats} run(s) per scenario, medians. The baseline is "
           "measured in the same run. Judged from the web server's own request log (bench/engine_faults.py "
           "says how).", "", f"    {command}", "",
           "| scenario | outage s | full coverage s | delay vs baseline s (target ≤ outage + 30) | 90 % s | "
           + " | ".join(f"coverage at {m} s" for m in MARKS) + " | worst wait s | held hosts (> 10 s) | "
           "violations | lost | repeats | pipeline drained |",
           "|---|---:|---:|---:|---:|" + "---:|" * len(MARKS) + "---:|---:|---:|---:|---:|---|"]
    for name, rs in rows.items():
        full = _med([r.full_s for r in rs])
        outage = median(r.outage_s for r in rs)
        delay = None if full is None or base is None else full - base
        ok = "" if delay is None or name == "baseline" else (" ✓" if delay <= outage + 30 else " ✗")
        marks = [median(r.marks[i] for r in rs) for i in range(len(MARKS))]
        out.append(f"| {name} | {outage:.0f} | {_f(full)} | {_f(delay) if name != 'baseline' else '–'}{ok} | "
                   f"{_f(_med([r.t90_s for r in rs]))} | " + " | ".join(f"{m:.2f}" for m in marks)
                   + f" | {median(r.worst_s for r in rs):.1f} | {median(r.held for r in rs):.0f} | "
                   f"{max(r.violations for r in rs)} | {max(r.lost for r in rs)} | "
                   f"{median(r.repeats for r in rs):.0f} | {'yes' if all(r.idle for r in rs) else 'no (240 s)'} |")
    out.append("")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hosts", type=int, default=100)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--profile", default="polite")
    p.add_argument("--freeze", type=float, default=30.0)
    p.add_argument("--at", type=float, default=15.0, help="seconds after seeding")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--only", nargs="*", help="scenario names (default: all)")
    p.add_argument("--workdir", type=Path, default=Path("run/bench-faults"))
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    rows: dict[str, list[Result]] = {}
    for _ in range(args.repeats):
        for name, fault in scenarios(args.freeze):
            if args.only and name != "baseline" and name not in args.only:
                continue
            shutil.rmtree(args.workdir, ignore_errors=True)
            rows.setdefault(name, []).append(one(args.workdir, name, fault, args))
    text = render(rows, args, "python " + " ".join(sys.argv))
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
