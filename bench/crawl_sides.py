"""The two sides of ``bench/crawl_bench.py``: streamcrawl (every service as its own process on the local
stack, through ``streamcrawl_launcher``) and Scrapy (``bench/scrapy_side.py`` in a subprocess), each
against a fresh synthetic web, measured over the same kind of window.

A window ends after ``--duration`` seconds, or (``--until-coverage``) as soon as the server's log shows
every ground-truth page fetched: a politeness-bound crawl is then measured for exactly the work of a full
crawl, on both sides.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import crawl_cpu as cpu
from crawl_log import CoverageTail, Truth, WindowCounts, count_window, coverage, violation_summary
from streamcrawl_synthweb.log import load_log

SIDES = ("streamcrawl", "scrapy")


@dataclass
class SideResult:
    side: str
    hosts: int
    t0: float
    t1: float
    counts: WindowCounts
    crawler_cpu: dict[str, float]  # per process, window CPU seconds
    synthweb_cpu_s: float
    infra_cpu: dict[str, float]
    machine_busy_s: float
    violations: dict[str, int]
    extra: dict[str, Any] = field(default_factory=dict)
    launcher_cpu_s: float = float("nan")  # this bench process (seeding, sampling, the log tail)
    counters: dict[str, dict[str, float]] = field(default_factory=dict)  # service → "kind|row" → count
    coverage_frac: float = float("nan")
    coverage_s: float | None = None  # from t0 to the last ground-truth page's first fetch
    ended_by: str = "window"

    @property
    def window_s(self) -> float:
        return self.t1 - self.t0

    @property
    def pages_per_s(self) -> float:
        return self.counts.pages / self.window_s

    @property
    def requests_per_s(self) -> float:
        return self.counts.requests / self.window_s

    @property
    def crawler_cpu_s(self) -> float:
        return sum(self.crawler_cpu.values())

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000.0 * self.crawler_cpu_s / self.counts.pages if self.counts.pages else float("nan")

    @property
    def infra_cpu_s(self) -> float:
        return sum(self.infra_cpu.values())


def synthweb_args(args: argparse.Namespace) -> list[str]:
    return ["--profile", args.profile, "--log-level", "warning"]


def synthweb_cmd(args: argparse.Namespace, wd: Path) -> list[str]:
    return ["-m", "streamcrawl_synthweb.main", "--hosts", str(args.hosts), "--seed", str(args.web_seed),
            "--http-port", str(args.http_port), "--dns-port", str(args.dns_port),
            "--log", str(wd / "requests.jsonl"), "--manifest", str(wd / "manifest.json"),
            "--ready-file", str(wd / "synthweb.ready"), *synthweb_args(args)]


def fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def log(msg: str) -> None:
    print(f"[crawl-bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _wait_window(args: argparse.Namespace, t0: float, tail: CoverageTail | None, alive: Callable[[], None],
                 side: str) -> str:
    """Until the window is over: ``--duration`` seconds, or full coverage when asked. Returns why it ended."""
    end = t0 + args.duration
    last_note = t0
    while (left := end - time.time()) > 0:
        time.sleep(min(0.5, left))
        alive()
        covered = tail.poll() if tail is not None else 0
        if tail is not None and args.until_coverage and tail.complete:
            return "coverage"
        if time.time() - last_note >= 10.0:
            last_note = time.time()
            extra = f", {covered}/{len(tail.truth.pages)} truth pages" if tail is not None else ""
            log(f"{side}: {time.time() - t0:5.0f}s{extra}")
    return "window"


class PySpy:
    """py-spy recorders on the given processes for the window (``--pyspy``): collapsed stacks per process."""

    def __init__(self, pids: dict[str, int], wd: Path, rate: int) -> None:
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        for name, pid in pids.items():
            out = wd / f"pyspy-{name}.txt"
            self.procs[name] = subprocess.Popen(
                [exe, "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking",
                 "--output", str(out)], stdout=subprocess.DEVNULL, stderr=(wd / f"pyspy-{name}.log").open("wb"),
                start_new_session=True)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)  # py-spy writes its output on Ctrl-C
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def _flat(counts: dict[str, cpu.Counts]) -> dict[str, dict[str, float]]:
    return {svc: {f"{kind}|{row}": v for (kind, row), v in c.items()} for svc, c in counts.items()}


def run_streamcrawl(args: argparse.Namespace, wd: Path, truth: Truth | None = None) -> SideResult:
    from streamcrawl_launcher.crawl import SERVICES, Crawl, CrawlOptions  # needs confluent_kafka

    opts = CrawlOptions(workdir=wd, hosts=args.hosts, web_seed=args.web_seed, http_port=args.http_port,
                        dns_port=args.dns_port, log_level="WARNING", synthweb_args=synthweb_args(args))
    crawl = Crawl(opts)

    def alive() -> None:
        dead = crawl.dead_services()
        if dead:
            raise RuntimeError(f"streamcrawl process(es) exited: {dead} (see {crawl.logs})")

    spy: PySpy | None = None
    try:
        crawl.start()
        services = {n: crawl.procs[n].pid for n in SERVICES}
        waited = cpu.settle(services, alive=alive)
        log(f"streamcrawl: services settled after {waited:.0f}s; seeding {len(crawl.manifest['seeds'])} hosts")
        others = {"synthweb": crawl.procs["synthweb"].pid, **cpu.infra_pids()}
        tail = CoverageTail(wd / "requests.jsonl", truth) if truth is not None else None
        if args.pyspy:
            spy = PySpy(services, wd, args.pyspy_rate)
        m0 = cpu.scrape()
        t0, busy0, l0 = time.time(), cpu.machine_busy_s(), cpu.self_cpu_s()
        c0, o0, th0 = cpu.sample_cpu(services), cpu.sample_cpu(others), cpu.sample_threads(services)
        crawl.seed(crawl.manifest["seeds"])
        ended_by = _wait_window(args, t0, tail, alive, "streamcrawl")
        t1, busy1, l1 = time.time(), cpu.machine_busy_s(), cpu.self_cpu_s()
        c1, o1, th1 = cpu.sample_cpu(services), cpu.sample_cpu(others), cpu.sample_threads(services)
        m1 = cpu.scrape()
        if spy is not None:
            spy.stop()
    finally:
        if spy is not None:
            spy.stop()
        crawl.stop()
    entries = load_log(wd / "requests.jsonl")
    other = cpu.cpu_delta(o0, o1)
    counters = _flat(cpu.counts_delta(m0, m1))
    counters.setdefault("launcher", {})["produced|streamcrawl.seeds"] = float(len(crawl.manifest["seeds"]))
    crawler_cpu = cpu.cpu_delta(c0, c1)
    r = SideResult("streamcrawl", args.hosts, t0, t1, count_window(entries, t0, t1, args.bin),
                   crawler_cpu, other.pop("synthweb", float("nan")), other, busy1 - busy0,
                   violation_summary(entries, crawl.manifest),
                   {"settle_s": waited, "log_requests_total": len(entries),
                    "threads": cpu.threads_delta(th0, th1, crawler_cpu)}, l1 - l0, counters, ended_by=ended_by)
    if truth is not None:
        r.coverage_frac, r.coverage_s = coverage(entries, truth, t0)
    return r


def _read_json(path: Path) -> dict[str, Any]:
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc


def _stop(proc: subprocess.Popen[bytes], first: int, grace_s: float) -> None:
    """Signal our own child's process group (``first``, then SIGKILL after ``grace_s``) and reap it."""
    if proc.poll() is None:
        os.killpg(proc.pid, first)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def run_scrapy(args: argparse.Namespace, wd: Path, truth: Truth | None = None) -> SideResult:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    with (wd / "synthweb.log").open("ab") as fh:
        web = subprocess.Popen([sys.executable, *synthweb_cmd(args, wd)], stdout=fh, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        deadline = time.time() + 60
        while not (wd / "synthweb.ready").exists():
            if web.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"synthetic web did not start (see {wd / 'synthweb.log'})")
            time.sleep(0.1)
        manifest = json.loads((wd / "manifest.json").read_text())
        result = wd / "scrapy.json"
        cmd = [sys.executable, str(Path(__file__).with_name("scrapy_side.py")), "--manifest",
               str(wd / "manifest.json"), "--duration", str(args.duration), "--result", str(result)]
        with (wd / "scrapy.log").open("ab") as fh:
            spider = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      env=env, start_new_session=True)
        try:
            deadline = time.time() + 120
            while not _read_json(result):
                if spider.poll() is not None or time.time() > deadline:
                    raise RuntimeError(f"Scrapy did not open its spider (see {wd / 'scrapy.log'})")
                time.sleep(0.1)
            others = {"synthweb": web.pid, **cpu.infra_pids()}
            busy0, o0, p0, l0 = cpu.machine_busy_s(), cpu.sample_cpu(others), cpu.cpu_seconds(spider.pid), \
                cpu.self_cpu_s()
            t_open = float(_read_json(result)["t_open"])
            tail = CoverageTail(wd / "requests.jsonl", truth) if truth is not None else None

            def alive() -> None:
                if spider.poll() is not None:
                    raise _SpiderClosed

            try:
                ended_by = _wait_window(args, t_open, tail, alive, "scrapy")
            except _SpiderClosed:
                ended_by = "closed"
            t_detect, busy1, o1, p1, l1 = time.time(), cpu.machine_busy_s(), cpu.sample_cpu(others), \
                cpu.cpu_seconds(spider.pid), cpu.self_cpu_s()
            if ended_by == "window":
                deadline = time.time() + 60
                while "t_end" not in (doc := _read_json(result)) and spider.poll() is None \
                        and time.time() < deadline:
                    time.sleep(0.1)
            log(f"scrapy: window over ({ended_by}); letting it shut down (at most {args.grace:.0f}s)")
            if ended_by == "coverage":
                _stop(spider, signal.SIGINT, args.grace)  # Scrapy's graceful stop
            try:
                spider.wait(args.grace)
            except subprocess.TimeoutExpired:
                _stop(spider, signal.SIGINT, 15)  # Scrapy's graceful stop; SIGKILL if it lingers
        finally:
            _stop(spider, signal.SIGTERM, 15)
    finally:
        _stop(web, signal.SIGTERM, 30)
    entries = load_log(wd / "requests.jsonl")
    doc = _read_json(result)
    other = cpu.cpu_delta(o0, o1)
    proc_cpu = (p1 - p0) if p0 is not None and p1 is not None else float("nan")
    if ended_by == "window" and "t_end" in doc:  # the spider's own window, measured in-process
        t0, t1, crawler = float(doc["t_open"]), float(doc["t_end"]), float(doc["cpu_end"]) - float(doc["cpu_open"])
    elif ended_by == "closed" and "cpu_closed" in doc:  # it finished on its own before the window did
        t0, t1, crawler = float(doc["t_open"]), float(doc["t_closed"]), \
            float(doc["cpu_closed"]) - float(doc["cpu_open"])
    else:  # full coverage: the bench's own /proc samples bracket the window
        t0, t1, crawler = t_open, t_detect, proc_cpu
    r = SideResult("scrapy", args.hosts, t0, t1, count_window(entries, t0, t1, args.bin), {"scrapy": crawler},
                   other.pop("synthweb", float("nan")), other, busy1 - busy0, violation_summary(entries, manifest),
                   {"proc_cpu_s": proc_cpu, "scrapy_version": doc.get("scrapy"), "reason": doc.get("reason"),
                    "stats": {k: v for k, v in doc.get("stats", {}).items()
                              if k.startswith(("downloader/request_count", "downloader/response_status_count",
                                               "robotstxt/", "retry/count", "dupefilter", "memusage/max"))},
                    "log_requests_total": len(entries)}, l1 - l0, ended_by=ended_by)
    if truth is not None:
        r.coverage_frac, r.coverage_s = coverage(entries, truth, t0)
    return r


class _SpiderClosed(Exception):
    pass
