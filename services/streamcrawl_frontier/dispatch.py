"""How the frontier dispatches: every tick, each owned partition's ready hosts get a lease (durable
before its request exists) and a fetch request dated at the host's politeness time; leases whose result
never came are settled at their expiry (streamcrawl_core.lease.on_expiry)."""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import deque
from collections.abc import Sequence

from prometheus_client import Counter, Gauge
from streamcrawl_contracts.messages import FetchRequest
from streamcrawl_contracts.topics import FETCH_REQUESTS
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.frontier import Frontier, FrontierItem
from streamcrawl_core.frontier_parts import KINDS
from streamcrawl_core.lease import Extend, Hold, Lease, confirm_after, early_check_at, grant, handled, on_expiry
from streamcrawl_runtime.ports.loop import Output

from streamcrawl_frontier.results import FrontierResults
from streamcrawl_frontier.shards import PAUSE_ALL, UrlMeta

log = logging.getLogger("streamcrawl.frontier")

DISPATCHED = Counter("streamcrawl_frontier_dispatched_total", "Fetch requests leased")
EXPIRED = Counter("streamcrawl_frontier_lease_expired_total", "Leases that expired and were re-queued")
EARLY_RECOVERED = Counter("streamcrawl_frontier_lease_early_recovered_total",
                          "Leases ended at their early check, no request started under them: URL re-queued, "
                          "host free again before the lease's expiry")
FENCE_RACED = Counter("streamcrawl_frontier_lease_fence_raced_total",
                      "Early checks whose fenced lease turned out started on the second read: kept in force")
LEASE_WRITE_FAILURES = Counter("streamcrawl_frontier_lease_write_failures_total",
                               "Leases not written (Cassandra unavailable); their hosts stay queued")
QUEUED = Gauge("streamcrawl_frontier_queued", "URLs of the owned partitions held in memory")
HOSTS = Gauge("streamcrawl_frontier_hosts_in_memory", "Hosts held in memory (at most max_hosts)")
READY = Gauge("streamcrawl_frontier_ready_hosts", "Hosts in memory that may be contacted now and hold a URL of the "
              "kind, left after the tick's leases (more than 0 of both kinds: the split decides)", ["kind"])

Picked = tuple[Frontier, FrontierItem, Lease, UrlMeta]


class FrontierDispatch(FrontierResults):
    def tick_due(self, now: float) -> float:
        """When the next tick has work (the run loop sleeps until then): the earliest host timer of the owned
        partitions less the dispatch lookahead, a lease's expiry check, or the periodic reads and writes (the
        overrides, the pauses, the partition summaries). With every lease out no host can be dispatched
        before a result, which is a record, and is handled first; while everything is paused, none before
        the next read of the pauses; now, while hosts of the owned partitions wait in Cassandra and there is room
        for them in memory."""
        if self.paused is None:
            return now  # nothing is leased before the first read of the pauses
        due = min(self._overrides_at + self.overrides_refresh_s, self._pauses_at + self.pauses_refresh_s,
                  self._summary_at + self.summary_every_s, self._sweep_at + self.index_sweep_s)
        lease = self.leases.next_time()
        if lease is not None:
            due = min(due, lease)
        if len(self.windows) < self.max_hosts and any(not s.done for s in self.scans.values()):
            due = min(due, now)  # cold hosts wait for the room there is: load them
        if len(self.leases) < self.max_leases and PAUSE_ALL not in self.paused:
            for fr in self.frontiers.values():
                wake = fr.next_wakeup()
                if wake is not None:
                    due = min(due, wake - self.lookahead_s)
        return due

    async def tick(self, now: float) -> Sequence[Output]:
        await self.refresh_overrides(now)
        await self.refresh_pauses(now)
        await self._expire(now)
        await self.publish_summaries(now)
        self.maybe_sweep(now)
        if len(self.windows) < self.max_hosts and any(not s.done for s in self.scans.values()):
            # cold hosts of the owned partitions, while there is room (and the sweep's pages)
            await self.load_hosts(now, pages=self.pages_per_tick)
        picked: list[Picked] = []
        parked: list[tuple[Frontier, FrontierItem]] = []
        paused_all = self.paused is None or PAUSE_ALL in self.paused
        # Dispatch up to lookahead_s before the host's time; the request carries that time as not_before and
        # the fetcher waits for it, so the hop through Kafka overlaps the delay.
        at = now + self.lookahead_s
        frontiers = dict(self.frontiers)
        room = len(self.leases) < self.max_leases
        turns = self._turns(frontiers, at) if room and not paused_all else None
        while (turns is not None and len(picked) < self.dispatch_per_tick
               and len(self.leases) + len(picked) < self.max_leases):
            got = self._take(frontiers, turns, at)
            if got is None:
                break
            part, fr, item = got
            if item.url in self.cancelled:
                del self.cancelled[item.url]
                fr.done(item.host, now, 0.0, 200)  # no request was made; the host keeps its timer
                # A replayed discovery may have written the row again after the URL was finished:
                # without this delete the durable queue keeps a URL that memory no longer has.
                gone = self.meta.pop(item.url, None)
                fp = gone.url_fp if gone is not None else url_fingerprint(item.url)
                await self.state.queue_delete(part, item.host, gone.priority if gone else None, fp)
                await self.settle_host(fr, part, item.host)  # that may have been the host's last URL
                continue
            if self.paused and item.host in self.paused:
                parked.append((fr, item))  # no lease; leased in the core until the loop ends
                continue
            meta = self.meta.get(item.url) or UrlMeta(url_fingerprint(item.url), 0, part)
            picked.append((fr, item, grant(item.url, meta.url_fp, part, now, self.lease_s), meta))
        self._park(parked, now)
        queued, ready = 0, [0, 0]
        for fr in frontiers.values():
            queued += len(fr)
            d, r = fr.ready(at)
            ready[0] += d
            ready[1] += r
        out = await self._lease(picked, now)
        DISPATCHED.inc(len(out))
        QUEUED.set(queued)
        for k, kind in enumerate(KINDS):
            READY.labels(kind).set(ready[k])
        HOSTS.set(len(self.windows))
        return out

    def _turns(self, frontiers: dict[int, Frontier], at: float) -> tuple[deque[int], deque[int]]:
        """Per kind, the owned partitions with a host ready for it, in turn from the partition after the last
        one that leased that kind. Every partition has its own core Frontier: taken one after the other, the
        first partitions took every free lease while the frontier was the bottleneck (few leases, many ready
        hosts), and the hosts of the others waited for as long as those had work; and each Frontier's own
        discovery/refresh split only ever saw its own hosts, so the instance's split was whatever the first
        partitions held (docs/benchmarks-refresh-split.md)."""
        parts = sorted(frontiers)
        ready = {p: frontiers[p].ready(at) for p in parts}
        out = []
        for k in (0, 1):
            i = bisect.bisect_left(parts, self.kind_turn[k])
            out.append(deque(p for p in parts[i:] + parts[:i] if ready[p][k]))
        return out[0], out[1]

    def _take(self, frontiers: dict[int, Frontier], turns: tuple[deque[int], deque[int]],
              at: float) -> tuple[int, Frontier, FrontierItem] | None:
        """The next lease of the instance: the kind from the instance's discovery/refresh split (stride
        scheduling, when both kinds have a ready host in some partition), then the partition whose turn it is
        for that kind (round robin), then that partition's best host of that kind."""
        while True:
            for k in (0, 1):  # a host leased for one kind may have been a partition's last ready for the other
                q = turns[k]
                while q and not frontiers[q[0]].ready(at)[k]:
                    q.popleft()
            if not turns[0] and not turns[1]:
                return None
            k = self.kind_split.pick() if turns[0] and turns[1] else (0 if turns[0] else 1)
            part = turns[k].popleft()
            fr = frontiers[part]
            item = fr.next(at, KINDS[k])  # not None: the partition was ready for that kind just above
            if fr.ready(at)[k]:
                turns[k].append(part)
            if item is not None:
                self.kind_turn[k] = part + 1
                return part, fr, item

    def _park(self, parked: list[tuple[Frontier, FrontierItem]], now: float) -> None:
        """Paused hosts go back with their URL in its place, and are not looked at again before the next read
        of the pauses (their timer only ever moves later: politeness is untouched)."""
        for fr, item in parked:
            fr.release(item.host, item.url, now)
            snap = fr.host_snapshot(item.host)
            if snap is not None:
                fr.restore_host(item.host, max(snap.next_allowed_at, now + self.pauses_refresh_s), snap.backoff_level)
        parked.clear()

    async def _lease(self, picked: list[Picked], now: float) -> list[Output]:
        """Write the tick's leases, then build the requests of those that landed. A lease is durable before
        its request exists, so a restarted frontier keeps the host blocked until the lease expires. The
        writes go out together: statements in flight at once cost less client CPU than the same statements
        awaited one by one (docs/benchmarks-cql.md)."""
        # Tracked before the writes: a result that arrives while they are in flight (a replay after a
        # restart) must see its host as leased and be handled as stale. Otherwise it would complete the
        # host in the Frontier, forgetting the URL just picked; a fenced answer to that URL's request
        # could then not return it to the queue, and its durable row would never drain.
        for _, item, lease, _ in picked:
            self.leases.track(item.host, lease)
        try:
            results = await asyncio.gather(*(self.state.host_put_lease(item.host, lease.lease_id, item.url,
                                                                       lease.expires_at)
                                             for _, item, lease, _ in picked), return_exceptions=True)
        except BaseException:
            for fr, item, lease, _ in picked:
                self.leases.untrack(item.host, lease)
                fr.release(item.host, item.url, now)  # else the hosts stay in flight with no lease
            raise
        out: list[Output] = []
        failed: BaseException | None = None
        for (fr, item, lease, meta), res in zip(picked, results, strict=True):
            if isinstance(res, BaseException):
                self.leases.untrack(item.host, lease)
                fr.release(item.host, item.url, now)  # back in the queue; a later tick tries again
                failed = failed or res
                continue
            check = early_check_at(now, self.lease_s, self.lease_check_s, self.start_delay_s)
            if check is not None:
                self.leases.recheck_at(item.host, lease, check)
            snap = fr.host_snapshot(item.host)
            not_before = max(item.not_before, snap.next_allowed_at if snap else 0.0)
            if log.isEnabledFor(logging.DEBUG):  # per lease: nothing is built when debug is off
                log.debug("leased", extra={"url": item.url, "lease": lease.lease_id, "partition": lease.part,
                                           "not_before": round(not_before, 3)})
            out.append(Output(FETCH_REQUESTS, item.host, FetchRequest(
                url=item.url, host=item.host, url_fp=meta.url_fp, depth=meta.depth, kind=item.kind,
                lease_id=lease.lease_id, lease_expires_at=lease.expires_at,
                not_before=not_before if not_before > now else 0.0, redirect_chain=list(meta.redirect_chain),
                confirm_after=confirm_after(now, self.lease_s, self.lease_check_s))))
        if failed is not None:
            LEASE_WRITE_FAILURES.inc(sum(isinstance(r, BaseException) for r in results))
            log.warning("lease writes failed; their hosts stay queued", extra={"error": repr(failed)[:300]})
        return out

    async def _expire(self, now: float) -> None:
        """Settle the leases whose (re)check time has come and whose result never arrived."""
        while (due := self.leases.next_due(now)) is not None:
            host, lease = due
            if now < lease.expires_at:
                await self._early_check(host, lease, now)
                continue
            # Did a request go out under the lease? The fetcher marks a lease started right before its
            # request (and sends none in the lease's last seconds) and finished after it.
            try:
                marks = await self.state.host_lease(host)
            except BaseException:
                self.leases.recheck_at(host, lease, now)  # still leased: the next tick tries again
                raise
            if self.leases.get(host) is not lease:
                continue  # its result arrived during the read
            decision = on_expiry(lease.lease_id, marks, now, self.max_request_s)
            if isinstance(decision, Extend):
                # Started and not finished: the request may still be running in a live fetcher, so the
                # lease stays in force until the longest request would be over (its result frees the host
                # as usual). Freeing the host now let a second request in beside a running one.
                self.leases.recheck_at(host, lease, decision.until)
                continue
            self.leases.end(host, lease.lease_id)
            EXPIRED.inc()
            log.debug("lease expired", extra={"url": lease.url, "lease": lease.lease_id,
                                              "decision": type(decision).__name__})
            restored = self.restored.get(host)
            if restored is not None and restored[0] == lease.lease_id:
                del self.restored[host]  # a rebuilt host's stand-in lease: no result will replace it now
            fr = self.frontiers.get(lease.part)
            if isinstance(decision, Hold) and fr is not None:
                # Still no result after the longest request: the fetcher died or hangs. The host may have
                # been busy with us since the start: it waits the 10x delay of that.
                await self.hold(fr, host, lease.url, now, decision.fetch_s)
            else:
                if fr is not None:
                    fr.release(host, lease.url, now)
                await self.state.host_put_lease(host, None, None, None)
            if fr is not None:
                # A rebuilt host whose leased URL was finished already has nothing left: it leaves memory
                # and the index (else its index row would outlive it and the crawl never read as drained).
                await self.settle_host(fr, lease.part, host)

    async def _early_check(self, host: str, lease: Lease, now: float) -> None:
        """A lease's early check (streamcrawl_core.lease): if no request was started under it, fence it
        (host_state's lease cleared: a fetcher confirming it finds it superseded and sends nothing), read
        the marks again, and only if they still show nothing end it and put the URL back, so the host is
        leased again now instead of at the expiry. A request started between the fence and the second read
        keeps the lease in force (host_state's lease written back, so a rebuilt frontier keeps the host
        blocked too): its result ends it as any result does, and the expiry check still applies."""
        lease_id = lease.lease_id
        try:
            marks = await self.state.host_lease(host)
            if self.leases.get(host) is not lease:
                return  # its result arrived during the read
            if handled(lease_id, marks):
                if lease_id in self.fenced:  # fenced by an attempt whose second read failed
                    await self.state.host_put_lease(host, lease_id, lease.url, lease.expires_at)
                    self.fenced.discard(lease_id)
                return  # started (or done): the expiry check settles it as before
            self.fenced.add(lease_id)
            await self.state.host_put_lease(host, None, None, None)
            if self.leases.get(host) is not lease:
                self.fenced.discard(lease_id)
                return
            marks = await self.state.host_lease(host)
        except BaseException:
            if self.leases.get(host) is lease:
                self.leases.recheck_at(host, lease, now)  # still leased: the next tick tries again
            raise
        if self.leases.get(host) is not lease:
            self.fenced.discard(lease_id)
            return
        if handled(lease_id, marks):
            # The fetcher wrote its started mark before the fence landed: its request may be under way (or
            # it may find the fence when it confirms, and answer lease_expired). Either way its result
            # settles the lease; until then the host stays blocked.
            FENCE_RACED.inc()
            await self.state.host_put_lease(host, lease_id, lease.url, lease.expires_at)
            self.fenced.discard(lease_id)
            return
        self.fenced.discard(lease_id)
        self.leases.end(host, lease_id)
        EARLY_RECOVERED.inc()
        log.info("lease recovered early: no request started", extra={"url": lease.url, "lease": lease_id})
        fr = self.frontiers.get(lease.part)
        if fr is None:
            return
        restored = self.restored.get(host)
        if restored is not None and restored[0] == lease_id:
            # A rebuilt host's stand-in lease: blocked until its expiry, which no request needs now; its URL
            # is queued from its durable row. The persisted timer comes back.
            del self.restored[host]
            snap = fr.host_snapshot(host)
            fr.restore_host(host, max(restored[1], now), snap.backoff_level if snap else 0)
        else:
            fr.release(host, lease.url, now)
        await self.settle_host(fr, lease.part, host)
