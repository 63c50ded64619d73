"""Scale benchmark (``make bench-scale``): the same crawl with 1, 2 and 3 instances of every service.

    .venv/bin/python bench/scale_bench.py --hosts 2000 --duration 240 --instances 1 2 3 \\
        --out docs/benchmarks-scale-instances.md

Each run gets a fresh synthetic web (same hosts, seed and ports) and a fresh crawl on the local stack
(``streamcrawl_launcher.crawl.Crawl`` with ``instances=N``: N processes of each service, one consumer group
per service), one run after the other. Measured as ``bench/crawl_bench.py`` measures (``crawl_cpu``,
``crawl_log``): the window starts when the services' start-up CPU has settled, just before seeding, and
lasts ``--duration`` seconds (with ``--warmup W``, it starts W seconds after the seeding instead).

* **pages/s**: status-200 page requests in the server's own log that started in the window.
* **CPU-ms per page**: utime+stime of every instance of a service over the window, summed per service,
  divided by the pages; the engines (Kafka, Cassandra, versitygw) and the synthetic web apart.
* **violations**: the project's politeness rule judged from the whole request log.
* **machine busy cores** and **CPU pressure**: the whole machine's non-idle CPU seconds (``/proc/stat``)
  per second of the window, and the share of the window in which some runnable task waited for a core
  (``/proc/pressure/cpu``, "some"): whether a run was CPU-bound at all (``--profile deep`` with a few
  dozen hosts gives a politeness-bound crawl that leaves the cores part idle).
* **threads**: each service's CPU in the window split into its main thread (the event loop),
  librdkafka's threads and the rest (``crawl_cpu.thread_cpu``), summed over its instances.

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
    busy_cores: float = float("nan")  # the whole machine's non-idle CPU-s per second of the window
    pressure_pct: float = float("nan")  # % of the window with a task waiting for a core (PSI cpu "some")
    loadavg: str = ""
    threads: dict[str, dict[str, float]] = field(default_factory=dict)  # service -> main/librdkafka/other CPU-s

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.window_s

    def ms_per_page(self, cpu_s: float) -> float:
        return 1000.0 * cpu_s / self.pages if self.pages else float("nan")


def cpu_pressure_s(path: Path = Path("/proc/pressure/cpu")) -> float:
    """Seconds (cumulative) in which some runnable task waited for a core; NaN where PSI is absent."""
    try:
        some = path.read_text().splitlines()[0]
        return int(some.rsplit("total=", 1)[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return float("nan")


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
        if args.warmup:  # the window starts --warmup s after the seeds: past the crawl's ramp-up
            crawl.seed(crawl.manifest["seeds"])
            for _ in range(int(args.warmup)):
                time.sleep(1.0)
                alive()
        t0 = time.time()
        c0, o0 = cpu.sample_cpu(procs), cpu.sample_cpu(others)
        th0, busy0, psi0 = cpu.sample_threads(procs), cpu.machine_busy_s(), cpu_pressure_s()
        if not args.warmup:
            crawl.seed(crawl.manifest["seeds"])
        while time.time() < t0 + args.duration:
            time.sleep(1.0)
            alive()
        t1 = time.time()
        c1, o1 = cpu.sample_cpu(procs), cpu.sample_cpu(others)
        th1, busy1, psi1 = cpu.sample_threads(procs), cpu.machine_busy_s(), cpu_pressure_s()
        load = Path("/proc/loadavg").read_text().split()[:3]
    finally:
        crawl.stop()
    entries = load_log(wd / "requests.jsonl")
    per_instance = cpu.cpu_delta(c0, c1)
    by_service = {s: sum(v for k, v in per_instance.items() if k.split("-")[0] == s) for s in SERVICES}
    other = cpu.cpu_delta(o0, o1)
    counts = count_window(entries, t0, t1)
    threads: dict[str, dict[str, float]] = {}
    for name, split in cpu.threads_delta(th0, th1, per_instance).items():
        acc = threads.setdefault(name.split("-")[0], {})
        for kind, v in split.items():
            acc[kind] = acc.get(kind, 0.0) + v
    return ScaleRun(n, t1 - t0, counts.pages, by_service, other, other.pop("synthweb", float("nan")),
                    violation_summary(entries, crawl.manifest), per_instance,
                    (busy1 - busy0) / (t1 - t0), 100.0 * (psi1 - psi0) / (t1 - t0), " / ".join(load), threads)


def render(runs: dict[int, list[ScaleRun]], args: argparse.Namespace) -> str:
    info = machine_info()
    ns = sorted(runs)
    lines = ["# Scale benchmark: 1, 2 and 3 instances per service", "",
             f"Re-run: `make bench-scale` (= `.venv/bin/python bench/scale_bench.py --hosts {args.hosts} "
             f"--duration {args.duration:.0f} --warmup {args.warmup:.0f} --profile {args.profile} "
             f"--instances {' '.join(map(str, ns))} --repeats {args.repeats} "
             f"--out docs/benchmarks-scale-instances.md`). What is measured and how: the docstring of "
             "`bench/scale_bench.py`.", "",
             f"Machine: {info.get('cores', '?')} cores, {info.get('cpu', '?')}; the engines (Kafka, Cassandra, "
             "versitygw) on the same cores. Synthetic web: "
             f"{args.hosts} hosts, profile `{args.profile}`, seed {args.web_seed}. Window {args.duration:.0f} s "
             f"per run, {args.repeats} run(s) per instance count; medians.", "",
             "| instances per service | processes | pages/s | crawler CPU-ms per page | "
             + " | ".join(f"{s}" for s in SERVICES) + " | engines CPU-ms per page | politeness violations"
             " | machine busy cores | CPU pressure % |",
             "|---" * (8 + len(SERVICES)) + "|"]
    for n in ns:
        rs = runs[n]
        pps = median(r.pages_per_s for r in rs)
        total = median(r.ms_per_page(sum(r.service_cpu.values())) for r in rs)
        per = [median(r.ms_per_page(r.service_cpu[s]) for r in rs) for s in SERVICES]
        eng = median(r.ms_per_page(sum(r.infra_cpu.values())) for r in rs)
        viol = max(r.violations["project_rule"] for r in rs)
        busy, psi = median(r.busy_cores for r in rs), median(r.pressure_pct for r in rs)
        lines.append(f"| {n} | {n * len(SERVICES)} | {pps:.1f} | {total:.2f} | "
                     + " | ".join(f"{x:.2f}" for x in per) + f" | {eng:.2f} | {viol} | {busy:.2f} | {psi:.0f} |")
    base = median(r.ms_per_page(sum(r.service_cpu.values())) for r in runs[ns[0]])
    lines += ["", "Crawler CPU-ms per page relative to 1 instance per service: "
              + ", ".join(f"{n}: {median(r.ms_per_page(sum(r.service_cpu.values())) for r in runs[n]) / base:.2f}x"
                          for n in ns) + ".", ""]
    for n in ns:
        for i, r in enumerate(runs[n]):
            lines.append(f"- {n} instance(s), run {i + 1}: {r.pages} pages in {r.window_s:.0f} s; violations "
                         f"{r.violations}; CPU s per process: "
                         + ", ".join(f"{k} {v:.1f}" for k, v in sorted(r.per_instance.items()))
                         + f"; machine busy {r.busy_cores:.2f} cores, CPU pressure {r.pressure_pct:.0f}%, "
                         f"load {r.loadavg}; threads (main / librdkafka / other CPU s): "
                         + ", ".join(f"{s} {t.get('main', 0):.1f} / {t.get('librdkafka', 0):.1f} / "
                                     f"{t.get('other', 0):.1f}" for s, t in sorted(r.threads.items())))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--hosts", type=int, default=2000)
    p.add_argument("--duration", type=float, default=240.0)
    p.add_argument("--instances", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--profile", default="default")
    p.add_argument("--warmup", type=float, default=0.0,
                   help="seconds between seeding and the window's start (0: the window starts at the seeding)")
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
