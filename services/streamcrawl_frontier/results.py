"""How the frontier handles fetch results: the host's next politeness time (from the end of the exchange
on the fetcher's clock), back-off and retries, re-queueing pages whose lease went to robots.txt or the
soft-404 probe, interrupted and stale results, and finishing URLs (the durable row and the done mark)."""

from __future__ import annotations

import logging

from prometheus_client import Counter
from streamcrawl_contracts.messages import FetchResult
from streamcrawl_core.frontier import Frontier
from streamcrawl_core.lease import interrupted_delay_basis

from streamcrawl_frontier.shards import FrontierShards, UrlMeta

INTERRUPTED = Counter("streamcrawl_frontier_interrupted_total",
                      "Results of requests cut short by a fetcher's crash: URL re-queued, host held back")
log = logging.getLogger("streamcrawl.frontier")
RETRIED = Counter("streamcrawl_frontier_retried_total", "Fetches re-queued after 429/503 or a network error")

#: Outcomes worth another try: the host asked us to slow down (429/503) or did not answer. Other 4xx/5xx
#: are answers. The host's back-off (politeness) spaces the retries.
RETRY_STATUSES = frozenset({429, 503})
MAX_ATTEMPTS = 5
#: Outcomes whose lease was spent on robots.txt or the soft-404 probe, or on a page held back until its host
#: is probed (soft404_suspect): the page itself is still to fetch.
LEASE_WITHOUT_PAGE = frozenset({"robots_fetched", "probe_fetched", "soft404_suspect"})
#: The weight of each result in the running average of the time from grant to the fetcher's start.
START_DELAY_WEIGHT = 0.05


def retryable(res: FetchResult) -> bool:
    return res.outcome == "network_error" or (res.outcome == "http_error" and res.status in RETRY_STATUSES)


class FrontierResults(FrontierShards):
    async def result(self, part: int, res: FetchResult) -> None:
        fr = self.frontiers.get(part)
        if fr is None:
            return
        now = self.clock()
        if res.host not in self.windows:  # a host not in memory (cold): its state comes back first
            await self.load_host(fr, res.host, now)
        elif await self.host_loaded(res.host) and self.frontiers.get(part) is not fr:
            return  # revoked while the host's load ran
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
        if log.isEnabledFor(logging.DEBUG):
            live = self.leases.get(res.host)
            log.debug("result", extra={"url": res.url, "lease": res.lease_id, "outcome": res.outcome,
                                       "live_lease": live.lease_id if live else None,
                                       "restored": res.host in self.restored, "known": fr.is_known(res.url)})
        if (ended := self.leases.end(res.host, res.lease_id)) is not None:
            if res.outcome != "interrupted" and res.host not in self.restored:
                # How long requests wait between the grant and the fetcher (Kafka, the fetcher's backlog):
                # under load the early check moves later (streamcrawl_core.lease.early_check_at).
                waited = res.started_at - (ended.expires_at - self.lease_s)
                self.start_delay_s += START_DELAY_WEIGHT * (min(max(waited, 0.0), self.lease_s) - self.start_delay_s)
            if res.outcome == "lease_expired":
                fr.release(res.host, res.url, now)
                await self.state.host_put_lease(res.host, None, None, None)
                return
            if res.outcome == "interrupted":
                await self._interrupted(fr, part, res, end, fetch_s, leased=True)
                return
            restored = self.restored.pop(res.host, None)
            if restored is not None and restored[0] == res.lease_id:
                # A lease restored by a rebuild: the host is not in flight here but blocked until the lease's
                # expiry, standing in for the request. Now that its result is in, the host's persisted timer
                # comes back and done() sets the next time from this exchange (with the host's override and
                # back-off), instead of leaving the host blocked until the expiry.
                snap = fr.host_snapshot(res.host)
                fr.restore_host(res.host, restored[1], snap.backoff_level if snap else 0)
            nxt = fr.done(res.host, end, fetch_s, res.status, res.crawl_delay_s, res.retry_after_s)
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
                if res.outcome not in LEASE_WITHOUT_PAGE and not retryable(res):
                    await self.finish_url(fr, part, res.host, res.url, res.url_fp)
                return
            # done() on a host that is not in flight only ever pushes its timer later: a late result can
            # never shorten a back-off or a delay already in force.
            nxt = fr.done(res.host, end, fetch_s, res.status, res.crawl_delay_s, res.retry_after_s)
        snap = fr.host_snapshot(res.host)
        level = snap.backoff_level if snap else 0
        if res.crawl_delay_s is not None:
            self.set_params(fr, res.host, res.crawl_delay_s)
        await self._settle(fr, part, res, nxt, level, now)
        await self.settle_host(fr, part, res.host)

    async def _settle(self, fr: Frontier, part: int, res: FetchResult, nxt: float, level: int, now: float) -> None:
        """Write the host's timer and finish, retry or re-queue the URL."""
        meta = self.meta.get(res.url)
        attempts = (meta.attempts if meta else 0) + 1
        retry = retryable(res) and attempts < MAX_ATTEMPTS
        if res.outcome not in LEASE_WITHOUT_PAGE and not retry:
            # The URL is done: the host's timer (which also clears the lease in host_state) and the finish in
            # one unlogged batch. Its writes are idempotent but it is not atomic, and either part alone is
            # repaired by the replayed result. Politeness alone leaves no lease in host_state: the replay
            # is a result without a lease and finishes the URL. The finish alone leaves the lease: a
            # rebuilt frontier keeps the host blocked until it expires and the replay (same lease id)
            # writes both again. A failed request fails the message; its retry writes both again.
            self.cancel_copy(fr, part, res.url)
            await self.state.host_politeness_and_finish(res.host, nxt, level, res.fetch_s * 1000.0,
                                                        res.crawl_delay_s, part, meta.priority if meta else None,
                                                        res.url_fp, self.clock())
            self.forget_url(fr, part, res.url)
            return
        # The URL goes back to the queue in memory before the write, not after it: done() above has freed
        # the host, so should the write fail, a tick may lease the host's next URL before the loop retries
        # this result, and the retry, finding that lease live, is stale and returns. A URL put back only
        # after the write was then in neither memory nor flight, its durable row behind the window's read
        # point, and its host left the index with it still queued (an engine-restart e2e run lost a host's
        # /p/1.html whose probe answer came back while Cassandra restarted).
        if res.outcome in LEASE_WITHOUT_PAGE:
            # Only robots.txt (or the soft-404 probe) was requested under this lease: the page goes back.
            fr.add(res.url, res.host, 0, 0.0, res.kind, enqueued_at=now)
            if meta is None:
                self.meta[res.url] = UrlMeta(res.url_fp, res.depth, part, redirect_chain=tuple(res.redirect_chain))
        else:
            RETRIED.inc()
            fr.add(res.url, res.host, 0, 0.0, res.kind, enqueued_at=now)
            self.meta[res.url] = UrlMeta(res.url_fp, res.depth, part, attempts, meta.priority if meta else None,
                                         tuple(res.redirect_chain))
        # (also clears the lease in host_state)
        await self.state.host_put_politeness(res.host, nxt, level, res.fetch_s * 1000.0, res.crawl_delay_s)

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
        await self.hold(fr, res.host, res.url if leased else None, end, fetch_s)
        if leased and fr.add(res.url, res.host, 0, 0.0, res.kind, enqueued_at=end) and res.url not in self.meta:
            self.meta[res.url] = UrlMeta(res.url_fp, res.depth, part, redirect_chain=tuple(res.redirect_chain))

    async def hold(self, fr: Frontier, host: str, leased_url: str | None, end: float, fetch_s: float) -> None:
        """A request to ``host`` whose outcome is unknown may have run for ``fetch_s`` until ``end``: the
        leased URL (if any) goes back to its place, the host waits the 10x delay of such a fetch, and the
        timer is written (which also ends the lease in host_state). The 10x rule counts the host's last
        known fetch time, not ``fetch_s``, when that is shorter (`interrupted_delay_basis`)."""
        try:
            hs = await self.state.host_get(host)  # a rare path: its last known fetch time is read when needed
        except BaseException:
            # The result's lease is over already (ended in memory): the loop's retry of this result takes the
            # path of a lease-less one, which moves only the timer. So the URL goes back now, with the host
            # held for the whole fetch_s (the longer basis: the host's last fetch time is not known), or
            # the host stayed in flight with no lease to expire, its URL never fetched.
            if leased_url is not None:
                fr.release(host, leased_url, end, fetch_s=fetch_s)
            raise
        last = hs.last_fetch_ms / 1000.0 if hs is not None and hs.last_fetch_ms is not None else None
        fetch_s = interrupted_delay_basis(fetch_s, last)
        if leased_url is not None:
            fr.release(host, leased_url, end, fetch_s=fetch_s)
        nxt = fr.hold(host, end, fetch_s)  # after a release a no-op that returns the timer it set
        snap = fr.host_snapshot(host)
        await self.state.host_put_politeness(host, nxt, snap.backoff_level if snap else 0, fetch_s * 1000.0,
                                             self.crawl_delays.get(host))

    async def finish_url(self, fr: Frontier, part: int, host: str, url: str, url_fp: int) -> None:
        """The URL is done for this cycle: drop its durable row and mark it done in url_state."""
        meta = self.meta.get(url)
        self.cancel_copy(fr, part, url)
        await self.state.queue_finish(part, host, meta.priority if meta else None, url_fp, self.clock())
        self.forget_url(fr, part, url)

    def cancel_copy(self, fr: Frontier, part: int, url: str) -> None:
        """Before the finish is written: a queued copy of the URL (a rebuild's, beside a restored lease) is
        skipped at dispatch from now on. Not after the write: the host may be ready already (a late result
        of a fetch whose delay is over), and a tick running during the write leased the copy again (10
        repeats of 924 in a scale e2e run, right after a scale-out). Should the write fail, the result's
        retry finishes the URL (its message is not committed): the copy was not to be fetched either way."""
        if fr.is_known(url):
            self.cancelled[url] = part

    def forget_url(self, fr: Frontier, part: int, url: str) -> None:
        """Once the finish is written: a queued copy (from a rebuild or a replayed discovery) is skipped
        at dispatch."""
        self.meta.pop(url, None)
        if fr.is_known(url):
            self.cancelled[url] = part
