"""The recrawl scheduler's run-loop handler.

On each fetch outcome (fetched or 304; a 304 counts as unchanged) it plans the URL's next visit with the
core policy (`streamcrawl_core.recrawl.plan_visit`): the change-rate estimator of Cho & Garcia-Molina
over the URL's visit history (visits, changes, first visit), the doubling rule until enough visits are
compared, divided by the page's importance (from its seed distance, `importance_from_depth`), clamped to
[min, max]. The visit is filed in the due index under the host's Kafka partition and the hour
(`due_by_part`), so "due now" is a range read of the owned partitions only and no hour is one hot
Cassandra partition. Every scan it emits due URLs of the partitions it owns to the frontier as
refreshes, at most refresh_per_scan per scan; the frontier's discovery/refresh split then shares fetch
slots. A refresh passes the same gates as a discovery in dedup: the blocklist (a blocked host's visit is
dropped) and the host's page budget per cycle (an over-budget host's visits move to the next cycle).

A visit's known modification time -- the response's Last-Modified header, else the newest sitemap
<lastmod> dedup recorded (url_state.sitemap_lastmod) -- feeds the estimator's last-change-date variant
(dated-visit statistics in url_state lm_*, migration 0041).

Change detection compares the body hash with the scheduler's own `sched_hash`, not url_state's
content_hash, which dedup updates concurrently.

Scans cost nothing while nothing is due: a full scan (the whole lookback, one read per hour bucket) runs
on assignment and every `full_scan_s`; in between, a scan runs only when a visit this process filed has
come due, the previous scan hit its limit, or emitted rows wait to be deleted, and it reads only from
the previous scan's end on. Visits are filed at least `min_interval_s` (an hour) ahead, so a row filed
between two scans always lies after the earlier one's end; a row filed in the past (a late replay of an
old fetch) waits for the next full scan.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence

from prometheus_client import Counter, Gauge
from streamcrawl_contracts.messages import Envelope, FetchResult, UrlMessage
from streamcrawl_contracts.topics import DEFAULT_PARTITIONS, URLS
from streamcrawl_core.blocklist import Blocklist
from streamcrawl_core.partition import partition_for
from streamcrawl_core.recrawl import ChangeHistory, RecrawlConfig, importance_from_depth, parse_http_date, plan_visit
from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record
from streamcrawl_runtime.ports.state import LastmodStats, RecrawlState, UrlState

log = logging.getLogger("streamcrawl.recrawl")

SCHEDULED = Counter("streamcrawl_recrawl_scheduled_total", "Next visits filed", ["change"])
_SCHEDULED = Children(SCHEDULED)  # .labels() once per value
EMITTED = Counter("streamcrawl_recrawl_emitted_total", "Due URLs sent to the frontier")
HELD = Counter("streamcrawl_recrawl_held_total", "Due URLs not sent", ["reason"])
_HELD = Children(HELD)
DUE = Gauge("streamcrawl_recrawl_due", "Due visits of owned partitions found by the last scan, capped at 4x the "
            "scan's budget: the recrawl backlog")


class RecrawlHandler:
    def __init__(self, state: RecrawlState, config: RecrawlConfig, *, scan_interval_s: float = 5.0,
                 scan_lookback_s: float = 2 * 86400.0, refresh_per_scan: int = 2000,
                 partitions: int = DEFAULT_PARTITIONS, full_scan_s: float = 600.0, host_page_budget: int = 1000,
                 cycle_s: float = 86400.0, importance: Callable[[int], float] = importance_from_depth) -> None:
        self.importance = importance  # depth (seed distance) → importance
        self.blocklist = Blocklist()
        self.host_page_budget = host_page_budget
        self.budgets: dict[str, int] = {}  # host → agreed page budget per cycle (control-plane overrides)
        self.cycle_s = cycle_s
        self._cycle = -1
        self._refreshed: dict[str, int] = {}  # host → refreshes sent this cycle (by this process)
        self._policy_at = -math.inf
        self.state = state
        self.config = config
        self.scan_interval_s = scan_interval_s
        self.scan_lookback_s = scan_lookback_s
        self.refresh_per_scan = refresh_per_scan
        self.partitions = partitions
        self.owned: set[int] = set()
        self._last_scan = 0.0
        self._emitted: list[tuple[float, str, int]] = []  # deleted one scan later, once flushed
        self.full_scan_s = full_scan_s
        self._full_at = -math.inf  # last full scan: none yet
        self._scanned_to = 0.0  # end of the last scan's range
        self._next_visit = math.inf  # earliest visit filed by this process since the last scan
        self._more = False  # the last scan hit its limit

    async def on_assign(self, partitions: list[int]) -> None:
        self.owned.update(partitions)
        self._full_at = -math.inf  # the new partitions' rows may be anywhere in the lookback

    async def on_revoke(self, partitions: list[int]) -> None:
        self.owned.difference_update(partitions)

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if not isinstance(message, FetchResult):
            raise PoisonMessage(f"unexpected message type {type(message).__name__}")
        res = message
        if res.outcome not in ("fetched", "not_modified"):
            return []  # errors, soft 404s and requests that fetched no page file no next visit
        # A discovery is the URL's first visit (dedup admits a URL once), so there is no schedule to read;
        # a replay of it files the same visit (started_at + initial interval).
        st = None if res.kind == "discovery" else await self.state.url_get(res.host, res.url_fp)
        if (st is not None and st.next_visit_at is not None and st.change_interval_s is not None
                and abs(st.next_visit_at - st.change_interval_s - res.started_at) < 0.002):
            # A replay of the fetch already scheduled: file the same visit again, change nothing.
            await self.state.due_put(st.next_visit_at, res.host, res.url_fp, res.url, res.depth)
            return []
        first = st is None or st.sched_hash is None
        changed = res.outcome == "fetched" and not first and st is not None and st.sched_hash != res.content_hash
        history = ChangeHistory() if first or st is None else _history(st, res.started_at)
        modified_at = parse_http_date(res.last_modified)
        if modified_at is None and st is not None:
            modified_at = st.sitemap_lastmod
        plan = plan_visit(history, res.started_at, changed, st.change_interval_s if st else None,
                          self.importance(res.depth), self.config, modified_at)
        interval = plan.delay_s
        # Based on the fetch's own start time, so a replay files the same visit.
        visit_at = res.started_at + interval
        if st is not None and st.next_visit_at is not None and abs(st.next_visit_at - visit_at) > 0.001:
            # A request of its own, landed before the schedule below: once url_state holds the new schedule a
            # replay takes the path above, which re-files the new visit but no longer knows this old one.
            await self.state.due_delete(st.next_visit_at, res.host, res.url_fp)
        new_hash = res.content_hash if res.outcome == "fetched" else (st.sched_hash if st else None)
        # The schedule and its due row in one unlogged batch (idempotent upserts, not atomic). The due row
        # alone: the replay reads the old schedule and writes the same two rows. The schedule alone: the
        # replay takes the path above, which files the due row (a discovery, not read, writes both again).
        self._next_visit = min(self._next_visit, visit_at)
        await self.state.url_put_schedule_and_due(res.host, res.url_fp, res.url, res.depth, interval, visit_at,
                                                  plan.history.change_count,
                                                  res.started_at if changed else (st.last_changed_at if st else None),
                                                  new_hash, plan.history.fetch_count, plan.history.first_seen,
                                                  _lastmod(plan.history))
        _SCHEDULED("first" if first else ("changed" if changed else "unchanged")).inc()
        return []

    def tick_due(self, now: float) -> float:
        """When the next scan has work (see the module docstring); never within scan_interval_s of the last."""
        if not self.owned:
            return math.inf
        due = min(self._full_at + self.full_scan_s, self._next_visit)
        if self._more or self._emitted:
            due = now
        return max(due, self._last_scan + self.scan_interval_s)

    async def tick(self, now: float) -> Sequence[Output]:
        if now - self._last_scan < self.scan_interval_s or not self.owned or now < self.tick_due(now):
            return []
        self._last_scan = now
        # The previous scan's URLs were produced and flushed since (the loop flushes every commit interval).
        # Together: the state adapter sends concurrent writes as a few batches.
        await asyncio.gather(*(self.state.due_delete(visit_at, host, fp) for visit_at, host, fp in self._emitted))
        self._emitted = []
        if now - self._policy_at >= 10.0:  # the control plane edits them; pick changes up quickly
            self._policy_at = now
            self.blocklist = Blocklist(await self.state.blocklist_patterns())
            self.budgets = {h: o.page_budget for h, o in (await self.state.host_overrides()).items()
                            if o.page_budget is not None}
        cycle = int(now // self.cycle_s)
        if cycle != self._cycle:
            self._cycle, self._refreshed = cycle, {}
        full = now >= self._full_at + self.full_scan_s
        start = now - self.scan_lookback_s if full else max(now - self.scan_lookback_s, self._scanned_to)
        limit = self.refresh_per_scan * 4
        rows = await self.state.due_range(start, now, limit, parts=sorted(self.owned))
        if full:
            self._full_at = now
        self._next_visit = math.inf
        out: list[Output] = []
        owned = [r for r in rows if partition_for(r[1], self.partitions) in self.owned]
        DUE.set(len(owned))
        for visit_at, host, fp, url, depth in owned:
            if host in self.blocklist:
                _HELD("blocked").inc()
                await self.state.due_delete(visit_at, host, fp)  # not visited again until unblocked and found
                continue
            if self._refreshed.get(host, 0) >= self.budgets.get(host, self.host_page_budget):
                _HELD("over_budget").inc()
                await self.state.due_delete(visit_at, host, fp)
                await self.state.due_put((cycle + 1) * self.cycle_s, host, fp, url, depth)  # next cycle
                continue
            self._refreshed[host] = self._refreshed.get(host, 0) + 1
            out.append(Output(URLS, host, UrlMessage(url=url, host=host, url_fp=fp, depth=depth, priority=3,
                                                     kind="refresh")))
            self._emitted.append((visit_at, host, fp))
            if len(out) >= self.refresh_per_scan:
                break
        # Cut short (the read's limit, or the emit cap): the next scan reads this range again.
        self._more = len(rows) >= limit or len(out) >= self.refresh_per_scan
        if not self._more:
            self._scanned_to = now
        EMITTED.inc(len(out))
        return out


def _history(st: UrlState, now: float) -> ChangeHistory:
    """The visit history the schedule row holds (rows filed before migration 0040 count one visit)."""
    visits = max(1, st.sched_visits)
    last = (st.next_visit_at - st.change_interval_s
            if st.next_visit_at is not None and st.change_interval_s is not None else now)
    first = st.sched_first_at if st.sched_first_at is not None else last
    lm_changes = min(st.lm_changes, st.lm_visits)
    return ChangeHistory(visits, min(st.change_count, visits - 1), min(first, last), last, st.last_changed_at,
                         max(0, st.lm_visits), max(0, lm_changes), max(0.0, st.lm_exposure_s),
                         max(0, st.lm_conflicts))


def _lastmod(history: ChangeHistory) -> LastmodStats:
    return LastmodStats(history.lm_visits, history.lm_changes, history.lm_exposure_s, history.lm_conflicts)
