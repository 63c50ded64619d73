"""The frontier's per-partition state and its ownership: one core `Frontier` per owned partition, the
hosts held in memory with a window of their queues, the URLs' metadata, live leases, per-host parameters.

Durable state: every queued URL is in its host's queue in Cassandra (`frontier_host_queue`) before its
offset is committed, and its host in its partition's index (`frontier_hosts`); each host's politeness
timer, back-off level and current lease are in `host_state`. So a kill -9 or a rebalance loses nothing,
and a host whose lease is still live stays blocked until its result comes or the lease expires: no host
ever has two fetches in flight.

Memory is bounded, and grows with what is hot, not with the crawl (streamcrawl_frontier.hostset): at most
`max_hosts` hosts are in memory, each with at most about `host_window` of its queued URLs of each kind
(discovery, refresh); the rest of its queue (the tail) and the other hosts (cold) are read from Cassandra when
there is room: a host's queue head when its window runs out, a partition's index page by page.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.frontier import Frontier, FrontierConfig
from streamcrawl_core.frontier_parts import Kind, KindSplit
from streamcrawl_core.lease import Lease, LeaseTable, early_check_at
from streamcrawl_core.partition import partition_for
from streamcrawl_core.politeness import HostOverride, PolitenessConfig
from streamcrawl_runtime.ports.state import FrontierState, PartitionSummary, QueueKey

from streamcrawl_frontier.hostset import HostScan, HostWindow

log = logging.getLogger("streamcrawl.frontier")

#: The crawl_pauses scope that pauses every host.
PAUSE_ALL = "*"


@dataclass(slots=True)
class UrlMeta:
    url_fp: int
    depth: int
    part: int
    attempts: int = 0
    priority: int | None = None  # its place in the durable queue; None: not known (deletes name every priority)
    redirect_chain: tuple[int, ...] = ()  # streamcrawl_core.redirects: travels on to the fetch request

    @property
    def key(self) -> QueueKey | None:
        return None if self.priority is None else QueueKey(self.priority, self.url_fp)


class FrontierShards:
    """State shared by the frontier handler's parts (results, dispatch): see the module docstring."""

    def __init__(self, state: FrontierState, politeness: PolitenessConfig, *, lease_s: float = 60.0,
                 discovery_share: float = 0.3, dispatch_per_tick: int = 500,
                 partitions: int = DEFAULT_PARTITIONS, max_leases: int = 1000, lookahead_s: float = 0.3,
                 margin_s: float = 0.01, max_request_s: float = 130.0, max_hosts: int = 50_000,
                 host_window: int = 8, load_per_tick: int = 500, index_sweep_s: float = 300.0,
                 pages_per_tick: int = 64, lease_check_s: float = 0.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.clock = clock  # wall-clock epoch seconds: results' ended_at and fetchers' not_before share it
        self.politeness = politeness
        self.lease_s = lease_s
        # The early check of a lease whose request may be stuck (streamcrawl_core.lease.early_check_at), and
        # the recent time from a grant to the fetcher's start (from results), which delays it under load.
        self.lease_check_s = lease_check_s
        self.start_delay_s = 0.0
        # Leases fenced by an early check whose second read has not settled yet (a failed read retries).
        self.fenced: set[str] = set()
        # The longest a request the fetcher has started can run (its total_timeout_s, 120 s, plus connect):
        # a lease that expires with its request started stays in force until then.
        self.max_request_s = max_request_s
        self.dispatch_per_tick = dispatch_per_tick
        # Outstanding leases per instance: more than the fetchers can start within a lease's life only
        # waits in Kafka until it expires (then it is re-queued anyway), so the frontier holds it back.
        self.max_leases = max_leases
        self.lookahead_s = lookahead_s
        self.margin_s = margin_s
        self.partitions = partitions
        # Memory bounds: hosts held in memory, URLs of each host's queue held in memory, hosts loaded from
        # the partitions' indexes per tick (each load is two reads).
        self.max_hosts = max_hosts
        self.host_window = host_window
        self.load_per_tick = load_per_tick
        # Index pages read per tick (an empty bucket is one read too: a pass over one partition is at least
        # HOST_BUCKETS reads), so that a sweep spreads over ticks instead of holding one up.
        self.pages_per_tick = pages_per_tick
        # Every index_sweep_s each owned partition's index is read again: rows of hosts with nothing queued
        # (left behind by a crash between a host's last finish and its unindex, or by an expired lease of
        # a rebuilt host) are dropped, so the index counts only hosts with queued URLs.
        self.index_sweep_s = index_sweep_s
        self._sweep_at = clock()
        self.fconfig = FrontierConfig(discovery_share=discovery_share, politeness=politeness)
        # The discovery/refresh split of the whole instance, over every owned partition's Frontier, and per kind
        # the partition whose turn is next (streamcrawl_frontier.dispatch).
        self.kind_split = KindSplit(discovery_share)
        self.kind_turn = [0, 0]
        self.frontiers: dict[int, Frontier] = {}
        self.meta: dict[str, UrlMeta] = {}
        self.leases = LeaseTable()               # host → live lease, with expiry times
        self.windows: dict[str, HostWindow] = {}  # the hosts in memory (their host_state was loaded)
        self.scans: dict[int, HostScan] = {}     # per owned partition: where the index is read next
        # URLs fetched under a lease from before a rebuild but queued again by the rebuild: skipped at
        # dispatch (the core frontier has no delete; the host only pays one minimum delay). url → partition.
        self.cancelled: dict[str, int] = {}
        # Hosts whose load (host_state and queue head) is under way: a result or a new URL of the host waits
        # for it, so that the load cannot bring back a URL the result finishes meanwhile.
        self._loading: dict[str, asyncio.Event] = {}
        # Hosts rebuilt with a live lease: blocked until the lease expires, a stand-in for "a request may be
        # in flight". host → (that lease, the host's persisted timer): its result replaces the stand-in.
        self.restored: dict[str, tuple[str, float]] = {}
        # Per-host parameters: robots Crawl-delay (from fetch results) and agreed overrides (control plane).
        self.crawl_delays: dict[str, float | None] = {}
        self.overrides: dict[str, HostOverride] = {}
        self.overrides_refresh_s = 30.0
        self._overrides_at = 0.0
        # Pauses from the control plane (crawl_pauses), re-read every pauses_refresh_s: the stated time within
        # which a pause or resume takes effect. None until the first read: nothing is leased before it, so a
        # pause survives a restart.
        self.pauses_refresh_s = 5.0
        self.paused: frozenset[str] | None = None
        self._pauses_at = 0.0
        # What each owned partition holds (frontier_summary), for the control plane's stats: looked at every
        # summary_every_s, written when it changed, and unchanged at least every summary_heartbeat_s (the
        # control plane counts a row older than 60 s as a frontier gone). An idle frontier rewrote all 64
        # rows every 5 s.
        self.summary_every_s = 5.0
        self.summary_heartbeat_s = 20.0
        self.summary_top = 20
        self._summary_at = 0.0
        self._summaries_written: dict[int, PartitionSummary] = {}  # the last row written per partition

    @property
    def known_hosts(self) -> set[str]:
        """The hosts in memory."""
        return set(self.windows)

    # ------------------------------------------------------------------ partitions

    async def on_assign(self, partitions: list[int]) -> None:
        """A gained partition is read from its own index only: its hosts are loaded page by page, the
        first pages now (so the partition's busiest state is back before its records are handled), the
        rest by later ticks while there is room (`load_hosts`)."""
        now = self.clock()
        for part in partitions:
            if part in self.frontiers:
                continue
            self.frontiers[part] = Frontier(self.fconfig)
            self.scans[part] = HostScan()
        loaded = await self.load_hosts(now, budget=self.load_per_tick * 2, parts=partitions)
        log.info("partitions assigned", extra={"partitions": partitions, "hosts_loaded": loaded})

    async def on_revoke(self, partitions: list[int]) -> None:
        gone = set(partitions)
        held = sum(1 for h in self.leases if (le := self.leases.get(h)) is not None and le.part in gone)
        log.info("partitions revoked", extra={"partitions": sorted(gone), "leases": held})
        for part in partitions:
            self.frontiers.pop(part, None)
            self.scans.pop(part, None)
            self._summaries_written.pop(part, None)  # its next owner writes the row; a return writes it anew
        self.meta = {u: m for u, m in self.meta.items() if m.part not in gone}
        self.leases.drop_parts(gone)
        self.restored = {h: r for h, r in self.restored.items() if h in self.leases}
        self.fenced = {le.lease_id for h in self.leases if (le := self.leases.get(h)) is not None} & self.fenced
        dropped = [h for h in self.windows if partition_for(h, self.partitions) in gone]
        for host in dropped:
            del self.windows[host]
            self.crawl_delays.pop(host, None)
        self.cancelled = {u: p for u, p in self.cancelled.items() if p not in gone}

    # ------------------------------------------------------------------ hosts in memory

    async def load_host(self, fr: Frontier, host: str, now: float, indexed: bool = False) -> HostWindow:
        """Bring a host into memory: its timer, back-off and Crawl-delay from host_state (a live lease keeps
        the host blocked: its fetch may still be running somewhere), and the head of its durable queue."""
        window = self.windows[host] = HostWindow(indexed=indexed)
        window.pending += 1
        loaded = self._loading[host] = asyncio.Event()
        try:
            await self._load(fr, host, window, now)
        finally:
            window.pending -= 1
            loaded.set()
            if self._loading.get(host) is loaded:
                del self._loading[host]
        return window

    async def host_loaded(self, host: str) -> bool:
        """Wait for a load of ``host`` that is under way (True if there was one). A result handled during
        the load saw no lease (host_state not read yet) and finished its URL, and then the load's read of
        the queue head, sent before that finish, put the URL back in memory: it was fetched a second time
        (seen after a partition move, where a tick loads the gained partition's hosts while their results
        arrive)."""
        ev = self._loading.get(host)
        if ev is None:
            return False
        await ev.wait()
        return True

    async def _load(self, fr: Frontier, host: str, window: HostWindow, now: float) -> None:
        hs = await self.state.host_get(host)
        if hs is not None:
            if hs.crawl_delay_s is not None or host in self.overrides:
                self.set_params(fr, host, hs.crawl_delay_s)
            blocked_until = hs.next_allowed_at or 0.0
            if hs.lease_id and hs.lease_url:
                # Remember the lease: its result frees the host and any older result is stale. One that has
                # expired already is settled by the next tick's expiry check (its request may have started).
                expires = hs.lease_expires_at or now
                lease = Lease(hs.lease_id, hs.lease_url, url_fingerprint(hs.lease_url),
                              partition_for(host, self.partitions), expires)
                self.leases.track(host, lease)
                # Its request may be stuck in an engine (or lost with a crashed frontier's producer): the
                # same early check as a lease granted here, from the grant time its expiry implies.
                check = early_check_at(expires - self.lease_s, self.lease_s, self.lease_check_s)
                if check is not None and now < expires:
                    self.leases.recheck_at(host, lease, max(check, now))
                self.restored[host] = (hs.lease_id, hs.next_allowed_at or 0.0)
                blocked_until = max(blocked_until, expires, now + 1.0)
            if blocked_until > 0 or hs.backoff_level:
                fr.restore_host(host, blocked_until, hs.backoff_level)
        await self.refill(fr, host, window)

    async def refill(self, fr: Frontier, host: str, window: HostWindow) -> int:
        """Read the next URLs of the host's durable queue into memory (after those read before); returns
        how many were added. A row already in memory (or in flight) is skipped."""
        part = partition_for(host, self.partitions)
        added = 0
        for _ in range(4):  # a page can be all known URLs (queued again meanwhile): a few pages at most
            rows = await self.state.queue_head(host, window.after, self.host_window)
            for r in rows:
                window.after = r.key
                if fr.add(r.url, host, r.priority, r.not_before, "refresh" if r.kind == "refresh" else "discovery",
                          enqueued_at=r.enqueued_at):
                    self.meta[r.url] = UrlMeta(r.url_fp, r.depth, part, priority=r.priority,
                                               redirect_chain=r.redirect_chain)
                    added += 1
            window.tail = len(rows) == self.host_window
            if added or not window.tail:
                break
        return added

    def keep_in_memory(self, fr: Frontier, host: str, window: HostWindow, key: QueueKey, kind: Kind) -> bool:
        """Whether a new URL of a host in memory joins its window, or stays in the durable tail only. One
        that sorts before the last row read must join (a refill reads only after that row): the window
        may then grow past `host_window`, up to twice that, before the next refill starts over. Otherwise
        it joins while the window holds fewer than `host_window` URLs of its kind: with one bound for both
        kinds, a host's discoveries filled its window and the refreshes that came due later waited in
        Cassandra until those were fetched, so the frontier saw few hosts ready for a refresh and the
        discovery/refresh split could not hold (docs/benchmarks-refresh-split.md). A URL of the other kind
        kept beyond the last row read is fine: a refill skips the rows already in memory."""
        if window.after is not None and key < window.after:
            if fr.queued_for(host) < 2 * self.host_window:
                return True
            window.after = None  # read the queue from its start next time
            window.tail = True
            return False
        if fr.queued_of(host, kind) < self.host_window:
            return True
        window.tail = True
        return False

    async def settle_host(self, fr: Frontier, part: int, host: str) -> None:
        """After a host's fetch is settled: a host with nothing left in memory gets its next URLs from the
        durable tail, or, when other hosts wait for room, goes back to Cassandra (cold) to let them in; a
        host with nothing queued at all leaves memory and its partition's index."""
        window = self.windows.get(host)
        if window is None or not self.is_idle(fr, host, window):
            return
        if window.tail:
            if self.cold_waiting(part) and len(self.windows) >= self.max_hosts:
                if self.evict(fr, host):  # its turn comes again when the index scan comes round
                    self.scans[part].went_cold()
                return
            if await self.refill(fr, host, window):
                return
        if not window.tail:  # nothing queued for it any more
            await self.unindex(fr, part, host, window)
            return
        self.evict(fr, host)

    def is_idle(self, fr: Frontier, host: str, window: HostWindow) -> bool:
        """Nothing of the host in memory: no URL queued, no lease (live or restored), no request in flight,
        no load or queue write under way."""
        if window.pending or fr.queued_for(host) or host in self.leases or host in self.restored:
            return False
        snap = fr.host_snapshot(host)
        return snap is None or not snap.in_flight

    async def unindex(self, fr: Frontier, part: int, host: str, window: HostWindow) -> None:
        """Drop an idle host with no durable tail from its partition's index and from memory. A URL that
        arrives while the delete is in flight writes the row again itself (the window no longer says
        indexed); one whose write was already under way is covered by writing the row again after the
        delete, so the index never loses a host with queued URLs."""
        window.indexed = False
        await self.state.queue_unindex(part, host)
        if self.windows.get(host) is window and not self.is_idle(fr, host, window):
            await self.state.queue_index_host(part, host)
            window.indexed = True
            return
        if self.windows.get(host) is window:
            self.evict(fr, host)

    def cold_waiting(self, part: int) -> bool:
        scan = self.scans.get(part)
        return scan is not None and not scan.done

    def evict(self, fr: Frontier, host: str) -> bool:
        """Forget a host that has nothing in memory (its timer is in host_state; its queue in Cassandra)."""
        if not fr.forget(host):
            return False
        self.windows.pop(host, None)
        self.crawl_delays.pop(host, None)
        return True

    def maybe_sweep(self, now: float) -> bool:
        """Every index_sweep_s: restart each owned partition's done index scan (see __init__)."""
        if now - self._sweep_at < self.index_sweep_s:
            return False
        self._sweep_at = now
        for scan in self.scans.values():
            if scan.done:
                scan.restart()
        return True

    async def load_hosts(self, now: float, budget: int | None = None, parts: list[int] | None = None,
                         pages: int | None = None) -> int:
        """Load hosts from the owned partitions' indexes while there is room (at most ``budget`` of them,
        reading at most ``pages`` index pages; None: no page limit). An indexed host already in memory with
        nothing of it left is dropped from the index."""
        budget = self.load_per_tick if budget is None else budget
        loaded = 0
        for part in list(parts if parts is not None else self.scans):
            scan, fr = self.scans.get(part), self.frontiers.get(part)
            while scan is not None and fr is not None and not scan.done and loaded < budget:
                room = min(self.max_hosts - len(self.windows), budget - loaded)
                if room <= 0:
                    scan.skipped()
                    return loaded
                if pages is not None:
                    if pages <= 0:
                        return loaded
                    pages -= 1
                page = min(room, 500)
                hosts = await self.state.queue_hosts(part, scan.bucket, scan.after, page)
                scan.advance(hosts, full=len(hosts) == page)
                new = [h for h in hosts if h not in self.windows]
                # The hosts of a page load together: statements in flight at once cost less client CPU than
                # the same statements awaited one by one (docs/benchmarks-cql.md).
                await asyncio.gather(*(self.load_host(fr, h, now, indexed=True) for h in new))
                loaded += len(new)
                for host in hosts:  # loaded now or in memory before: a row a crash or an expiry left behind
                    window = self.windows.get(host)
                    if window is not None and not window.tail and self.is_idle(fr, host, window):
                        await self.unindex(fr, part, host, window)
        return loaded

    # ------------------------------------------------------------------ per-host parameters

    def set_params(self, fr: Frontier, host: str, crawl_delay_s: float | None) -> None:
        # set_host_params replaces both values, so both are always passed.
        self.crawl_delays[host] = crawl_delay_s
        fr.set_host_params(host, crawl_delay_s=crawl_delay_s, override=self.overrides.get(host))

    async def refresh_overrides(self, now: float) -> None:
        """Agreed per-host rates from the control plane's host_overrides table, re-read every 30 s."""
        if now - self._overrides_at < self.overrides_refresh_s:
            return
        self._overrides_at = now
        rows = await self.state.host_overrides()
        fresh = {h: o for h, o in rows.items() if o.min_delay_s is not None or o.delay_factor is not None}
        changed = {h for h in set(fresh) | set(self.overrides)
                   if (fresh[h].rate if h in fresh else None) != (self.overrides[h].rate if h in self.overrides
                                                                 else None)}
        self.overrides = fresh
        for host in changed & set(self.windows):
            fr = self.frontiers.get(partition_for(host, self.partitions))
            if fr is not None:
                self.set_params(fr, host, self.crawl_delays.get(host))

    # ------------------------------------------------------------------ control-plane tables

    async def refresh_pauses(self, now: float) -> None:
        """Paused scopes from crawl_pauses, re-read every pauses_refresh_s (a failed read keeps the last set,
        or leases nothing if there is none yet, and is tried again on the next tick)."""
        if self.paused is not None and now - self._pauses_at < self.pauses_refresh_s:
            return
        scopes = await self.state.crawl_pauses()
        self._pauses_at = now
        fresh = frozenset(scopes)
        if fresh != self.paused:
            log.info("pauses", extra={"all": PAUSE_ALL in fresh, "hosts": len(fresh - {PAUSE_ALL})})
        self.paused = fresh

    def is_paused(self, host: str) -> bool:
        return self.paused is None or PAUSE_ALL in self.paused or host in self.paused

    async def publish_summaries(self, now: float) -> None:
        """Write each owned partition's queue size, leases in flight, hosts and busiest hosts."""
        if now - self._summary_at < self.summary_every_s:
            return
        self._summary_at = now
        due: list[PartitionSummary] = []
        for part, fr in list(self.frontiers.items()):
            summary = PartitionSummary(part, len(fr), fr.in_flight_count, fr.hosts_count,
                                       dict(fr.busiest(self.summary_top)), now)
            last = self._summaries_written.get(part)
            if (last is None or replace(last, updated_at=now) != summary
                    or now - last.updated_at >= self.summary_heartbeat_s):
                due.append(summary)
        # Together (one row per partition): the state adapter sends concurrent writes as one request or a few.
        # Marked written only once all landed; a failure writes them all again at the next look.
        await asyncio.gather(*(self.state.summary_put(summary) for summary in due))
        for summary in due:
            if summary.part in self.frontiers:
                self._summaries_written[summary.part] = summary

    def stats(self) -> dict[str, int]:
        return {"queued": sum(len(f) for f in self.frontiers.values()), "in_flight": len(self.leases),
                "hosts": sum(f.hosts_count for f in self.frontiers.values()),
                "hosts_with_tail": sum(1 for w in self.windows.values() if w.tail)}
