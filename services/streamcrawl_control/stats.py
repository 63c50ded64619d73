"""GET /v1/stats from counters and metrics, never table scans: the services' /metrics sampled every few
seconds into a short history (rates over 1 and 5 minutes, fetch-time quantiles), Kafka end offsets and
consumer-group lag from admin calls, and the frontiers' per-partition summaries (8 rows)."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime

from streamcrawl_contracts.topics import DEAD_LETTER, PAGE_FETCHED
from streamcrawl_runtime.observe import History, Scrape, by_label, total
from streamcrawl_runtime.ports.control import ControlStore, MetricsSource, PortError, StatsSource
from streamcrawl_runtime.ports.state import PartitionSummary

from streamcrawl_control.models import CrawlStats, FrontierOut, HostCount, Rates

log = logging.getLogger("streamcrawl.control")

RESULTS = "streamcrawl_fetcher_results_total"
BYTES = "streamcrawl_fetcher_body_bytes_total"
FETCH_SECONDS = "streamcrawl_fetcher_fetch_seconds"
DNS = "streamcrawl_fetcher_dns_lookups_total"
SEEN = "streamcrawl_dedup_seen_urls"
SEEN_FP = "streamcrawl_dedup_seen_fp_ratio"
URL_DECISIONS = "streamcrawl_dedup_urls_total"
PAGE_DECISIONS = "streamcrawl_dedup_pages_total"
RECRAWL_DUE = "streamcrawl_recrawl_due"

#: Outcomes that are not failures (the rest are counted under `errors`, by class).
OK_OUTCOMES = frozenset({"fetched", "not_modified", "redirect", "robots_fetched", "probe_fetched",
                         "soft404_suspect"})
#: A summary older than this is from a frontier that no longer owns the partition (or is gone).
SUMMARY_MAX_AGE_S = 60.0


class StatsCollector:
    """Samples the services' metrics every ``every_s`` in a background thread and builds CrawlStats."""

    def __init__(self, metrics: MetricsSource, kafka: StatsSource, store: ControlStore, *, every_s: float = 5.0,
                 pauses_refresh_s: float = 5.0) -> None:
        self.metrics = metrics
        self.kafka = kafka
        self.store = store
        self.every_s = every_s
        self.pauses_refresh_s = pauses_refresh_s
        self.history = History()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> Scrape:
        scrape = self.metrics.scrape()
        with self._lock:
            self.history.add(scrape)
        return scrape

    def start(self) -> None:
        def run() -> None:
            while not self._stop.is_set():
                try:
                    self.sample()
                except Exception as exc:  # a scrape error must not end the sampling
                    log.warning("metrics sample failed", extra={"error": repr(exc)[:200]})
                self._stop.wait(self.every_s)

        self._thread = threading.Thread(target=run, name="stats-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _rates(self, name: str, **labels: str) -> Rates:
        h = self.history
        return Rates(m1=h.rate(60.0, name, **labels), m5=h.rate(300.0, name, **labels), window_s=h.span(300.0))

    async def build(self) -> CrawlStats:
        engine_errors: dict[str, str] = {}
        if self.history.latest is None or self.history.latest.t < datetime.now(UTC).timestamp() - self.every_s * 3:
            await asyncio.to_thread(self.sample)  # not started, or stalled: sample now
        with self._lock:
            last = self.history.latest
            assert last is not None
            s = last.sample
            outcomes = {k: int(v) for k, v in sorted(by_label(s, RESULTS, "outcome").items())}
            pages, results, bytes_ = self._rates(RESULTS, outcome="fetched"), self._rates(RESULTS), self._rates(BYTES)
            p50 = self.history.quantile(300.0, FETCH_SECONDS, 0.5)
            p99 = self.history.quantile(300.0, FETCH_SECONDS, 0.99)
        dns = by_label(s, DNS, "result")
        lookups = sum(dns.values())
        hits = dns.get("hit", 0.0) + dns.get("negative_hit", 0.0)
        url_decisions = by_label(s, URL_DECISIONS, "decision")
        traps = sum(v for k, v in url_decisions.items() if k.startswith("trap_") or k == "over_budget")
        lag: dict[str, int] = {}
        published = dead = 0
        try:
            ks = await asyncio.to_thread(self.kafka.kafka_stats)
            lag = {g.removeprefix("streamcrawl-"): sum(t.values()) for g, t in sorted(ks.group_lag.items())}
            published = ks.end_offsets.get(PAGE_FETCHED.name, 0)
            dead = ks.end_offsets.get(DEAD_LETTER.name, 0)
        except PortError as exc:
            engine_errors["kafka"] = str(exc)
        summaries: list[PartitionSummary] = []
        paused_all, paused_hosts = False, 0
        try:
            now = datetime.now(UTC).timestamp()
            summaries = [x for x in await self.store.summaries() if now - x.updated_at <= SUMMARY_MAX_AGE_S]
            pauses = await self.store.list_pauses()
            paused_all = any(p.scope == "*" for p in pauses)
            paused_hosts = sum(p.scope != "*" for p in pauses)
        except PortError as exc:
            engine_errors["cassandra"] = str(exc)
        top: dict[str, int] = {}
        for x in summaries:
            top.update(x.top_hosts)
        busiest = sorted(top.items(), key=lambda kv: (-kv[1], kv[0]))[:20]
        return CrawlStats(
            at=datetime.fromtimestamp(last.t, UTC),
            pages_per_s=pages, results_per_s=results, bytes_per_s=bytes_,
            pages_fetched=outcomes.get("fetched", 0), pages_published=published,
            bytes_fetched=int(total(s, BYTES)), outcomes=outcomes,
            errors={k: v for k, v in outcomes.items() if k not in OK_OUTCOMES and v},
            fetch_seconds_p50=p50, fetch_seconds_p99=p99,
            dns_lookups=int(lookups), dns_cache_hit_rate=hits / lookups if lookups else None,
            seen_set_size=int(total(s, SEEN)),
            seen_set_fp_rate=max((v for (n, _), v in s.items() if n == SEEN_FP), default=None),
            duplicates=int(by_label(s, PAGE_DECISIONS, "decision").get("duplicate", 0)),
            traps_stopped=int(traps),
            frontier=FrontierOut(queued=sum(x.queued for x in summaries), in_flight=sum(x.in_flight for x in summaries),
                                 hosts=sum(x.hosts for x in summaries), partitions_reporting=len(summaries),
                                 paused_all=paused_all, paused_hosts=paused_hosts),
            top_hosts=[HostCount(host=h, queued=n) for h, n in busiest],
            recrawl_backlog=int(total(s, RECRAWL_DUE)),
            lag=lag, dead_letters=dead, metrics_targets=dict(last.targets), engine_errors=engine_errors,
        )
