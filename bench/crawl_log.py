"""What the synthetic web's own request log says about a crawl: requests and pages in a window, the
politeness readings, and coverage (which of the ground truth's pages were fetched, and when the last one
was) against the politeness lower bound."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from streamcrawl_synthweb.log import LogEntry, politeness_violations

ROBOTS_UNAVAILABLE_KINDS = ("robots_500", "robots_503", "robots_timeout")


def is_robots(e: LogEntry) -> bool:
    return e.path.startswith("/robots")  # /robots.txt and the robots_redirect host's /robots-real.txt


@dataclass
class WindowCounts:
    requests: int = 0  # every request started in the window, robots.txt included
    robots: int = 0
    pages: int = 0  # status 200, not robots
    distinct_pages: int = 0
    hosts: int = 0  # hosts that got at least one request in the window
    bins: list[int] = field(default_factory=list)  # pages per bin_s


def count_window(entries: Iterable[LogEntry], t0: float, t1: float, bin_s: float = 30.0) -> WindowCounts:
    """Count the server log's requests whose ``start`` lies in [t0, t1)."""
    c = WindowCounts(bins=[0] * max(1, int(-(-(t1 - t0) // bin_s))))
    distinct: set[tuple[str, str]] = set()
    hosts: set[str] = set()
    for e in entries:
        if not t0 <= e.start < t1:
            continue
        c.requests += 1
        hosts.add(e.host)
        if is_robots(e):
            c.robots += 1
        elif e.status == 200:
            c.pages += 1
            distinct.add((e.host, e.path))
            c.bins[min(int((e.start - t0) // bin_s), len(c.bins) - 1)] += 1
    c.distinct_pages, c.hosts = len(distinct), len(hosts)
    return c


def start_gap_violations(entries: Iterable[LogEntry], min_gap_s: float = 1.0,
                         tolerance_s: float = 0.05) -> tuple[int, int]:
    """(short start-to-start gaps, overlaps) per host: Scrapy's own reading of DOWNLOAD_DELAY=1 with one
    request at a time, i.e. requests start >= 1 s apart and never overlap."""
    by_host: dict[str, list[LogEntry]] = {}
    for e in entries:
        by_host.setdefault(e.host, []).append(e)
    short = overlap = 0
    for items in by_host.values():
        items.sort(key=lambda e: (e.start, e.end))
        last_end = float("-inf")  # latest end of any earlier request: a long one cannot hide an overlap
        for prev, cur in itertools.pairwise(items):
            last_end = max(last_end, prev.sent)  # the judge's reading of a response's end (log.py)
            if cur.start < last_end:
                overlap += 1
            elif cur.start - prev.start < min_gap_s - tolerance_s:
                short += 1
    return short, overlap


def crawl_delays(manifest: Mapping[str, Any]) -> dict[str, float]:
    """Crawl-delay each host announces in robots.txt (only the robots_crawl_delay hosts do)."""
    delay = float(manifest["profile"]["crawl_delay_s"])
    return {h: delay for h, info in manifest["hosts"].items() if info["kind"] == "robots_crawl_delay"}


def violation_summary(entries: list[LogEntry], manifest: Mapping[str, Any]) -> dict[str, int]:
    delays = crawl_delays(manifest)
    strict = politeness_violations(entries, crawl_delays=delays)
    plain = politeness_violations(entries, factor=0.0)
    on_delay_hosts = politeness_violations([e for e in entries if e.host in delays], min_delay_s=0.0, factor=0.0,
                                           crawl_delays=delays)
    short_start, overlaps = start_gap_violations(entries)
    unavailable = {h for h, info in manifest["hosts"].items() if info["kind"] in ROBOTS_UNAVAILABLE_KINDS}
    return {
        "project_rule": len(strict),  # max(1 s, 10 x fetch time, Crawl-delay) end-to-start: the e2e verdict
        # the same rule with no tolerance for the server's own timing (the e2e check allows 50 ms)
        "project_rule_exact": len(politeness_violations(entries, crawl_delays=delays, tolerance_s=0.0)),
        "project_rule_hosts": len({v.host for v in strict}),
        "crawl_delay": len(on_delay_hosts),  # less than the announced Crawl-delay after a response
        "end_to_start_1s": len(plain),  # 1 s of quiet after each response
        "start_to_start_1s": short_start,  # requests begin >= 1 s apart
        "overlaps": overlaps,  # two requests to one host in flight at once
        "robots_unavailable_hits": sum(1 for e in entries if e.host in unavailable and not is_robots(e)),
    }


# ---------------------------------------------------------------------------------------------- coverage


@dataclass(frozen=True)
class Truth:
    """The pages a correct crawler fetches (the synthetic web's ground truth), as (host, path?query)."""

    pages: frozenset[tuple[str, str]]
    per_host: Mapping[str, int]
    delay_s: Mapping[str, float]  # each host's politeness delay: max(1 s, its Crawl-delay)

    @property
    def lower_bound_s(self) -> float:
        """The politeness lower bound of a full crawl: the largest host's pages x its delay (robots.txt at
        the start, then one page per delay). Discovery depth comes on top (a page's links exist only once
        it is fetched and parsed), and each response's own time: neither is counted here."""
        return max((n * self.delay_s.get(h, 1.0) for h, n in self.per_host.items()), default=0.0)


def ground_truth(hosts: int, seed: int, profile: str, port: int) -> Truth:
    from streamcrawl_synthweb.generator import generate

    web = generate(hosts, seed, profile, port=port)
    truth = web.ground_truth()
    pages: set[tuple[str, str]] = set()
    per_host: dict[str, int] = {}
    for url in truth.pages:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        pages.add((host, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")))
        per_host[host] = per_host.get(host, 0) + 1
    delays = {h: max(1.0, d) for h, d in truth.crawl_delays.items()}
    return Truth(frozenset(pages), per_host, delays)


class CoverageTail:
    """Follows a request log as it grows and notes when each ground-truth page was first fetched (200)."""

    def __init__(self, path: Path, truth: Truth) -> None:
        self.path = path
        self.truth = truth
        self.first: dict[tuple[str, str], float] = {}  # page → end of its first 200
        self._pos = 0
        self._partial = b""

    def poll(self) -> int:
        """Read what was appended since the last call; returns the pages covered so far."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._pos)
                chunk = fh.read()
                self._pos = fh.tell()
        except OSError:
            return len(self.first)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for line in lines:
            try:
                raw = json.loads(line)
            except ValueError:
                continue
            key = (raw.get("host", ""), raw.get("path", ""))
            if raw.get("status") == 200 and key in self.truth.pages and key not in self.first:
                self.first[key] = float(raw.get("end", 0.0))
        return len(self.first)

    @property
    def complete(self) -> bool:
        return len(self.first) >= len(self.truth.pages)


def coverage(entries: Iterable[LogEntry], truth: Truth, t0: float) -> tuple[float, float | None]:
    """(fraction of the ground-truth pages fetched, seconds from t0 to the end of the last one's first
    fetch, None while incomplete), from a whole log."""
    first: dict[tuple[str, str], float] = {}
    for e in entries:
        key = (e.host, e.path)
        if e.status == 200 and key in truth.pages and (key not in first or e.end < first[key]):
            first[key] = e.end
    if not truth.pages:
        return 1.0, None
    frac = len(first) / len(truth.pages)
    return frac, (max(first.values()) - t0) if frac >= 1.0 else None
