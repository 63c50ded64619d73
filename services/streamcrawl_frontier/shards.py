"""The frontier's per-partition state and its ownership: one core `Frontier` per owned partition, the
URLs' metadata, live leases, per-host parameters; rebuilt from Cassandra on assignment, dropped on revoke.

Durable state: every queued URL is in `frontier_queue` before its offset is committed, and each host's
politeness timer, back-off level and current lease are in `host_state`. So a kill -9 or a rebalance
loses nothing, and a host whose lease is still live stays blocked until the lease expires: no host ever
has two fetches in flight.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from streamcrawl_contracts.topics import HOST_PARTITIONS
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.frontier import Frontier, FrontierConfig
from streamcrawl_core.lease import Lease, LeaseTable
from streamcrawl_core.partition import partition_for
from streamcrawl_core.politeness import HostOverride, PolitenessConfig
from streamcrawl_runtime.ports.state import FrontierState, PartitionSummary

log = logging.getLogger("streamcrawl.frontier")

#: The crawl_pauses scope that pauses every host.
PAUSE_ALL = "*"


@dataclass
class UrlMeta:
    url_fp: int
    depth: int
    part: int
    attempts: int = 0
    redirect_chain: tuple[int, ...] = ()  # streamcrawl_core.redirects: travels on to the fetch request


class FrontierShards:
    """State shared by the frontier handler's parts (results, dispatch): see the module docstring."""

    def __init__(self, state: FrontierState, politeness: PolitenessConfig, *, lease_s: float = 120.0,
                 discovery_share: float = 0.3, dispatch_per_tick: int = 500,
                 partitions: int = HOST_PARTITIONS, max_leases: int = 1000, lookahead_s: float = 0.3,
                 margin_s: float = 0.01, max_request_s: float = 130.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.state = state
        self.clock = clock  # wall-clock epoch seconds: results' ended_at and fetchers' not_before share it
        self.politeness = politeness
        self.lease_s = lease_s
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
        self.fconfig = FrontierConfig(discovery_share=discovery_share, politeness=politeness)
        self.frontiers: dict[int, Frontier] = {}
        self.meta: dict[str, UrlMeta] = {}
        self.leases = LeaseTable()               # host → live lease, with expiry times
        self.known_hosts: set[str] = set()       # hosts whose host_state was loaded
        # URLs fetched under a lease from before a rebuild but queued again by the rebuild: skipped at
        # dispatch (the core frontier has no delete; the host only pays one minimum delay).
        self.cancelled: set[str] = set()
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
        # What each owned partition holds (frontier_summary), for the control plane's stats.
        self.summary_every_s = 5.0
        self.summary_top = 20
        self._summary_at = 0.0

    # ------------------------------------------------------------------ partitions

    async def on_assign(self, partitions: list[int]) -> None:
        now = self.clock()
        for part in partitions:
            if part in self.frontiers:
                continue
            fr = self.frontiers[part] = Frontier(self.fconfig)
            rows = await self.state.queue_load(part)
            for host in sorted({r.host for r in rows}):
                await self.load_host(fr, host, now)
            for r in rows:
                self.meta[r.url] = UrlMeta(r.url_fp, r.depth, part, redirect_chain=r.redirect_chain)
                fr.add(r.url, r.host, r.priority, r.not_before, "refresh" if r.kind == "refresh" else "discovery",
                       enqueued_at=r.enqueued_at)
            log.info("partition rebuilt", extra={"partition": part, "urls": len(rows)})

    async def on_revoke(self, partitions: list[int]) -> None:
        for part in partitions:
            self.frontiers.pop(part, None)
        self.meta = {u: m for u, m in self.meta.items() if m.part not in partitions}
        self.leases.drop_parts(set(partitions))
        self.restored = {h: r for h, r in self.restored.items() if h in self.leases}
        self.known_hosts = {h for h in self.known_hosts if partition_for(h, self.partitions) not in partitions}

    async def load_host(self, fr: Frontier, host: str, now: float) -> None:
        """Restore a host's timer, back-off and Crawl-delay from host_state; a live lease keeps the host
        blocked until it expires (its fetch may still be running somewhere)."""
        self.known_hosts.add(host)
        hs = await self.state.host_get(host)
        if hs is None:
            return
        if hs.crawl_delay_s is not None or host in self.overrides:
            self.set_params(fr, host, hs.crawl_delay_s)
        blocked_until = hs.next_allowed_at or 0.0
        if hs.lease_expires_at is not None and hs.lease_expires_at > now:
            blocked_until = max(blocked_until, hs.lease_expires_at)
            if hs.lease_id and hs.lease_url:
                # Remember the live lease: its result frees the host; any older result is stale.
                self.leases.track(host, Lease(hs.lease_id, hs.lease_url, url_fingerprint(hs.lease_url),
                                              partition_for(host, self.partitions), hs.lease_expires_at))
                self.restored[host] = (hs.lease_id, hs.next_allowed_at or 0.0)
        if blocked_until > 0 or hs.backoff_level:
            fr.restore_host(host, blocked_until, hs.backoff_level)

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
        for host in changed & self.known_hosts:
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
        # Together (one row per partition): the state adapter sends concurrent writes as one request or a few.
        await asyncio.gather(*(self.state.summary_put(PartitionSummary(part, len(fr), fr.in_flight_count,
                                                                       fr.hosts_count,
                                                                       dict(fr.busiest(self.summary_top)), now))
                               for part, fr in list(self.frontiers.items())))

    def stats(self) -> dict[str, int]:
        return {"queued": sum(len(f) for f in self.frontiers.values()), "in_flight": len(self.leases),
                "hosts": sum(f.hosts_count for f in self.frontiers.values())}
