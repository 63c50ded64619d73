"""What a crawl did, judged from the synthetic web's own request log against its ground truth: coverage
over time, lost and repeated pages, politeness violations, and how long each host waited after an engine
outage beyond what politeness required (the stall a fault caused). Used by the fault tests, the
engine-fault benchmark and `make chaos`; nothing here takes the crawler's word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from streamcrawl_core.traps import SOFT404_PROBE_PREFIX
from streamcrawl_synthweb.log import LogEntry, Violation, politeness_violations
from streamcrawl_synthweb.truth import GroundTruth, normalize_url

from streamcrawl_launcher.faults import Outage

#: Statuses after which a host is backed off (429/5xx) or retried: waits after them are the host's
#: back-off, not a stall, so the stall measure skips them.
_BACKOFF_STATUSES = frozenset({429, 500, 502, 503, 504})


def url_of(e: LogEntry) -> str:
    return normalize_url(f"http://{e.host}:{e.port}{e.path}")


def page_requests(entries: Iterable[LogEntry]) -> list[LogEntry]:
    """Requests for pages: not robots.txt, not the fetcher's soft-404 probes."""
    return [e for e in entries if not e.path.startswith("/robots") and not e.path.startswith(SOFT404_PROBE_PREFIX)]


@dataclass(frozen=True)
class Stall:
    """The longest wait of any host after an outage beyond its politeness delay (or the outage's end)."""

    outage: Outage
    excess_s: float
    host: str | None
    hosts_waiting: int  # hosts that had a request before the outage's end and another after it


@dataclass
class Verdict:
    pages: int  # reachable allowed pages in the ground truth
    fetched: int  # of those, fetched at least once
    lost: list[str]  # never fetched
    repeats: int  # extra fetches of pages already fetched once (200/304)
    violations: list[Violation]
    first_request_at: float
    full_coverage_at: float | None  # when the last missing page was first served (None: never)
    stalls: list[Stall]

    @property
    def coverage(self) -> float:
        return self.fetched / self.pages if self.pages else 1.0

    @property
    def time_to_full_s(self) -> float | None:
        return None if self.full_coverage_at is None else self.full_coverage_at - self.first_request_at

    @property
    def repeat_ratio(self) -> float:
        return self.repeats / self.pages if self.pages else 0.0


def first_fetches(entries: Iterable[LogEntry], pages: set[str]) -> dict[str, float]:
    """url → when it was first served with 200/304 (the response's end), for the ground truth's pages."""
    out: dict[str, float] = {}
    for e in sorted(page_requests(entries), key=lambda e: e.end):
        if e.status in (200, 304):
            u = url_of(e)
            if u in pages:
                out.setdefault(u, e.end)
    return out


def coverage_timeline(entries: Sequence[LogEntry], pages: set[str], start: float,
                      every_s: float = 5.0) -> list[tuple[float, float]]:
    """(seconds since ``start``, fraction of ``pages`` fetched by then), every ``every_s``."""
    times = sorted(first_fetches(entries, pages).values())
    if not times:
        return []
    out: list[tuple[float, float]] = []
    t, i = start, 0
    while True:
        t += every_s
        while i < len(times) and times[i] <= t:
            i += 1
        out.append((t - start, i / len(pages)))
        if i == len(times):
            return out


def excess_waits(entries: Iterable[LogEntry], outage: Outage, crawl_delays: dict[str, float],
                 min_delay_s: float = 1.0, factor: float = 10.0, until: float | None = None) -> dict[str, float]:
    """host → how much later than possible its first request after ``outage`` came, for each host with a
    request before the outage's end and another after it. The earliest possible is the later of the
    outage's end and the end of the previous request plus the politeness delay it required. Hosts backing
    off after a 429/5xx are skipped (their wait is the back-off). ``until``: the next outage's start; a
    wait is counted up to it (what follows belongs to that outage, whose own measure counts it)."""
    by_host: dict[str, list[LogEntry]] = {}
    for e in entries:
        by_host.setdefault(e.host, []).append(e)
    out: dict[str, float] = {}
    for host, items in by_host.items():
        items.sort(key=lambda e: e.start)
        before = [e for e in items if e.start <= outage.end]
        if not before:
            continue
        prev = max(before, key=lambda e: e.sent)
        nxt = next((e for e in items if e.start > outage.end and e.start >= prev.sent), None)
        if nxt is None or prev.status in _BACKOFF_STATUSES:
            continue
        required = max(min_delay_s, factor * (prev.sent - prev.start), crawl_delays.get(host, 0.0))
        earliest = max(prev.sent + required, outage.end)
        out[host] = min(nxt.start, until) - earliest if until is not None and until > earliest else \
            nxt.start - earliest
    return out


def stalls(entries: Sequence[LogEntry], outages: Sequence[Outage], crawl_delays: dict[str, float],
           min_delay_s: float = 1.0, factor: float = 10.0) -> list[Stall]:
    """For each outage, the worst of `excess_waits` up to the next outage's start (and how many hosts it
    judged)."""
    out: list[Stall] = []
    starts = sorted(o.start for o in outages)
    for outage in outages:
        until = next((t for t in starts if t > outage.end), None)
        waits = excess_waits(entries, outage, crawl_delays, min_delay_s, factor, until)
        host = max(waits, key=lambda h: waits[h], default=None)
        worst = max(0.0, waits[host]) if host is not None else 0.0
        out.append(Stall(outage, worst, host if worst > 0 else None, len(waits)))
    return out


def judge(entries: Sequence[LogEntry], truth: GroundTruth, outages: Sequence[Outage] = ()) -> Verdict:
    pages = truth.pages
    firsts = first_fetches(entries, pages)
    served = Counter(url_of(e) for e in page_requests(entries) if e.status in (200, 304))
    repeats = sum(n - 1 for u, n in served.items() if u in pages)
    lost = sorted(pages - set(firsts))
    return Verdict(
        pages=len(pages), fetched=len(firsts), lost=lost, repeats=repeats,
        violations=politeness_violations(entries, crawl_delays=truth.crawl_delays),
        first_request_at=min((e.start for e in entries), default=0.0),
        full_coverage_at=None if lost else max(firsts.values(), default=None),
        stalls=stalls(entries, outages, truth.crawl_delays),
    )
