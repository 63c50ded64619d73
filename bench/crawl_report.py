"""The Markdown report of ``bench/crawl_bench.py``: the side-by-side table, the per-process CPU table
(each service, the launcher, each engine: CPU-ms per page), Kafka records and Cassandra statements per
page by topic and table, and coverage against the politeness lower bound."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from crawl_log import Truth
from crawl_sides import SideResult
from streamcrawl_synthweb.model import PROFILES

ENGINES = {"kafka": "Kafka", "cassandra": "Cassandra", "versitygw": "S3 server (versitygw)"}


def med(values: Iterable[float]) -> float:
    vals = [v for v in values if v == v]  # drop NaN
    return statistics.median(vals) if vals else float("nan")


def fmt(x: float, digits: int = 1) -> str:
    if x != x:
        return "–"
    return f"{x:,.{digits}f}"


def ratio(a: float, b: float) -> str:
    return "–" if not b or a != a or b != b else f"{a / b:.2f}×"


def bin_rates(r: SideResult, bin_s: float) -> list[float]:
    """Pages/s per bin; the last bin may be shorter than ``bin_s``."""
    return [b / max(1e-9, min(bin_s, r.window_s - i * bin_s)) for i, b in enumerate(r.counts.bins)]


def machine_info() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu": model, "python": platform.python_version(),
            "kernel": platform.release(), "load": os.getloadavg()}


def render(results: Mapping[str, list[SideResult]], args: argparse.Namespace, info: Mapping[str, Any],
           command: str, truth: Truth | None = None) -> str:
    sc, sp = results.get("streamcrawl", []), results.get("scrapy", [])
    bound = args.hosts / 1.0
    scrapy_ver = next((r.extra.get("scrapy_version") for r in sp if r.extra.get("scrapy_version")), "?")

    def row(label: str, get: Callable[[SideResult], float], digits: int = 1, with_ratio: bool = True) -> str:
        a, b = med(get(r) for r in sc), med(get(r) for r in sp)
        return f"| {label} | {fmt(a, digits)} | {fmt(b, digits)} | {ratio(a, b) if with_ratio else ''} |"

    n = max(len(sc), len(sp))
    lo, hi = PROFILES[args.profile].pages_per_host if args.profile in PROFILES else ("?", "?")
    lines = [
        "# Benchmarks: whole crawl, streamcrawl vs Scrapy (equally polite)",
        "",
        f"Command: `{command}` (`make bench-crawl`).",
        "",
        f"**Machine:** {info['cores']} cores ({info['cpu'] or 'unknown CPU'}), Python {info['python']}, Linux "
        f"{info['kernel']}; Scrapy {scrapy_ver}. Load average at the start "
        f"{' / '.join(f'{x:.1f}' for x in info['load_start'])}, at the end "
        f"{' / '.join(f'{x:.1f}' for x in info['load'])} (1/5/15 min). The machine and the Kafka/Cassandra/S3 "
        "stack are shared with other work, so absolute numbers are noisy; the two sides ran back to back.",
        "",
        f"**Setup.** A synthetic web of **{args.hosts:,} hosts** (`--profile {args.profile}`, seed {args.web_seed}, "
        "every host on its own loopback IP) and a politeness delay of **1 s** per host for both crawlers. Each side "
        "gets a fresh synthetic web process and its own request log; the sides run one after the other. "
        + (f"Each side's window starts with its crawl and ends when the server's log shows every ground-truth "
           f"page fetched (full coverage), or after {args.duration:.0f} s. "
           if args.until_coverage else
           f"Each measures a fixed **{args.duration:.0f} s window** from the start of its crawl. ")
        + (f"Every figure is the **median of {n} repeats** (each repeat = one run of each side)."
           if n > 1 else "One repeat per side (no median)."),
        "",
        f"**Politeness bound** = hosts ÷ delay = {bound:,.0f} requests/s: the rate if every host were kept busy "
        "at exactly one request per second. It cannot be reached in practice: each host's first request is its "
        "robots.txt, hosts announcing `Crawl-delay: 2` allow half the rate, DNS-failing and robots-5xx hosts "
        f"allow no page at all, and a host runs out of pages ({lo}–{hi} static pages each, traps aside).",
        "",
        "| metric (the window) | streamcrawl | Scrapy | streamcrawl ÷ Scrapy |",
        "|---|---|---|---|",
        row("**pages/s** (HTTP 200, robots.txt excluded, from the server log)", lambda r: r.pages_per_s),
        row("requests/s (everything the server answered, robots.txt included)", lambda r: r.requests_per_s),
        f"| politeness bound (hosts ÷ 1 s) | {bound:,.0f} | {bound:,.0f} | |",
        row("**fraction of bound**, pages (%)", lambda r: 100 * r.pages_per_s / bound),
        row("fraction of bound, requests (%)", lambda r: 100 * r.requests_per_s / bound),
        row("pages in window (distinct)", lambda r: r.counts.distinct_pages, 0),
        row("hosts contacted in window", lambda r: r.counts.hosts, 0),
        row("window as measured, s", lambda r: r.window_s, 1, False),
        row("**crawler CPU-ms per page**", lambda r: r.cpu_ms_per_page),
        row("crawler CPU-s in window (all crawler processes)", lambda r: r.crawler_cpu_s),
        row("crawler cores used (CPU-s ÷ window)", lambda r: r.crawler_cpu_s / r.window_s, 2),
        row("synthetic web server CPU-s (not crawler)", lambda r: r.synthweb_cpu_s),
        row("Kafka JVM CPU-s (shared stack)", lambda r: r.infra_cpu.get("kafka", float("nan"))),
        row("Cassandra JVM CPU-s (shared stack)", lambda r: r.infra_cpu.get("cassandra", float("nan"))),
        row("versitygw (S3) CPU-s (shared stack)", lambda r: r.infra_cpu.get("versitygw", float("nan"))),
        row("whole machine busy core-s in window (every process)", lambda r: r.machine_busy_s, 0),
        row("politeness violations, project rule (max(1 s, 10×fetch time, Crawl-delay) after each response)",
            lambda r: r.violations["project_rule"], 0, False),
        row("… the same rule with no 50 ms tolerance", lambda r: r.violations["project_rule_exact"], 0, False),
        row("… of which Crawl-delay ignored", lambda r: r.violations["crawl_delay"], 0, False),
        row("violations, plain 1 s after each response", lambda r: r.violations["end_to_start_1s"], 0, False),
        row("violations, 1 s between request starts", lambda r: r.violations["start_to_start_1s"], 0, False),
        row("violations, two requests to one host at once", lambda r: r.violations["overlaps"], 0, False),
        row("page requests to hosts whose robots.txt failed (5xx/timeout)",
            lambda r: r.violations["robots_unavailable_hits"], 0, False),
        "",
        f"Pages/s per {args.bin:.0f} s bin of the window (first repeat): "
        + "; ".join(f"{res[0].side} " + ", ".join(f"{rate:.0f}" for rate in bin_rates(res[0], args.bin))
                    for res in (sc, sp) if res) + ".",
        "",
    ]
    if sc:
        svc = sorted({k for r in sc for k in r.crawler_cpu})
        lines += ["streamcrawl CPU-s per service in the window (median): "
                  + ", ".join(f"{k} {fmt(med(r.crawler_cpu.get(k, float('nan')) for r in sc))}" for k in svc) + ".",
                  ""]
    if sp:
        lines += [f"Scrapy CPU-s in the window from `/proc/<pid>/stat` sampled by the bench (cross-check of "
                  f"the in-process figure): {fmt(med(r.extra.get('proc_cpu_s', float('nan')) for r in sp))}.", ""]
    lines += cpu_table(sc, sp) + counter_tables(sc) + coverage_rows(sc, sp, truth)
    if n > 1:
        lines += ["Per repeat (pages/s, CPU-ms/page):", ""]
        for side, res in (("streamcrawl", sc), ("Scrapy", sp)):
            if res:
                lines.append(f"* {side}: " + "; ".join(f"{r.pages_per_s:.1f} p/s, {r.cpu_ms_per_page:.1f} ms"
                                                        for r in res))
        lines.append("")
    lines += NOTES
    return "\n".join(lines) + "\n"


NOTES = [
    "## How it is measured, and what favours whom",
    "",
    "* **Politeness, configured equally.** streamcrawl: its default rule (one request at a time per host, "
    "the next one no earlier than max(1 s, 10 × the last fetch time, the host's Crawl-delay) after the last "
    "response). Scrapy: `CONCURRENT_REQUESTS_PER_DOMAIN=1`, `DOWNLOAD_DELAY=1`, `RANDOMIZE_DOWNLOAD_DELAY=False` "
    "(and its 2.19 replacement `DOWNLOAD_DELAY_JITTER=0`), AutoThrottle off, `ROBOTSTXT_OBEY=True`, "
    "`CONCURRENT_REQUESTS=2000` so the per-host limit binds, Scrapy's broad-crawl queue "
    "(`DownloaderAwarePriorityQueue`), cookies off, `DOWNLOAD_TIMEOUT=30` and a 10 MiB body cap like "
    "streamcrawl's fetcher, user agent `streamcrawl-bench-scrapy/…`.",
    "* **The two rules are not the same rule.** Scrapy spaces request *starts* 1 s apart and ignores "
    "`Crawl-delay`; streamcrawl leaves 1 s (or 10× the fetch time, or the Crawl-delay) of *quiet after each "
    "response*. So Scrapy is expected to break the stricter readings (slow hosts, Crawl-delay hosts) while "
    "keeping its own; every reading is reported, judged from the server's own log, over each side's whole log. "
    "Scrapy spaces requests when it *dispatches* them; when its event loop lags (a loaded core), a request "
    "reaches the server late and the next one on time, so even its own 1 s start-to-start reading shows "
    "gaps of ~0.6–0.95 s at the server (seen in development on 200 hosts).",
    "* **Robots.txt failures.** Scrapy treats a robots.txt that fails (5xx, timeout) as \"allow all\"; "
    "streamcrawl fetches nothing but robots.txt from such a host. The last row counts the difference.",
    "* **Scrapy gets free DNS.** It resolves `*.synth.test` from the manifest's host → IP table (a Twisted "
    "resolver in `bench/scrapy_side.py`; NXDOMAIN/SERVFAIL hosts fail as they would): no DNS traffic, "
    "always cached. streamcrawl's fetcher asks the synthetic web's DNS server.",
    "* **Scrapy does far less per page.** It stores nothing: no Kafka, no Cassandra frontier, no S3 body "
    "store, no dedup/SimHash, no recrawl schedule, nothing survives a crash. streamcrawl's CPU figure covers "
    "its six service processes only (the WARC writer among them); the JVMs and versitygw it needs are "
    "reported apart, and on this shared stack they also serve other tenants — their CPU during Scrapy's "
    "window (which does not use them) is that background.",
    "* **Windows.** streamcrawl's window starts just before the seeds are sent, after the services' start-up "
    "CPU has settled; Scrapy's at `spider_opened` (imports and start-up excluded on both sides). Pages are "
    "counted by request *start* inside the window. Scrapy keeps downloading what its per-host queues hold "
    "after `CLOSESPIDER_TIMEOUT`; that and streamcrawl's drain on SIGTERM fall outside the window (but inside "
    "the violation counts, which read whole logs).",
    "* **The synthetic web server** is one Python process on the same 2 cores; its CPU is shown so a "
    "server-bound run can be recognised. It is not crawler CPU.",
]


def _per_page(r: SideResult, cpu_s: float) -> float:
    return 1000.0 * cpu_s / r.counts.pages if r.counts.pages else float("nan")


def cpu_table(sc: list[SideResult], sp: list[SideResult]) -> list[str]:
    """CPU-ms per page of each process, streamcrawl beside Scrapy (medians over repeats)."""
    if not sc:
        return []
    scrapy_ms = med(r.cpu_ms_per_page for r in sp)

    def row(label: str, get: Callable[[SideResult], float], bold: bool = False) -> str:
        cpu_s, ms = med(get(r) for r in sc), med(_per_page(r, get(r)) for r in sc)
        name = f"**{label}**" if bold else label
        return f"| {name} | {fmt(cpu_s)} | {fmt(ms, 2)} | {ratio(ms, scrapy_ms)} |"

    lines = ["### CPU per page, by process", "",
             "CPU-ms per page = the process's CPU-s in the window ÷ the window's pages (HTTP 200, robots.txt "
             f"excluded). Scrapy, one process: {fmt(scrapy_ms, 2)} CPU-ms per page.", "",
             "| process | CPU-s | CPU-ms per page | ÷ Scrapy's CPU-ms per page |", "|---|---|---|---|"]
    # One row per service process the run measured (the launcher's list, in its order): they add up to the total.
    services = list(dict.fromkeys(svc for r in sc for svc in r.crawler_cpu))
    for svc in services:
        lines.append(row(svc, lambda r, s=svc: r.crawler_cpu.get(s, float("nan"))))  # type: ignore[misc]
    lines.append(row("all six services", lambda r: r.crawler_cpu_s, True))
    lines.append(row("launcher (this bench: seeding, the log tail, sampling)", lambda r: r.launcher_cpu_s))
    for key, label in ENGINES.items():
        lines.append(row(label, lambda r, k=key: r.infra_cpu.get(k, float("nan"))))  # type: ignore[misc]
    lines.append(row("all three engines", lambda r: r.infra_cpu_s, True))
    lines.append(row("services + engines", lambda r: r.crawler_cpu_s + r.infra_cpu_s, True))
    threads = sc[0].extra.get("threads") or {}
    if threads:
        lines += ["", "Where each service's CPU ran (first repeat; `/proc/<pid>/task`): its event-loop thread, "
                  "librdkafka's threads (the Kafka client, native: py-spy does not see them), and the rest "
                  "(worker threads, the Cassandra driver's I/O threads).", "",
                  "| service | event loop, CPU-ms per page | librdkafka | rest |", "|---|---|---|---|"]
        for svc in services:
            t = threads.get(svc)
            if t:
                lines.append(f"| {svc} | {fmt(_per_page(sc[0], t['main']), 2)} | "
                             f"{fmt(_per_page(sc[0], t['librdkafka']), 2)} | {fmt(_per_page(sc[0], t['other']), 2)} |")
    lines += ["", "Engine CPU ÷ service CPU: " + ratio(med(r.infra_cpu_s for r in sc), med(r.crawler_cpu_s for r in sc))
              + ". The engines are shared: other tenants' work in the window is in their CPU too (see their CPU in "
              "Scrapy's window, which does not use them, in the table above).", ""]
    return lines


def counter_tables(sc: list[SideResult]) -> list[str]:
    """Kafka records produced / consumed per page by topic, and CQL statements per page by table."""
    if not sc or not any(r.counters for r in sc):
        return []
    r = sc[0]
    pages = r.counts.pages or 1
    totals: dict[str, float] = {}
    by_service: dict[str, dict[str, float]] = {}
    for svc, c in r.counters.items():
        for key, v in c.items():
            totals[key] = totals.get(key, 0.0) + v
            by_service.setdefault(key, {})[svc] = v

    def section(kind: str, title: str, what: str) -> list[str]:
        keys = sorted(k for k in totals if k.startswith(kind + "|"))
        if not keys:
            return []
        out = [f"### {title} (first repeat)", "", f"| {what} | total | per page | by service |", "|---|---|---|---|"]
        for k in keys:
            split = ", ".join(f"{s} {by_service[k][s]:,.0f}" for s in sorted(by_service[k]))
            out.append(f"| {k.split('|', 1)[1]} | {totals[k]:,.0f} | {totals[k] / pages:.2f} | {split} |")
        total = sum(totals[k] for k in keys)
        out += [f"| **all** | {total:,.0f} | **{total / pages:.2f}** | |", ""]
        return out

    return (section("produced", "Kafka records produced per page, by topic", "topic")
            + section("consumed", "Kafka records consumed per page, by topic (a record read by n services counts n "
                      "times)", "topic")
            + section("cql", "Cassandra statements per page, by table and verb (a batch's statements each count; "
                      "`batch batch` counts the batches)", "table, verb")
            + section("cqlreq", "Cassandra requests per page (a single statement or a batch: one request each)",
                      "kind"))


def coverage_rows(sc: list[SideResult], sp: list[SideResult], truth: Truth | None) -> list[str]:
    if truth is None:
        return []
    bound = truth.lower_bound_s
    lines = ["### Time to full coverage", "",
             f"Ground truth: {len(truth.pages):,} pages on {len(truth.per_host):,} hosts; the largest host has "
             f"{max(truth.per_host.values(), default=0)} pages. **Politeness lower bound {bound:.1f} s** (the "
             "largest host's pages × its delay: robots.txt first, then one page per delay; the discovery depth "
             "and the responses' own time come on top).", "",
             "| | streamcrawl | Scrapy |", "|---|---|---|"]

    def cell(res: list[SideResult], get: Callable[[SideResult], float | None], digits: int = 1) -> str:
        vals = [v for v in (get(r) for r in res) if v is not None]
        return fmt(med(vals), digits) if vals else ("not reached" if res else "–")

    lines.append(f"| pages of the ground truth fetched (%) | {cell(sc, lambda r: 100 * r.coverage_frac)} | "
                 f"{cell(sp, lambda r: 100 * r.coverage_frac)} |")
    lines.append(f"| time to full coverage, s | {cell(sc, lambda r: r.coverage_s)} | "
                 f"{cell(sp, lambda r: r.coverage_s)} |")
    lines.append(f"| **÷ the lower bound** | {cell(sc, lambda r: r.coverage_s / bound if r.coverage_s else None, 2)} | "
                 f"{cell(sp, lambda r: r.coverage_s / bound if r.coverage_s else None, 2)} |")
    lines.append(f"| window ended by | {', '.join(r.ended_by for r in sc) or '–'} | "
                 f"{', '.join(r.ended_by for r in sp) or '–'} |")
    return [*lines, ""]
