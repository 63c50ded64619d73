"""The frontier's run-loop handler: seeds in, URLs in, fetch results in; leased fetch requests out.

State per owned partition is one core `Frontier` (Mercator front/back queues + timer heap). Durable state:
every queued URL is in Cassandra `frontier_queue` before its offset is committed, and each host's
politeness timer, back-off level and current lease are in `host_state`. On assignment a partition's
frontier is rebuilt from those rows, so a kill -9 or a rebalance loses nothing, and a host whose lease
is still live stays blocked until the lease expires: no host ever has two fetches in flight.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from prometheus_client import Counter, Gauge
from streamcrawl_contracts.messages import (
    Envelope,
    FetchRequest,
    FetchResult,
    SeedMessage,
    UrlCandidates,
    UrlMessage,
)
from streamcrawl_contracts.topics import FETCH_REQUESTS, HOST_PARTITIONS, SEEDS, URL_CANDIDATES
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.frontier import Frontier, FrontierConfig, FrontierItem
from streamcrawl_core.partition import host_key, partition_for
from streamcrawl_core.politeness import HostOverride, PolitenessConfig, next_allowed_at
from streamcrawl_core.urls import UrlError, host_of, normalize
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record
from streamcrawl_runtime.ports.state import FrontierState, QueuedUrl

log = logging.getLogger("streamcrawl.frontier")

DISPATCHED = Counter("streamcrawl_frontier_dispatched_total", "Fetch requests leased")
REROUTED = Counter("streamcrawl_frontier_rerouted_total", "Seeds that arrived on the wrong partition")
EXPIRED = Counter("streamcrawl_frontier_lease_expired_total", "Leases that expired and were re-queued")
INTERRUPTED = Counter("streamcrawl_frontier_interrupted_total",
                      "Results of requests cut short by a fetcher's crash: URL re-queued, host held back")
RETRIED = Counter("streamcrawl_frontier_retried_total", "Fetches re-queued after 429/503 or a network error")
REPLAY_DROPPED = Counter("streamcrawl_frontier_replay_dropped_total",
                         "Discoveries re-sent by dedup after a crash for URLs already finished")
LEASE_WRITE_FAILURES = Counter("streamcrawl_frontier_lease_write_failures_total",
                               "Leases not written (Cassandra unavailable); their hosts stay queued")
QUEUED = Gauge("streamcrawl_frontier_queued", "URLs queued in owned partitions")


@dataclass
class Lease:
    lease_id: str
    url: str
    url_fp: int
    part: int
    expires_at: float


@dataclass
class UrlMeta:
    url_fp: int
    depth: int
    part: int
    attempts: int = 0

#: Outcomes worth another try: the host asked us to slow down (429/503) or did not answer. Other 4xx/5xx
#: are answers. The host's back-off (politeness) spaces the retries.
RETRY_STATUSES = frozenset({429, 503})
MAX_ATTEMPTS = 5
#: Outcomes whose lease was spent on robots.txt or the soft-404 probe: the page itself is still to fetch.
LEASE_WITHOUT_PAGE = frozenset({"robots_fetched", "probe_fetched"})


class FrontierHandler:
    def __init__(self, state: FrontierState, politeness: PolitenessConfig, *, lease_s: float = 120.0,
                 discovery_share: float = 0.3, dispatch_per_tick: int = 500,
                 partitions: int = HOST_PARTITIONS, max_leases: int = 1000, lookahead_s: float = 0.3,
                 margin_s: float = 0.01, max_request_s: float = 130.0) -> None:
        self.state = state
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
        self.leases: dict[str, Lease] = {}       # host → live lease
        self._expiries: list[tuple[float, str, str]] = []  # heap of (expires_at, host, lease_id)
        self.known_hosts: set[str] = set()       # hosts whose host_state was loaded
        # URLs fetched under a lease from before a rebuild but queued again by the rebuild: skipped at
        # dispatch (the core frontier has no delete; the host only pays one minimum delay).
        self.cancelled: set[str] = set()
        # Per-host parameters: robots Crawl-delay (from fetch results) and agreed overrides (control plane).
        self.crawl_delays: dict[str, float | None] = {}
        self.overrides: dict[str, HostOverride] = {}
        self.overrides_refresh_s = 30.0
        self._overrides_at = 0.0

    # ------------------------------------------------------------------ partitions

    async def on_assign(self, partitions: list[int]) -> None:
        now = time.time()
        for part in partitions:
            if part in self.frontiers:
                continue
            fr = self.frontiers[part] = Frontier(self.fconfig)
            rows = await self.state.queue_load(part)
            for host in sorted({r.host for r in rows}):
                await self._load_host(fr, host, now)
            for r in rows:
                self.meta[r.url] = UrlMeta(r.url_fp, r.depth, part)
                fr.add(r.url, r.host, r.priority, r.not_before, "refresh" if r.kind == "refresh" else "discovery",
                       enqueued_at=r.enqueued_at)
            log.info("partition rebuilt", extra={"partition": part, "urls": len(rows)})

    async def on_revoke(self, partitions: list[int]) -> None:
        for part in partitions:
            self.frontiers.pop(part, None)
        self.meta = {u: m for u, m in self.meta.items() if m.part not in partitions}
        self.leases = {h: le for h, le in self.leases.items() if le.part not in partitions}
        self.known_hosts = {h for h in self.known_hosts if partition_for(h, self.partitions) not in partitions}

    async def _load_host(self, fr: Frontier, host: str, now: float) -> None:
        """Restore a host's timer, back-off and Crawl-delay from host_state; a live lease keeps the host
        blocked until it expires (its fetch may still be running somewhere)."""
        self.known_hosts.add(host)
        hs = await self.state.host_get(host)
        if hs is None:
            return
        if hs.crawl_delay_s is not None or host in self.overrides:
            self._set_params(fr, host, hs.crawl_delay_s)
        blocked_until = hs.next_allowed_at or 0.0
        if hs.lease_expires_at is not None and hs.lease_expires_at > now:
            blocked_until = max(blocked_until, hs.lease_expires_at)
            if hs.lease_id and hs.lease_url:
                # Remember the live lease: its result frees the host; any older result is stale.
                self._track(host, Lease(hs.lease_id, hs.lease_url, url_fingerprint(hs.lease_url),
                                        partition_for(host, self.partitions), hs.lease_expires_at))
        if blocked_until > 0 or hs.backoff_level:
            fr.restore_host(host, blocked_until, hs.backoff_level)

    # ------------------------------------------------------------------ records

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if isinstance(message, SeedMessage):
            return self._seed(record, message)
        if isinstance(message, UrlMessage):
            await self._enqueue(record, message)
            return []
        if isinstance(message, FetchResult):
            await self._result(record, message)
            return []
        raise PoisonMessage(f"unexpected message type {type(message).__name__}")

    def _seed(self, record: Record, seed: SeedMessage) -> Sequence[Output]:
        try:
            url = normalize(seed.url)
        except UrlError as exc:
            raise PoisonMessage(f"malformed seed URL ({exc.reason}): {seed.url[:200]}") from exc
        host = host_key(host_of(url))
        if record.key != host or record.partition != partition_for(host, self.partitions):
            # Produced unkeyed or with a wrong key: send it to the partition that owns the host.
            REROUTED.inc()
            return [Output(SEEDS, host, seed.model_copy(update={"url": url}))]
        # Seeds take the same path as every other URL: through the dedup seen-set to this frontier.
        cand = UrlCandidates(host=host, depth=0, source_url="seed:" + seed.source, urls=[url],
                             url_fps=[url_fingerprint(url)])
        return [Output(URL_CANDIDATES, host, cand)]

    async def _enqueue(self, record: Record, msg: UrlMessage) -> None:
        part = record.partition
        fr = self.frontiers.get(part)
        if fr is None:  # not ours any more (revoked mid-flight): the new owner replays it
            return
        if msg.replayed and not fr.is_known(msg.url):
            # Re-sent by dedup after a crash: if this frontier already finished the URL, the replay must
            # not fetch it again. Only replays pay this read.
            row = await self.state.url_get(msg.host, msg.url_fp)
            if row is not None and row.frontier_done_at is not None:
                REPLAY_DROPPED.inc()
                return
        now = time.time()
        if msg.host not in self.known_hosts:
            await self._load_host(fr, msg.host, now)
        await self.state.queue_put(QueuedUrl(part, msg.host, msg.url_fp, msg.url, msg.priority, msg.kind,
                                             msg.not_before, msg.depth, now))
        if fr.add(msg.url, msg.host, msg.priority, msg.not_before, msg.kind, enqueued_at=now):
            self.meta[msg.url] = UrlMeta(msg.url_fp, msg.depth, part)

    async def _result(self, record: Record, res: FetchResult) -> None:
        part = record.partition
        fr = self.frontiers.get(part)
        if fr is None:
            return
        now = time.time()
        # The politeness delay runs from the end of the exchange (fetcher clock; the fetcher enforces the
        # next request's not_before on the same clock), not from when the result reached us: Kafka's
        # latency is not added to every delay. Never later than now + 5 s (a fetcher clock gone wild).
        # margin_s: the host's own clock may log the end of its response a little later than we saw it
        # (the kernel or a garbage collection can hold the server process between its last write and
        # its time stamp; the synthetic web freezes its heap for that reason);
        # politeness is judged by the host's log. 10 ms covered every gap the synthetic web logged in
        # docs/benchmarks-crawl-bound.md; a remote host's stamp is earlier than our ended_at anyway.
        end = now if res.ended_at is None else min(res.ended_at + self.margin_s, now + 5.0)
        # A truncated body: we stopped reading while the host was still sending, and it logs the end of
        # the exchange only when a later write of its own fails, after we saw it; the 10x rule multiplies
        # that difference (seen on a 12 MB page: 0.49 s in the host's log, ~0.4 s here). Count it twice.
        fetch_s = res.fetch_s * 2.0 if res.truncated else res.fetch_s
        lease = self.leases.get(res.host)
        if lease is not None and lease.lease_id == res.lease_id:
            del self.leases[res.host]
            if res.outcome == "lease_expired":
                fr.release(res.host, res.url, now)
                await self.state.host_put_lease(res.host, None, None, None)
                return
            if res.outcome == "interrupted":
                await self._interrupted(fr, part, res, end, fetch_s, leased=True)
                return
            try:
                nxt = fr.done(res.host, end, fetch_s, res.status, res.crawl_delay_s, res.retry_after_s)
            except (KeyError, ValueError):  # host not in flight in this rebuilt frontier
                nxt = next_allowed_at(end, fetch_s, res.crawl_delay_s, self.politeness)
                fr.restore_host(res.host, nxt, 0)
            snap = fr.host_snapshot(res.host)
            level = snap.backoff_level if snap else 0
        else:
            # A result from before a restart, or a replay: apply its politeness without a local lease.
            if res.outcome == "lease_expired":
                return  # no request was made (a fenced replay): nothing to learn, nothing to free
            if res.outcome == "interrupted":
                if res.host not in self.leases:  # else a later lease is live: this one is long over
                    await self._interrupted(fr, part, res, end, fetch_s, leased=False)
                return
            if res.host in self.leases:
                # Another lease is live, so this result is stale for politeness; but the page was fetched,
                # so the rebuilt queue's copy of it must not be fetched again.
                if res.outcome not in LEASE_WITHOUT_PAGE and not self._retryable(res):
                    await self._finish_url(fr, part, res.host, res.url, res.url_fp)
                return
            # done() on a host that is not in flight only ever pushes its timer later: a late result can
            # never shorten a back-off or a delay already in force.
            nxt = fr.done(res.host, end, fetch_s, res.status, res.crawl_delay_s, res.retry_after_s)
            snap = fr.host_snapshot(res.host)
            level = snap.backoff_level if snap else 0
        if res.crawl_delay_s is not None:
            self._set_params(fr, res.host, res.crawl_delay_s)
        meta = self.meta.get(res.url)
        attempts = (meta.attempts if meta else 0) + 1
        retry = self._retryable(res) and attempts < MAX_ATTEMPTS
        if res.outcome not in LEASE_WITHOUT_PAGE and not retry:
            # The URL is done: the host's timer (which also clears the lease in host_state) and the finish in
            # one unlogged batch. Its writes are idempotent but it is not atomic, and either part alone is
            # repaired by the replayed result. Politeness alone leaves no lease in host_state: the replay
            # is a result without a lease and finishes the URL. The finish alone leaves the lease: a
            # rebuilt frontier keeps the host blocked until it expires and the replay (same lease id)
            # writes both again. A failed request fails the message; its retry writes both again.
            await self.state.host_politeness_and_finish(res.host, nxt, level, res.fetch_s * 1000.0,
                                                        res.crawl_delay_s, part, res.url_fp, time.time())
            self._forget_url(fr, res.url)
            return
        # (also clears the lease in host_state)
        await self.state.host_put_politeness(res.host, nxt, level, res.fetch_s * 1000.0, res.crawl_delay_s)
        if res.outcome in LEASE_WITHOUT_PAGE:
            # Only robots.txt (or the soft-404 probe) was requested under this lease: the page goes back.
            fr.add(res.url, res.host, 0, 0.0, res.kind, enqueued_at=now)
            if meta is None:
                self.meta[res.url] = UrlMeta(res.url_fp, res.depth, part)
            return
        RETRIED.inc()
        fr.add(res.url, res.host, 0, 0.0, res.kind, enqueued_at=now)
        self.meta[res.url] = UrlMeta(res.url_fp, res.depth, part, attempts)

    async def _interrupted(self, fr: Frontier, part: int, res: FetchResult, end: float, fetch_s: float,
                           leased: bool) -> None:
        """A request under the result's lease was under way when its fetcher stopped, and its outcome is
        lost: the host may have served it for up to fetch_s, until ``end``. The URL keeps its place in the
        queue (it is fetched again later: at-least-once), and the host waits the politeness delay of such a
        fetch; no back-off, the host did nothing wrong."""
        INTERRUPTED.inc()
        # A rebuilt frontier (the URL is queued from its durable row, the host not in flight), or a replay
        # of a result handled before: only the host's timer moves. A replay must not queue the URL again:
        # it may have been fetched and finished since.
        await self._hold(fr, res.host, res.url if leased else None, end, fetch_s)
        if leased and fr.add(res.url, res.host, 0, 0.0, res.kind, enqueued_at=end) and res.url not in self.meta:
            self.meta[res.url] = UrlMeta(res.url_fp, res.depth, part)

    async def _hold(self, fr: Frontier, host: str, leased_url: str | None, end: float, fetch_s: float) -> None:
        """A request to ``host`` whose outcome is unknown may have run for ``fetch_s`` until ``end``: the
        leased URL (if any) goes back to its place, the host waits the 10x delay of such a fetch, and the
        timer is written (which also ends the lease in host_state)."""
        if leased_url is not None:
            fr.release(host, leased_url, end, fetch_s=fetch_s)
        nxt = fr.hold(host, end, fetch_s)  # after a release a no-op that returns the timer it set
        snap = fr.host_snapshot(host)
        await self.state.host_put_politeness(host, nxt, snap.backoff_level if snap else 0, fetch_s * 1000.0,
                                             self.crawl_delays.get(host))

    @staticmethod
    def _retryable(res: FetchResult) -> bool:
        return res.outcome == "network_error" or (res.outcome == "http_error" and res.status in RETRY_STATUSES)

    async def _finish_url(self, fr: Frontier, part: int, host: str, url: str, url_fp: int) -> None:
        """The URL is done for this cycle: drop its durable row and mark it done in url_state."""
        await self.state.queue_finish(part, host, url_fp, time.time())
        self._forget_url(fr, url)

    def _forget_url(self, fr: Frontier, url: str) -> None:
        """Once the finish is written: a queued copy (from a rebuild or a replayed discovery) is skipped
        at dispatch."""
        self.meta.pop(url, None)
        if fr.is_known(url):
            self.cancelled.add(url)

    def _set_params(self, fr: Frontier, host: str, crawl_delay_s: float | None) -> None:
        # set_host_params replaces both values, so both are always passed.
        self.crawl_delays[host] = crawl_delay_s
        fr.set_host_params(host, crawl_delay_s=crawl_delay_s, override=self.overrides.get(host))

    async def _refresh_overrides(self, now: float) -> None:
        """Agreed per-host rates from the control plane's host_overrides table, re-read every 30 s."""
        if now - self._overrides_at < self.overrides_refresh_s:
            return
        self._overrides_at = now
        rows = await self.state.host_overrides()
        fresh = {h: HostOverride(r.min_delay_s, r.delay_factor) for h, r in rows.items()
                 if r.min_delay_s is not None or r.delay_factor is not None}
        changed = {h for h in set(fresh) | set(self.overrides) if fresh.get(h) != self.overrides.get(h)}
        self.overrides = fresh
        for host in changed & self.known_hosts:
            fr = self.frontiers.get(partition_for(host, self.partitions))
            if fr is not None:
                self._set_params(fr, host, self.crawl_delays.get(host))

    # ------------------------------------------------------------------ dispatch

    async def tick(self, now: float) -> Sequence[Output]:
        await self._refresh_overrides(now)
        await self._expire(now)
        picked: list[tuple[Frontier, FrontierItem, Lease, UrlMeta]] = []
        queued = 0
        for part, fr in list(self.frontiers.items()):
            while len(picked) < self.dispatch_per_tick and len(self.leases) + len(picked) < self.max_leases:
                # Dispatch up to lookahead_s before the host's time; the request carries that time as
                # not_before and the fetcher waits for it, so the hop through Kafka overlaps the delay.
                item = fr.next(now + self.lookahead_s)
                if item is None:
                    break
                if item.url in self.cancelled:
                    self.cancelled.discard(item.url)
                    fr.done(item.host, now, 0.0, 200)  # no request was made; the host keeps its timer
                    # A replayed discovery may have written the row again after the URL was finished:
                    # without this delete the durable queue keeps a URL that memory no longer has.
                    fp = self.meta.pop(item.url).url_fp if item.url in self.meta else url_fingerprint(item.url)
                    await self.state.queue_delete(part, item.host, fp)
                    continue
                meta = self.meta.get(item.url) or UrlMeta(url_fingerprint(item.url), 0, part)
                lease = Lease(uuid.uuid4().hex, item.url, meta.url_fp, part, now + self.lease_s)
                picked.append((fr, item, lease, meta))
            queued += len(fr)
        out = await self._lease(picked, now)
        DISPATCHED.inc(len(out))
        QUEUED.set(queued)
        return out

    async def _lease(self, picked: list[tuple[Frontier, FrontierItem, Lease, UrlMeta]],
                     now: float) -> list[Output]:
        """Write the tick's leases, then build the requests of those that landed. A lease is durable before
        its request exists, so a restarted frontier keeps the host blocked until the lease expires. The
        writes go out together: statements in flight at once cost less client CPU than the same statements
        awaited one by one (docs/benchmarks-cql.md)."""
        # Tracked before the writes: a result that arrives while they are in flight (a replay after a
        # restart) must see its host as leased and be handled as stale. Otherwise it would complete the
        # host in the Frontier, forgetting the URL just picked; a fenced answer to that URL's request
        # could then not return it to the queue, and its durable row would never drain.
        for _, item, lease, _ in picked:
            self._track(item.host, lease)
        try:
            results = await asyncio.gather(*(self.state.host_put_lease(item.host, lease.lease_id, item.url,
                                                                       lease.expires_at)
                                             for _, item, lease, _ in picked), return_exceptions=True)
        except BaseException:
            for fr, item, lease, _ in picked:
                self._untrack(item.host, lease)
                fr.release(item.host, item.url, now)  # else the hosts stay in flight with no lease
            raise
        out: list[Output] = []
        failed: BaseException | None = None
        for (fr, item, lease, meta), res in zip(picked, results, strict=True):
            if isinstance(res, BaseException):
                self._untrack(item.host, lease)
                fr.release(item.host, item.url, now)  # back in the queue; a later tick tries again
                failed = failed or res
                continue
            snap = fr.host_snapshot(item.host)
            not_before = max(item.not_before, snap.next_allowed_at if snap else 0.0)
            out.append(Output(FETCH_REQUESTS, item.host, FetchRequest(
                url=item.url, host=item.host, url_fp=meta.url_fp, depth=meta.depth, kind=item.kind,
                lease_id=lease.lease_id, lease_expires_at=lease.expires_at,
                not_before=not_before if not_before > now else 0.0)))
        if failed is not None:
            LEASE_WRITE_FAILURES.inc(sum(isinstance(r, BaseException) for r in results))
            log.warning("lease writes failed; their hosts stay queued", extra={"error": repr(failed)[:300]})
        return out

    def _track(self, host: str, lease: Lease) -> None:
        self.leases[host] = lease
        heapq.heappush(self._expiries, (lease.expires_at, host, lease.lease_id))

    def _untrack(self, host: str, lease: Lease) -> None:
        if self.leases.get(host) is lease:  # its heap entry is skipped when it comes up
            del self.leases[host]

    async def _expire(self, now: float) -> None:
        # A heap of expiry times, not a scan of every live lease on every tick (20 ticks a second); an
        # entry whose lease has ended (result, revoke) or was replaced is skipped.
        while self._expiries and self._expiries[0][0] <= now:
            entry = heapq.heappop(self._expiries)
            _, host, lease_id = entry
            lease = self.leases.get(host)
            if lease is None or lease.lease_id != lease_id:
                continue
            # No result came. Did a request go out under the lease? The fetcher marks a lease started right
            # before its request (and sends none later than 5 s before the expiry) and finished after it.
            try:
                row = await self.state.host_lease(host)
            except BaseException:
                heapq.heappush(self._expiries, entry)  # still leased: the next tick tries again
                raise
            if self.leases.get(host) is not lease:
                continue  # its result arrived during the read
            # When a request went out under it and never finished; None if none did.
            started_at = row.started_at if row.started_lease == lease_id and row.fetched_lease != lease_id else None
            if started_at is not None and now < started_at + self.max_request_s:
                # Started and not finished: the request may still be running in a live fetcher, so the
                # lease stays in force until the longest request would be over (its result frees the host
                # as usual). Freeing the host now let a second request in beside a running one.
                heapq.heappush(self._expiries, (started_at + self.max_request_s, host, lease_id))
                continue
            del self.leases[host]
            EXPIRED.inc()
            fr = self.frontiers.get(lease.part)
            if fr is not None and started_at is not None:
                # Still no result after the longest request: the fetcher died or hangs. The host may have
                # been busy with us since the start: it waits the 10x delay of that.
                await self._hold(fr, host, lease.url, now, max(0.0, now - started_at))
                continue
            if fr is not None:
                fr.release(host, lease.url, now)
            await self.state.host_put_lease(host, None, None, None)

    def stats(self) -> dict[str, int]:
        return {"queued": sum(len(f) for f in self.frontiers.values()), "in_flight": len(self.leases),
                "hosts": sum(f.hosts_count for f in self.frontiers.values())}
