"""What `streamcrawl run` shows while it crawls and when it stops: current pages/s over a short window,
totals, backlog per service, errors by class, the busiest hosts, and the end summary.

Each refresh is cheap: one GET of every service's /metrics, the offsets and lag from one reused Kafka admin
client, and (every few seconds) the frontiers' 8 summary rows over one reused CQL session. On a terminal
it is a rich live panel; otherwise a plain line per interval.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text
from streamcrawl_contracts.topics import PAGE_FETCHED
from streamcrawl_runtime.acsylla_session import BlockingSession
from streamcrawl_runtime.connect import blocking_cql_session
from streamcrawl_runtime.observe import History, by_label, total

from streamcrawl_launcher.crawl import Crawl, Progress

RESULTS = "streamcrawl_fetcher_results_total"
OK_OUTCOMES = frozenset({"fetched", "not_modified", "redirect", "robots_fetched", "probe_fetched",
                         "soft404_suspect"})
#: The window of "current" pages/s.
SHORT_S = 10.0


@dataclass
class View:
    """One refresh: everything the panel, the plain line and the summary print."""

    elapsed_s: float
    progress: Progress
    pages_now: float | None
    pages_1m: float | None
    outcomes: dict[str, int]
    fetched: int
    bytes_: int
    duplicates: int
    traps: int
    #: Hosts with URLs waiting now (the frontiers' summary rows), not hosts crawled so far.
    hosts_queued: int
    queued: int
    busiest: list[tuple[str, int]] = field(default_factory=list)
    down: list[str] = field(default_factory=list)

    @property
    def errors(self) -> dict[str, int]:
        return {k: v for k, v in self.outcomes.items() if k not in OK_OUTCOMES and v}


def _epoch(value: datetime) -> float:
    """The driver returns naive UTC datetimes."""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


class Observer:
    def __init__(self, crawl: Crawl, summary_every_s: float = 5.0) -> None:
        self.crawl = crawl
        self.history = History(keep_s=90.0)
        self.started = time.time()
        self.summary_every_s = summary_every_s
        self._cql: BlockingSession | None = None
        self._summary_at = 0.0
        self._busiest: list[tuple[str, int]] = []
        self._hosts = 0
        self._queued = 0

    def _summaries(self) -> None:
        now = time.time()
        if now - self._summary_at < self.summary_every_s:
            return
        self._summary_at = now
        try:
            if self._cql is None:
                self._cql = blocking_cql_session(self.crawl.settings)
            rows = self._cql.execute("SELECT part, queued, hosts, top_hosts, updated_at FROM frontier_summary")
        except Exception:  # Cassandra busy or down: keep the last figures; the next refresh tries again
            return
        fresh = [r for r in rows if r.updated_at is not None and now - _epoch(r.updated_at) < 60]
        top: dict[str, int] = {}
        for r in fresh:
            top.update(dict(r.top_hosts or {}))
        self._busiest = sorted(top.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
        self._hosts = sum(r.hosts or 0 for r in fresh)
        self._queued = sum(r.queued or 0 for r in fresh)

    def observe(self) -> View:
        scrape = self.crawl.scraper.scrape()
        self.history.add(scrape)
        progress = self.crawl.progress()
        self._summaries()
        s = scrape.sample
        outcomes = {k: int(v) for k, v in sorted(by_label(s, RESULTS, "outcome").items())}
        url_decisions = by_label(s, "streamcrawl_dedup_urls_total", "decision")
        return View(
            elapsed_s=time.time() - self.started, progress=progress,
            pages_now=self.history.rate(SHORT_S, RESULTS, outcome="fetched"),
            pages_1m=self.history.rate(60.0, RESULTS, outcome="fetched"),
            outcomes=outcomes, fetched=outcomes.get("fetched", 0),
            bytes_=int(total(s, "streamcrawl_fetcher_body_bytes_total")),
            duplicates=int(by_label(s, "streamcrawl_dedup_pages_total", "decision").get("duplicate", 0)),
            traps=int(sum(v for k, v in url_decisions.items() if k.startswith("trap_") or k == "over_budget")),
            hosts_queued=self._hosts, queued=int(total(s, "streamcrawl_frontier_queued")) or self._queued,
            busiest=list(self._busiest), down=[u for u, st in scrape.targets.items() if st != "ok"])

    def close(self) -> None:
        if self._cql is not None:
            self._cql.close()


def _rate(v: float | None) -> str:
    return "  -  " if v is None else f"{v:5.1f}"


def _bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def plain_line(v: View) -> str:
    p = v.progress
    errors = ",".join(f"{k}={n}" for k, n in v.errors.items()) or "none"
    return (f"[{v.elapsed_s:6.0f}s] pages/s={_rate(v.pages_now).strip()} (10 s) fetched={v.fetched} "
            f"published={p.pages_published} queued={v.queued} backlog={p.lag} errors={errors} "
            f"dead_letters={p.dead_letters}")


def panel(v: View, title: str) -> Group:
    p = v.progress
    head = Text.assemble((f"{title}  ", "bold"), f"{v.elapsed_s:.0f} s   ",
                         ("pages/s ", "bold"), f"{_rate(v.pages_now)} now (10 s)  {_rate(v.pages_1m)} (1 min)")
    totals = Text(f"fetched {v.fetched:,}   published {p.pages_published:,}   bytes {_bytes(v.bytes_)}   "
                  f"queued {v.queued:,} on {v.hosts_queued:,} hosts   duplicates {v.duplicates:,}   "
                  f"traps stopped {v.traps:,}   dead letters {p.dead_letters:,}")
    backlog = Table(title="backlog (records)", show_edge=False, pad_edge=False)
    for name in p.lag:
        backlog.add_column(name, justify="right")
    backlog.add_row(*(f"{n:,}" for n in p.lag.values()))
    errors = Table(title="errors by class", show_edge=False)
    errors.add_column("outcome")
    errors.add_column("count", justify="right")
    for k, n in v.errors.items() or {"none": 0}.items():
        errors.add_row(k, f"{n:,}")
    hosts = Table(title="busiest hosts (queued)", show_edge=False)
    hosts.add_column("host")
    hosts.add_column("queued", justify="right")
    for h, n in v.busiest or [("-", 0)]:
        hosts.add_row(h, f"{n:,}")
    grid = Table.grid(padding=(0, 4))
    grid.add_row(errors, hosts)
    parts: list[Any] = [head, totals, backlog, grid]
    if v.down:
        parts.append(Text("metrics unavailable: " + ", ".join(v.down), style="yellow"))
    return Group(*parts)


def summary(v: View, crawl: Crawl) -> str:
    st = crawl.settings
    outcomes = ", ".join(f"{k} {n:,}" for k, n in v.outcomes.items()) or "none"
    return "\n".join([
        "streamcrawl: summary",
        f"  pages fetched   {v.fetched:,}   published to {PAGE_FETCHED.name}: {v.progress.pages_published:,}",
        f"  still queued    {v.queued:,} URLs on {v.hosts_queued:,} hosts",
        f"  bytes           {_bytes(v.bytes_)} of bodies downloaded",
        f"  outcomes        {outcomes}",
        f"  duplicates      {v.duplicates:,} (not published)",
        f"  traps stopped   {v.traps:,} URLs (trap rules and per-host budgets)",
        f"  pages are in    s3://{st.s3_bucket}/pages/ at {st.s3_endpoint} (gzip, keyed by SHA-256: "
        "the storage_key of each page_fetched record)",
        f"  consume         topic {PAGE_FETCHED.name} on {st.kafka_bootstrap}, key = host, JSON "
        "(schemas/json/PageFetched.schema.json); e.g. with confluent-kafka:",
        f"                  Consumer({{'bootstrap.servers': '{st.kafka_bootstrap}', 'group.id': 'my-indexer', "
        f"'auto.offset.reset': 'earliest'}}).subscribe(['{PAGE_FETCHED.name}'])",
    ])


class Display:
    """A rich live panel on a terminal, plain lines elsewhere (or when asked)."""

    def __init__(self, title: str, plain: bool | None = None, every_s: float = 5.0) -> None:
        self.console = Console()
        self.title = title
        self.plain = (not self.console.is_terminal) if plain is None else plain
        self.every_s = every_s
        self._live: Live | None = None
        self._last_line = 0.0

    def __enter__(self) -> Display:
        if not self.plain:
            self._live = Live(console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def show(self, v: View) -> None:
        if self._live is not None:
            self._live.update(panel(v, self.title))
        elif time.time() - self._last_line >= self.every_s:
            self._last_line = time.time()
            print(plain_line(v), flush=True)

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)
