"""Scale benchmark (``make bench-scale``): the same crawl with 1, 2 and 3 instances of every service.

    .venv/bin/python bench/scale_bench.py --hosts 2000 --duration 240 --instances 1 2 3 \\
        --out docs/benchmarks-scale-instances.md

Each run gets a fresh synthetic web (same hosts, seed and ports) and a fresh crawl on the local stack
(``streamcrawl_launcher.crawl.Crawl`` with ``instances=N``: N processes of each service, one consumer group
per service), one run after the other. Measured as ``bench/crawl_bench.py`` measures (``crawl_cpu``,
``crawl_log``): the window starts when the services' start-up CPU has settled, just before seeding, and
lasts ``--duration`` seconds.

* **pages/s**: status-200 page requests in the server's own log that started in the window.
* **CPU-ms per page**: utime+stime of every instance of a service over the window, summed per service,
  divided by the pages; the engines (Kafka, Cassandra, versitygw) and the synthetic web apart.
* **violations**: the project's politeness rule judged from the whole request log.

On 2 cores throughput cannot grow with instances; the figure to hold is CPU-ms per page staying flat:
no coordination cost that grows with the instance count.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import crawl_cpu as cpu
from crawl_log import count_window, violation_summary
from crawl_report import machine_info
from crawl_sides import fresh_dir, log
from streamcrawl_synthweb.log import load_log

SERVICES = ("frontier", "fetcher", "parser", "dedup", "recrawl")


@dataclass
class ScaleRun:
    instances: int
    window_s: float
    pages: int
    service_cpu: dict[str, float]  # service -> CPU seconds of all its instances in the window
    infra_cpu: dict[str, float]
    synthweb_cpu_s: float
    violations: dict[str, int]
    per_instance: dict[str, float] = field(default_factory=dict)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.window_s

    def ms_per_page(self, cpu_s: float) -> float:
        return 1000.0 * cpu_s / self.pages if self.pages else float("nan")


def run(args: argparse.Namespace, n: int, wd: Path) -> ScaleRun:
    from streamcrawl_launcher.crawl import Crawl, CrawlOptions

    crawl = Crawl(CrawlOptions(workdir=wd, hosts=args.hosts, web_seed=args.web_seed, http_port=args.http_port,
                               dns_port=args.dns_port, log_level="WARNING", instances=n,
                               synthweb_args=["--profile", args.profile, "--log-level", "warning"]))

    def alive() -> None:
        dead = crawl.dead_services()
        if dead:
            raise RuntimeError(f"process(es) exited: {dead} (see {crawl.logs})")

    try:
        crawl.start()
        procs = {name: p.pid for name, p in crawl.procs.items() if name.split("-")[0] in SERVICES}
        waited = cpu.settle(procs, alive=alive)
        log(f"{n} instance(s) per service: {len(procs)} processes settled after {waited:.0f}s; seeding")
        others = {"synthweb": crawl.procs["synthweb"].pid, **cpu.infra_pids()}
        t0 = time.time()
        c0, o0 = cpu.sample_cpu(procs), cpu.sample_cpu(others)
        crawl.seed(crawl.manifest["seeds"])
        while time.time() < t0 + args.duration:
            time.sleep(1.0)
            alive()
        t1 = time.time()
        c1, o1 = cpu.sample_cpu(procs), cpu.sample_cpu(others)
    finally:
        crawl.stop()
    entries = load_log(wd / "requests.jsonl")
    per_instance = cpu.cpu_delta(c0, c1)
    by_service = {s: sum(v for k, v in per_instance.items() if k.split("-")[0] == s) for s in SERVICES}
    other = cpu.cpu_delta(o0, o1)
    counts = count_window(entries, t0, t1)
    return ScaleRun(n, t1 - t0, counts.pages, by_service, other, other.pop("synthweb", float("nan")),
                    violation_summary(entries, crawl.manifest), per_instance)


def render(runs: dict[int, list[ScaleRun]], args: argparse.Namespace) -> str:
    info = machine_info()
    ns = sorted(runs)
    lines = ["# Scale benchmark: 1, 2 and 3 instances per service", "",
             f"Re-run: `make bench-scale` (= `.venv/bin/python bench/scale_bench.py --hosts {args.hosts} "
             f"--duration {args.duration:.0f} --instances {' '.join(map(str, ns))} --repeats {args.repeats} "
             f"--out docs/benchmarks-scale-instances.md`). What is measured and how: the docstring of "
             "`bench/scale_bench.py`.", "",
             f"Machine: {info.get('cores', '?')} cores, {info.get('cpu', '?')}; the engines (Kafka, Cassandra, "
             "versitygw) on the same cores. Synthetic web: "
             f"{args.hosts} hosts, profile `{args.profile}`, seed {args.web_seed}. Window {args.duration:.0f} s "
             f"per run, {args.repeats} run(s) per instance count; medians.", "",
             "| instances per service | processes | pages/s | crawler CPU-ms per page | "
             + " | ".join(f"{s}" for s in SERVICES) + " | engines CPU-ms per page | politeness violations |",
             "|---" * (7 + len(SERVICES)) + "|"]
    for n in ns:
        rs = runs[n]
        pps = median(r.pages_per_s for r in rs)
        total = median(r.ms_per_page(sum(r.service_cpu.values())) for r in rs)
        per = [median(r.ms_per_page(r.service_cpu[s]) for r in rs) for s in SERVICES]
        eng = median(r.ms_per_page(sum(r.infra_cpu.values())) for r in rs)
        viol = max(r.violations["project_rule"] for r in rs)
        lines.append(f"| {n} | {n * len(SERVICES)} | {pps:.1f} | {total:.2f} | "
                     + " | ".join(f"{x:.2f}" for x in per) + f" | {eng:.2f} | {viol} |")
    base = median(r.ms_per_page(sum(r.service_cpu.values())) for r in runs[ns[0]])
    lines += ["", "Crawler CPU-ms per page relative to 1 instance per service: "
              + ", ".join(f"{n}: {median(r.ms_per_page(sum(r.service_cpu.values())) for r in runs[n]) / base:.2f}x"
                          for n in ns) + ".", ""]
    for n in ns:
        for i, r in enumerate(runs[n]):
            lines.append(f"- {n} instance(s), run {i + 1}: {r.pages} pages in {r.window_s:.0f} s; violations "
                         f"{r.violations}; CPU s per process: "
                         + ", ".join(f"{k} {v:.1f}" for k, v in sorted(r.per_instance.items())))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--duration", type=float, default=240.0)
    p.add_argument("--instances", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--profile", default="default")
    p.add_argument("--web-seed", type=int, default=7)
    p.add_argument("--http-port", type=int, default=8480)
    p.add_argument("--dns-port", type=int, default=8553)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/streamcrawl-bench-scale"))
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    runs: dict[int, list[ScaleRun]] = {n: [] for n in args.instances}
    for rep in range(args.repeats):  # interleaved, so a change in the machine's load hits every count alike
        for n in args.instances:
            runs[n].append(run(args, n, fresh_dir(args.workdir / f"n{n}-r{rep}")))
    text = render(runs, args)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
