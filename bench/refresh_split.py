"""The frontier's discovery/refresh split on a loaded real crawl (``make bench-refresh-split``, issue 14).

    .venv/bin/python bench/refresh_split.py --shares 0.3 0.5 --out docs/benchmarks-refresh-split.md

One crawl per ``--shares`` value (STREAMCRAWL_FRONTIER_DISCOVERY_SHARE), each through
``streamcrawl_launcher.crawl.Crawl`` on the local stack (it resets the crawl's topics, tables and bucket
first) against a fresh synthetic web of ``--hosts`` ordinary hosts (profile ``polite``: a few dozen pages
each), in a regime where the frontier is the bottleneck and both kinds of work wait:

* **few leases**: STREAMCRAWL_FRONTIER_MAX_LEASES (``--max-leases``, the frontier's cap on outstanding
  fetch requests) is far below the hosts that may be contacted at any moment (every host, after its 1 s
  politeness delay), so the frontier must choose which ready hosts get the slots;
* **refreshes due in bulk**: the recrawl intervals are scaled down to seconds (the README's
  STREAMCRAWL_RECRAWL_* settings), so every page fetched comes due again within a few dozen seconds;
* **discoveries still found**: the web has far more pages than the window can fetch.

**The split is judged from the synthetic web server's own request log**, never from the crawler: a request
for a URL the server had served before, or one carrying If-None-Match / If-Modified-Since, is a refresh;
a first request is a discovery. robots.txt, the soft-404 probes and sitemaps are left out.

**Both kinds backlogged** is read from the crawl's durable state, once a second (``--sample``): a host is
*ready* for a kind when its queue in Cassandra (``frontier_host_queue``) holds a URL of that kind whose
``not_before`` has passed, it holds no lease and its politeness timer (``host_state.next_allowed_at``) has
passed. A sample is backlogged when at least ``--max-leases`` hosts are ready for each kind: the frontier
could then fill every slot with either kind, so the kinds it leases are its own choice. A window of
``--window`` seconds counts when every sample in it is backlogged; the share is reported over those
windows (median and overall), next to the configured ``1 - discovery_share``.

Politeness violations come from the same log (``crawl_log.violation_summary``, the project rule).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import statistics
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crawl_cpu import settle
from crawl_log import violation_summary
from crawl_report import machine_info
from crawl_sides import fresh_dir, log
from streamcrawl_core.traps import SOFT404_PROBE_PREFIX
from streamcrawl_synthweb.log import LogEntry, load_log
from streamcrawl_synthweb.truth import normalize_url


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--shares", type=float, nargs="+", default=[0.3, 0.5], help="discovery_share of each run")
    p.add_argument("--hosts", type=int, default=150)
    p.add_argument("--profile", default="polite")
    p.add_argument("--web-seed", type=int, default=7)
    p.add_argument("--duration", type=float, default=100.0, help="seconds of crawl per run, from seeding")
    p.add_argument("--max-leases", type=int, default=3, help="STREAMCRAWL_FRONTIER_MAX_LEASES")
    p.add_argument("--initial-interval", type=float, default=12.0, help="STREAMCRAWL_RECRAWL_INITIAL_INTERVAL_S")
    p.add_argument("--min-interval", type=float, default=6.0, help="STREAMCRAWL_RECRAWL_MIN_INTERVAL_S")
    p.add_argument("--max-interval", type=float, default=40.0, help="STREAMCRAWL_RECRAWL_MAX_INTERVAL_S")
    p.add_argument("--window", type=float, default=10.0, help="seconds per window of the split")
    p.add_argument("--sample", type=float, default=1.0, help="seconds between backlog samples")
    p.add_argument("--http-port", type=int, default=8480)
    p.add_argument("--dns-port", type=int, default=8553)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/streamcrawl-bench-refresh-split"))
    p.add_argument("--lock", type=Path, help="hold this flock during each crawl (one run at a time), not between")
    p.add_argument("--out", type=Path, help="write the Markdown report here (it is printed either way)")
    return p.parse_args(argv)


def env_for(args: argparse.Namespace, share: float) -> dict[str, str]:
    return {
        "STREAMCRAWL_FRONTIER_DISCOVERY_SHARE": str(share),
        "STREAMCRAWL_FRONTIER_MAX_LEASES": str(args.max_leases),
        "STREAMCRAWL_RECRAWL_INITIAL_INTERVAL_S": str(args.initial_interval),
        "STREAMCRAWL_RECRAWL_MIN_INTERVAL_S": str(args.min_interval),
        "STREAMCRAWL_RECRAWL_MAX_INTERVAL_S": str(args.max_interval),
        "STREAMCRAWL_RECRAWL_SCAN_INTERVAL_S": "1",
        "STREAMCRAWL_RECRAWL_SCAN_LOOKBACK_S": "600",
    }


# ---------------------------------------------------------------------------------------------- the log


def counted(e: LogEntry) -> bool:
    """A page request: not robots.txt, a soft-404 probe or a sitemap."""
    return not (e.path.startswith("/robots") or e.path.startswith(SOFT404_PROBE_PREFIX) or "sitemap" in e.path)


def classify(entries: list[LogEntry]) -> list[tuple[float, str]]:
    """(start, kind) per request, in start order, from the server's log alone: "discovery" | "refresh" for
    the counted requests, "other" for those left out (robots.txt, probes, sitemaps), "other-repeat" for
    those of them the server had served before."""
    seen: set[str] = set()
    out: list[tuple[float, str]] = []
    for e in sorted(entries, key=lambda e: e.start):
        url = normalize_url(f"http://{e.host}:{e.port}{e.path}")
        repeat = url in seen or bool(e.if_none_match or e.if_modified_since)
        seen.add(url)
        if counted(e):
            out.append((e.start, "refresh" if repeat else "discovery"))
        else:
            out.append((e.start, "other-repeat" if repeat else "other"))
    return out


# ---------------------------------------------------------------------------------------------- the backlog


@dataclass(frozen=True)
class Sample:
    t: float
    ready: dict[str, int]  # kind → hosts ready for it (see the module docstring)
    queued: dict[str, int]  # kind → URLs queued in Cassandra
    leased: int  # hosts holding a lease
    in_memory: dict[str, int]  # kind → the frontier's own streamcrawl_frontier_ready_hosts (its memory's view)


class Backlog:
    """Reads the crawl's durable queue and host timers (two small table scans a sample)."""

    def __init__(self, settings: Any, metrics_url: str) -> None:
        from streamcrawl_runtime.connect import blocking_cql_session

        self.session = blocking_cql_session(settings)
        self.metrics_url = metrics_url

    def in_memory(self) -> dict[str, int]:
        out = {"discovery": -1, "refresh": -1}  # -1: not scraped
        try:
            with urllib.request.urlopen(self.metrics_url, timeout=2.0) as resp:
                text = resp.read().decode()
        except OSError:
            return out
        for line in text.splitlines():
            for kind in out:
                if line.startswith(f'streamcrawl_frontier_ready_hosts{{kind="{kind}"}}'):
                    out[kind] = int(float(line.rsplit(" ", 1)[1]))
        return out

    def sample(self) -> Sample:
        from streamcrawl_runtime.cassandra_state import epoch

        now = time.time()
        hosts: dict[str, tuple[float, bool]] = {}
        for r in self.session.execute("SELECT host, next_allowed_at, lease_id FROM host_state"):
            hosts[str(r.host)] = (epoch(r.next_allowed_at) or 0.0, r.lease_id is not None)
        ready: dict[str, set[str]] = {"discovery": set(), "refresh": set()}
        queued = {"discovery": 0, "refresh": 0}
        for r in self.session.execute("SELECT host, kind, not_before FROM frontier_host_queue"):
            kind = "refresh" if r.kind == "refresh" else "discovery"
            queued[kind] += 1
            timer, leased = hosts.get(str(r.host), (0.0, False))
            if (epoch(r.not_before) or 0.0) <= now and timer <= now and not leased:
                ready[kind].add(str(r.host))
        return Sample(now, {k: len(v) for k, v in ready.items()}, queued, sum(1 for _, le in hosts.values() if le),
                      self.in_memory())

    def close(self) -> None:
        self.session.close()


# ---------------------------------------------------------------------------------------------- one run


@dataclass
class Window:
    t0: float
    discovery: int = 0
    refresh: int = 0
    other: int = 0  # left out: robots.txt, soft-404 probes, sitemaps (first requests)
    other_repeat: int = 0  # left out, and served before
    samples: list[Sample] = field(default_factory=list)

    @property
    def requests(self) -> int:
        return self.discovery + self.refresh

    @property
    def refresh_share(self) -> float:
        return self.refresh / self.requests if self.requests else float("nan")

    def backlogged(self, min_ready: int, min_samples: int) -> bool:
        return len(self.samples) >= min_samples and all(
            min(s.ready.values()) >= min_ready for s in self.samples)


@dataclass
class RunResult:
    share: float
    t0: float
    t1: float
    windows: list[Window]
    violations: dict[str, int]
    requests: int
    settle_s: float
    load0: tuple[float, float, float]  # load average when seeding
    load: tuple[float, float, float]  # and when the log was read

    def judged(self, args: argparse.Namespace) -> list[Window]:
        need = max(1, int(args.window / args.sample * 0.7))  # a sample may be late under load
        return [w for w in self.windows if w.backlogged(args.max_leases, need)]


def windows_of(kinds: list[tuple[float, str]], samples: list[Sample], t0: float, t1: float,
               width: float) -> list[Window]:
    n = max(1, int((t1 - t0) // width))
    ws = [Window(t0 + i * width) for i in range(n)]
    for t, kind in kinds:
        i = int((t - t0) // width)
        if 0 <= i < n:
            w = ws[i]
            if kind == "refresh":
                w.refresh += 1
            elif kind == "discovery":
                w.discovery += 1
            elif kind == "other":
                w.other += 1
            else:
                w.other_repeat += 1
    for s in samples:
        i = int((s.t - t0) // width)
        if 0 <= i < n:
            ws[i].samples.append(s)
    return ws


def run_one(args: argparse.Namespace, share: float, wd: Path) -> RunResult:
    from streamcrawl_launcher.crawl import METRICS_PORTS, SERVICES, Crawl, CrawlOptions  # needs confluent_kafka

    opts = CrawlOptions(workdir=wd, hosts=args.hosts, web_seed=args.web_seed, http_port=args.http_port,
                        dns_port=args.dns_port, log_level="WARNING", extra_env=env_for(args, share),
                        synthweb_args=["--profile", args.profile, "--log-level", "warning"])
    crawl = Crawl(opts)
    samples: list[Sample] = []

    def alive() -> None:
        dead = crawl.dead_services()
        if dead:
            raise RuntimeError(f"streamcrawl process(es) exited: {dead} (see {crawl.logs})")

    backlog: Backlog | None = None
    try:
        crawl.start()
        waited = settle({n: crawl.procs[n].pid for n in SERVICES}, alive=alive, timeout_s=45.0)
        backlog = Backlog(crawl.settings, f"http://127.0.0.1:{METRICS_PORTS['frontier']}/metrics")
        log(f"share {share}: services settled after {waited:.0f}s; seeding {len(crawl.manifest['seeds'])} hosts")
        load0 = os.getloadavg()
        t0 = time.time()
        crawl.seed(crawl.manifest["seeds"])
        end, next_note = t0 + args.duration, t0 + 20.0
        while (now := time.time()) < end:
            alive()
            s = backlog.sample()
            samples.append(s)
            if now >= next_note:
                next_note += 20.0
                log(f"share {share}: {now - t0:4.0f}s ready {s.ready} (frontier's view {s.in_memory}) "
                    f"queued {s.queued} "
                    f"leased {s.leased}")
            time.sleep(max(0.0, args.sample - (time.time() - now)))
        t1 = time.time()
    finally:
        if backlog is not None:
            backlog.close()
        crawl.stop()
        crawl.close()
    entries = load_log(wd / "requests.jsonl")
    kinds = classify(entries)
    la = os.getloadavg()
    return RunResult(share, t0, t1, windows_of(kinds, samples, t0, t1, args.window),
                     violation_summary(entries, crawl.manifest), len(entries), waited, load0, la)


# ---------------------------------------------------------------------------------------------- the report


def fmt(x: float, digits: int = 1) -> str:
    return "-" if x != x else f"{x:.{digits}f}"


def summary(r: RunResult, args: argparse.Namespace) -> dict[str, float]:
    judged = r.judged(args)
    shares = [w.refresh_share for w in judged if w.requests]
    d, f = sum(w.discovery for w in judged), sum(w.refresh for w in judged)
    o, orep = sum(w.other for w in judged), sum(w.other_repeat for w in judged)
    return {"windows": len(judged), "of": len(r.windows), "discovery": d, "refresh": f,
            "median": 100 * statistics.median(shares) if shares else float("nan"),
            "overall": 100 * f / (d + f) if d + f else float("nan"),
            "lo": 100 * min(shares) if shares else float("nan"), "hi": 100 * max(shares) if shares else float("nan"),
            "left_out": o + orep,
            "with_left_out": 100 * (f + orep) / (d + f + o + orep) if d + f + o + orep else float("nan"),
            "rate": (d + f) / (len(judged) * args.window) if judged else float("nan")}


def render(results: list[RunResult], args: argparse.Namespace, info: dict[str, Any], command: str) -> str:
    lines = [
        "# The discovery/refresh split under load (issue 14)",
        "",
        f"`{command}` (`make bench-refresh-split`), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        f"Machine: {info['cores']} cores ({info['cpu']}), Python {info['python']}, shared with other work; "
        f"load average (1/5/15 min) {' / '.join(f'{x:.2f}' for x in info['load_start'])} at the start; "
        + "; ".join(f"share {r.share:g}: {' / '.join(f'{x:.2f}' for x in r.load0)} when seeding, "
                    f"{' / '.join(f'{x:.2f}' for x in r.load)} at the end" for r in results) + ".",
        "",
        f"Each run: {args.hosts} hosts of the `{args.profile}` synthetic web, {args.duration:.0f} s from seeding, "
        f"STREAMCRAWL_FRONTIER_MAX_LEASES={args.max_leases}, recrawl intervals {args.initial_interval:g} s "
        f"initial, [{args.min_interval:g}, {args.max_interval:g}] s; windows of {args.window:g} s in which "
        f"every backlog sample (one per {args.sample:g} s) had at least {args.max_leases} hosts ready for "
        "each kind.",
        "",
        "| discovery_share | configured refresh share | backlogged windows | discoveries | refreshes | "
        "refresh share, median of windows | refresh share, overall | range over windows | requests/s | "
        "left out (robots, probes, sitemaps) | refresh share, left-out requests counted too | "
        "politeness violations |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        s = summary(r, args)
        lines.append(
            f"| {r.share:g} | {100 * (1 - r.share):.0f} % | {s['windows']:.0f} of {s['of']:.0f} | "
            f"{s['discovery']:.0f} | {s['refresh']:.0f} | {fmt(s['median'])} % | {fmt(s['overall'])} % | "
            f"{fmt(s['lo'], 0)}-{fmt(s['hi'], 0)} % | {fmt(s['rate'])} | {s['left_out']:.0f} | "
            f"{fmt(s['with_left_out'])} % | {r.violations['project_rule']} |")
    lines += ["", "Per window (seconds from seeding; ready = hosts ready for discovery / refresh in the durable "
              "state, minimum over the window's samples; frontier's view = its streamcrawl_frontier_ready_hosts "
              "gauge, hosts ready in its memory and left after its leases, likewise; * = backlogged):", ""]
    lines += ["| share | window | discoveries | refreshes | refresh share | left out (first / repeat) | ready (min) | "
              "frontier's view (min) | queued URLs (last) |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        judged = {id(w) for w in r.judged(args)}
        for w in r.windows:
            ready = (f"{min(s.ready['discovery'] for s in w.samples)} / {min(s.ready['refresh'] for s in w.samples)}"
                     if w.samples else "-")
            mem = (f"{min(s.in_memory['discovery'] for s in w.samples)} / "
                   f"{min(s.in_memory['refresh'] for s in w.samples)}" if w.samples else "-")
            q = w.samples[-1].queued if w.samples else None
            queued = f"{q['discovery']} / {q['refresh']}" if q else "-"
            mark = " *" if id(w) in judged else ""
            lines.append(f"| {r.share:g} | {w.t0 - r.t0:.0f}-{w.t0 - r.t0 + args.window:.0f}{mark} | {w.discovery} | "
                         f"{w.refresh} | {fmt(100 * w.refresh_share, 0)} % | {w.other} / {w.other_repeat} | "
                         f"{ready} | {mem} | {queued} |")
    lines += ["", "Politeness (whole request log of each run): " + "; ".join(
        f"share {r.share:g}: {r.violations}" for r in results) + "."]
    lines += ["", "What this shows: the share of page requests the server saw for URLs it had served before, "
              "while the frontier had more hosts ready for each kind than it could lease. What it does not: the "
              "split of leases itself (robots.txt, soft-404 probes and sitemaps are fetched under discovery "
              "leases and left out here, so the refresh share of page requests reads a little above "
              "1 - discovery_share; the column that counts them shows the leases' split), a crawl with several "
              "frontier instances (each has its own split), or days-long recrawl intervals."]
    return "\n".join(lines) + "\n"


NOTES = "<!-- notes: kept when the benchmark rewrites this file -->"


def write_report(path: Path, report: str) -> None:
    """Write the report, keeping the hand-written notes after the NOTES marker of the file it replaces."""
    old = path.read_text() if path.exists() else ""
    notes = old[old.index(NOTES):] if NOTES in old else NOTES + "\n"
    path.write_text(report + "\n" + notes)


@contextlib.contextmanager
def held(lock: Path | None) -> Iterator[None]:
    """The shared machine's lock for heavy runs, for one crawl (others queue on it between the runs)."""
    if lock is None:
        yield
        return
    with lock.open("a") as fh:
        log(f"waiting for {lock}")
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python bench/refresh_split.py " + " ".join(sys.argv[1:] if argv is None else argv)
    info = machine_info()
    info["load_start"] = info["load"]
    results: list[RunResult] = []
    for share in args.shares:
        wd = fresh_dir(args.workdir.resolve() / f"share-{share:g}")
        with held(args.lock):
            r = run_one(args, share, wd)
        s = summary(r, args)
        log(f"share {share}: {s['windows']:.0f}/{s['of']:.0f} windows backlogged, refresh share median "
            f"{fmt(s['median'])} %, overall {fmt(s['overall'])} %; violations {r.violations['project_rule']}")
        results.append(r)
    report = render(results, args, info, command)
    print(report)
    if args.out:
        write_report(args.out, report)
        log(f"report written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
