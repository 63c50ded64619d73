"""FetchRequest → FetchResult: lease check, DNS, robots, soft-404 probe, conditional GET; what the page's
answer becomes (304, redirect, soft 404, body to the blob store, HTTP error) is streamcrawl_fetcher.classify.

Outcomes that need no page request: lease_expired, dns_error, blocked_address (the SSRF guard refused the
address the name resolved to: no connection is opened, the URL is not retried), robots_unavailable,
robots_disallowed and robots_fetched (robots.txt was not cached, so this lease was spent fetching it; the
frontier re-queues).
With `status` on robots_* results = the robots.txt status when it was fetched for this request.

Soft 404s: a host is probed with a nonsense path (`/streamcrawl-probe-<16 random hex>.html`) only once one
of its pages looks like a "not found" page (streamcrawl_core.traps.looks_soft404: the title, a heading or
the text after the first heading says so), so most hosts, which answer unknown paths with a real 404, never
spend a politeness slot on it. Until then pages are fetched and published as they come (the home page `/`,
a site's own content, is never looked at). A page that looks like one is held back: outcome
soft404_suspect, nothing stored, parsed or published (its response is archived), and the host's next lease
goes to the probe: one lease, one request, outcome probe_fetched (`status` = the probe's status); the
frontier re-queues the page both times. A 200 text answer is stored as the host's signature
(streamcrawl_core.traps.soft404_signature, request path echoes removed); anything else (404, other status,
non-text, no answer) as "none", so the host is not probed again until its robots.txt is re-fetched. No
probe when robots.txt disallows the probe path (the host counts as "none") nor when robots.txt is
unavailable (no page is requested then either). Afterwards each 200 text page of a host with a signature
is signed the same way; a match is outcome soft_404, and its body is not stored. The cost of probing late:
a soft-404 template that says nothing like "not found" (in the ~15 languages looks_soft404 knows) is not
caught, nor are the soft 404s of a host published before one of its pages looked like one. With the
policy's soft404_probe = "always" every host is probed before any page but its home page instead.

Crash safety: right before each request to a host (robots.txt, probe or page) the fetcher writes the
lease it is spent under and the time (host_state.started_lease), and after the exchange the lease it
finished (fetched_lease). A request replayed after a crash (at-least-once) is then one of: finished
(skipped: no request, no output), superseded (lease_expired), started but not finished (interrupted: the
request was under way at the crash and its outcome is lost; no new request, the frontier holds the host
for the politeness delay of a fetch that lasted until now), or never started (fetched normally).

The URL's status in url_state for an outcome that leaves nothing to parse (an error, a redirect, a 304, a
disallowed URL, a soft 404) is written here, in the same request as the fetched mark, and a redirect's
target goes out as a candidate URL of its own host (url_candidates): no other service reads fetch results
for those (dedup used to, for every result).

Every request yields exactly one FetchResult keyed by host, whatever happens on the network; only an
unavailable engine (S3, Cassandra) raises, as TransientError, so the run loop retries the request
instead of reporting a fetch failure that was not the site's fault.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from prometheus_client import Counter, Histogram
from streamcrawl_contracts.messages import Envelope, FetchRequest, FetchResult
from streamcrawl_contracts.topics import FETCH_RESULTS
from streamcrawl_core.lease import Replay, interrupted_fetch_s, may_send, must_confirm, replay_check
from streamcrawl_core.redirects import MAX_REDIRECT_HOPS
from streamcrawl_core.traps import soft404_probe_path
from streamcrawl_core.urls import UrlError, host_of, origin_of
from streamcrawl_runtime.ports.blobs import BlobStore
from streamcrawl_runtime.ports.loop import Output, Record, StatelessHandler
from streamcrawl_runtime.ports.state import FetcherState, FetchOutcome, LeaseMarks

from streamcrawl_fetcher.archive import archive_result, sitemap_candidates
from streamcrawl_fetcher.classify import classify, looks_suspect
from streamcrawl_fetcher.exchanges import ExchangeLog
from streamcrawl_fetcher.outcomes import (
    conditional_headers,
    dns_failure,
    kept_status,
    redirect_candidate,
    shown_url,
    url_status,
)
from streamcrawl_fetcher.own_requests import NO_SOFT404_YET, OwnRequests
from streamcrawl_fetcher.ports import AddressNotAllowed, DnsError, Http, NetworkError
from streamcrawl_fetcher.robots_cache import NO_SOFT404, RobotsCache, RobotsHops
from streamcrawl_fetcher.settings import DEFAULT_INLINE_BODY_MAX_BYTES

log = logging.getLogger("streamcrawl.fetcher")


REPLAYS_SKIPPED = Counter("streamcrawl_fetcher_replays_skipped",
                          "Replayed requests whose lease this fetcher had already finished (before a crash)")
INTERRUPTED = Counter("streamcrawl_fetcher_interrupted",
                      "Replayed requests whose request to the host was under way when a fetcher stopped")
ROBOTS_REFETCHED = Counter("streamcrawl_fetcher_robots_refetched",
                           "robots.txt rules dropped for a refetch: fetched under a lease a crash interrupted, "
                           "so their archive records were lost")
RESULTS = Counter("streamcrawl_fetcher_results", "Fetch results by outcome", ["outcome"])
STATUS = Counter("streamcrawl_fetcher_http_responses", "HTTP responses by status class", ["status_class"])
FETCH_SECONDS = Histogram("streamcrawl_fetcher_fetch_seconds", "Page request wall time incl. body",
                          buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120))
BODY_BYTES = Counter("streamcrawl_fetcher_body_bytes", "Decoded body bytes downloaded")


@dataclass(frozen=True)
class FetchPolicy:
    max_body_bytes: int = 10 * 1024 * 1024
    inline_body_max_bytes: int = DEFAULT_INLINE_BODY_MAX_BYTES  # stored (gzip) size; 0 = never inline
    robots_max_bytes: int = 500 * 1024
    robots_max_redirects: int = 5
    max_early_s: float = 5.0  # the longest wait for a request's not_before (the frontier uses ~0.3 s)
    max_redirect_hops: int = MAX_REDIRECT_HOPS  # a page's redirect chain, across the pipeline
    # No request starts later than this before its lease expires: the frontier, at the expiry, must find the
    # started mark of any request that went out (then it keeps the host leased while the request may run).
    lease_guard_s: float = 5.0
    warc: bool = True  # archive records of fetches that leave nothing to parse (see archive.py)
    sitemaps: bool = True  # robots.txt's Sitemap: URLs and /sitemap.xml become candidate URLs
    # When a host gets its soft-404 probe: "suspect", once one of its pages looks like a "not found" page
    # (most hosts never pay the probe's politeness slot); "always", before any page but the home page (a
    # slot on every host, and soft-404 templates that say nothing like "not found" are caught too).
    soft404_probe: Literal["suspect", "always"] = "suspect"


# Sitemap: lines of one robots.txt passed on (a hostile file may list thousands).
_MAX_ROBOTS_SITEMAPS = 50


class FetcherHandler(OwnRequests, StatelessHandler):
    def __init__(self, http: Http, robots: RobotsCache, state: FetcherState, blobs: BlobStore,
                 policy: FetchPolicy | None = None, clock: Callable[[], float] = time.time) -> None:
        self.http = http
        self.robots = robots
        self.state = state
        self.blobs = blobs
        self.policy = policy or FetchPolicy()
        self.clock = clock
        self.exchanges = ExchangeLog()  # this process's requests per lease (a retry is not a crash)

    # ------------------------------------------------------------------ Handler protocol

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if not isinstance(message, FetchRequest):
            return ()
        kept = self.exchanges.kept(message.lease_id)  # built by an attempt whose writes failed (a retry)
        if kept is not None:
            result, own = kept
        else:
            lease: LeaseMarks | None = None
            if not record.fresh:
                lease = await self.state.host_lease(message.host)
                if replay_check(message.lease_id, lease) is Replay.FINISHED:
                    # Replayed after this fetcher's crash, but the work under this lease was finished and
                    # its result produced (or about to be: a crash in between leaves the lease to expire,
                    # and the frontier re-queues the URL). Requesting it again would be a second request
                    # the lease does not pay for while the frontier may not have handled the first yet.
                    REPLAYS_SKIPPED.inc()
                    return ()
            own = []  # archive records of this lease's robots.txt or probe request
            result = await self.fetch(message, maybe_replay=not record.fresh, lease=lease, archive=own)
            self.exchanges.keep(message.lease_id, result, own)
        status = url_status(result.outcome)
        # A 304's revisit names the last capture's payload, and a 304 keeps the URL's status (a noindex page
        # stays unpublished, an alias stays one): read before the status write below moves it.
        prev = await self.state.url_get(message.host, message.url_fp) if result.outcome == "not_modified" else None
        if prev is not None:
            status = kept_status(prev.status)
        archived = None
        if self.policy.warc and status is not None and result.exchange is not None:
            archived = archive_result(result, prev.content_hash if prev else None, prev.fetched_at if prev else None,
                                      prev.wire_hash if prev else None)
        if result.outcome != "lease_expired":
            # Durable before the result is produced (the offset is committed only after that); the outcome
            # row (the host view's last outcomes) goes in the same request, and so does the URL's status for
            # an outcome that leaves nothing to parse (the state adapter batches concurrent writes). A replay
            # writes the same again.
            outcome = FetchOutcome(result.ended_at or self.clock(), shown_url(message.url), result.outcome,
                                   result.status, round(result.fetch_s * 1000.0, 3))
            writes = [self.state.host_put_fetched_lease(message.host, message.lease_id, outcome)]
            if status is not None:
                writes.append(self.state.url_put_outcome(message.host, message.url_fp, message.url, message.depth,
                                                         status, result.status, outcome.at))
            await asyncio.gather(*writes)
        self.exchanges.forget(message.lease_id)
        RESULTS.labels(result.outcome).inc()
        log.info("fetched", extra={"url": message.url, "outcome": result.outcome, "status": result.status,
                                   "fetch_s": round(result.fetch_s, 3), "lease": message.lease_id,
                                   "partition": record.partition, "offset": record.offset, "fresh": record.fresh})
        out = [Output(FETCH_RESULTS, message.host, result)]
        if result.outcome == "redirect" and result.redirect_to:
            out.extend(redirect_candidate(result))
        if archived is not None:
            out.append(archived)
        out.extend(own)
        if self.policy.sitemaps and result.outcome in ("robots_fetched", "robots_disallowed") and result.status:
            out.extend(sitemap_candidates(result))
        return out

    # ------------------------------------------------------------------ the fetch

    async def fetch(self, req: FetchRequest, maybe_replay: bool = True, lease: LeaseMarks | None = None,
                    archive: list[Output] | None = None) -> FetchResult:
        """Fetch under ``req``'s lease. ``maybe_replay=False`` (a request produced after this process
        took its partition: no other instance can have fetched it) skips the lease check; ``lease`` is the
        host's lease row if the caller has read it already. The archive records of a robots.txt or probe
        request made under the lease are appended to ``archive`` (when given and WARC output is on)."""
        started = self.clock()

        async def turn() -> str | None:
            # Dispatched ahead of the host's politeness timer (so Kafka's latency is not added to every
            # delay): no request to the host before not_before. Awaited right before the one request
            # this lease pays for, after the lease check, DNS and robots lookups, so none of those
            # delays it. A reason (the caller answers lease_expired): too late in the lease to send it, or
            # the lease was fenced by the frontier's early check.
            wait = req.not_before - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            # Durable before the request goes out: if this process dies while the host serves it, the
            # replayed request knows a request was under way, and since when (see `interrupted`); and the
            # frontier, should the lease expire meanwhile, keeps the host leased while it may still run.
            self.exchanges.begin(req.lease_id)
            await self.state.host_put_started_lease(req.host, req.lease_id, self.clock())
            now = self.clock()
            if not may_send(now, req.lease_expires_at, self.policy.lease_guard_s):
                return "too little of the lease left to send the request"
            if must_confirm(now, req.confirm_after):
                # Late in the lease: the frontier's early check may have fenced it (its request looked stuck)
                # and put the URL back. Read after the started mark: if the fence is not seen here, the
                # frontier's read after its fence sees the mark and keeps the host blocked for this request.
                row = await self.state.host_lease(req.host)
                if row.lease_id != req.lease_id:
                    return "lease superseded (fenced by the frontier's early check before the request)"
            self.exchanges.sent(req.lease_id)
            return None

        def too_late(why: str) -> FetchResult:
            return result("lease_expired", error=why)

        # outcome is one of FetchResult's Literal values (pydantic checks it)
        def result(outcome: Any, **fields: Any) -> FetchResult:
            # ended_at: taken after the exchange, so never earlier than the host's last byte.
            fields.setdefault("ended_at", self.clock())
            fields.setdefault("started_at", started)
            return FetchResult(url=req.url, host=req.host, url_fp=req.url_fp, depth=req.depth, kind=req.kind,
                               lease_id=req.lease_id, outcome=outcome, redirect_chain=req.redirect_chain, **fields)

        if req.lease_expires_at < started:
            # The frontier has already re-queued this URL: fetching now could break politeness.
            return result("lease_expired", error="lease expired before the fetch started")
        if req.not_before - started > self.policy.max_early_s:
            # Far too early (a clock jump, a bogus message): parking the host's key that long would stall
            # it, and sending now would break politeness. No request: the frontier re-queues the URL.
            return result("lease_expired", error=f"dispatched {req.not_before - started:.1f}s ahead of its time")
        if maybe_replay:
            row = lease or await self.state.host_lease(req.host)
            verdict = replay_check(req.lease_id, row)
            if verdict in (Replay.SUPERSEDED, Replay.FINISHED):
                # Fencing: the frontier persists every lease before it sends the request and clears it when
                # the result arrives. A request replayed after a crash (at-least-once) whose lease is no longer
                # the host's current one was already done or superseded; fetching it again could land right
                # next to the current lease's request. Only a record that may be a replay pays this read: one
                # produced after this process took its partition (Record.fresh) was handled nowhere else.
                return result("lease_expired", error="lease superseded (replayed request)")
            # A retry in this process after an engine failed (exchanges.py): nothing was sent (the
            # request goes out now), or the exchange is known (the host waits its real delay from its
            # real end; the page is fetched again later), not an exchange that ran until now.
            known = self.exchanges.get(req.lease_id)
            if verdict is Replay.INTERRUPTED and known is not None and not known.sent:
                verdict = Replay.NOT_STARTED
            if verdict is Replay.INTERRUPTED and known is not None and known.ended_at is not None:
                INTERRUPTED.inc()
                return result("interrupted", started_at=row.started_at, ended_at=known.ended_at,
                              fetch_s=known.fetch_s or 0.0, error="an engine failed after the request")
            if verdict is Replay.INTERRUPTED and row.started_at is not None:
                # A request under this lease was under way when the fetcher that sent it stopped: the host
                # may have served it for as long as until now (and the politeness delay is 10x that), so
                # asking again right away could hit a host that has just been busy with us for a while.
                INTERRUPTED.inc()
                if self.policy.warc and await self.robots.drop_fetched_since(req.host, row.started_at):
                    ROBOTS_REFETCHED.inc()  # its request was robots.txt: archived by the next lease's
                return result("interrupted", started_at=row.started_at, ended_at=started,
                              fetch_s=interrupted_fetch_s(row.started_at, started),
                              error="the fetcher stopped while this request was under way; not repeated now")
        # The URL is normalized already: every URL reaches the frontier through dedup (or the recrawl
        # scheduler, which re-emits what dedup admitted), which normalized it once for the seen-set.
        url = req.url
        try:
            origin = origin_of(url)
        except UrlError as exc:
            return result("http_error", error=f"malformed url: {exc}")
        try:
            # Resolve first: a dead name is a dns_error, not a robots_unavailable.
            await self.http.resolver.resolve(host_of(url))
        except DnsError as exc:
            return dns_failure(result, exc)
        except AddressNotAllowed as exc:
            return result("blocked_address", error=str(exc))

        rules = await self.robots.cached(req.host, started)
        fetched_robots = rules is None
        if rules is None:
            # One lease = one request to the host: this lease is spent on robots.txt, the page waits
            # for its next turn behind the politeness delay (the frontier re-queues on robots_fetched).
            if (why := await turn()) is not None:
                return too_late(why)
            robots_started = self.clock()
            hops: RobotsHops = []
            rules = await self.robots.fetch_rules(req.host, origin, robots_started, hops)
            # The exchange (the last hop's, or the failed attempt's) ends here: the rules' write to
            # host_state below is no part of the host's response time.
            robots_end = self.clock()
            robots_s = robots_end - (hops[-1][1] if hops else robots_started)
            self.exchanges.ended(req.lease_id, robots_s, robots_end)
            await self.robots.persist(req.host, rules)
            if archive is not None and self.policy.warc:
                for n, (hop_url, sent_at, hop) in enumerate(hops):
                    # the body the rules were read from (the last hop's, a 2xx); a redirect has none
                    body_ok = n == len(hops) - 1 and 200 <= hop.status <= 299
                    archive.extend(await self._archive_own(hop_url, sent_at, hop, "robots_txt", body_ok))
        delay = rules.crawl_delay()
        robots_fields: dict[str, Any] = {"crawl_delay_s": delay}
        if fetched_robots:
            robots_fields.update(status=rules.status, fetch_s=robots_s, ended_at=robots_end)
            if rules.kind != "disallow_all":
                # dedup turns them (and /sitemap.xml) into URLs to fetch like any other
                robots_fields["sitemaps"] = list(rules.sitemaps)[:_MAX_ROBOTS_SITEMAPS]
        if rules.kind == "disallow_all":
            return result("robots_unavailable", error="robots.txt unavailable: host not crawled for now",
                          **robots_fields)
        if not rules.allowed(url):
            return result("robots_disallowed", **robots_fields)
        if fetched_robots:
            return result("robots_fetched", **robots_fields)

        soft404 = await self.robots.soft404(req.host)
        suspect_check = False
        parts = urlsplit(url)
        home = parts.path == "/" and not parts.query
        if soft404 is None:
            if self.robots.probe_wanted(req.host) or (self.policy.soft404_probe == "always" and not home):
                probe_path = soft404_probe_path(secrets.token_hex(8))
                if rules.allowed(origin + probe_path):
                    # A page of this host looked like a "not found" page (or every host is probed): like
                    # robots.txt, this lease is spent on the probe, and the page waits for its next turn.
                    if (why := await turn()) is not None:
                        return too_late(why)
                    return await self._probe(req, origin + probe_path, probe_path, delay, result, archive)
                soft404 = await self._probe_disallowed(req.host)
            else:
                # Not probed, and nothing has looked like a "not found" page yet: the page goes now rather
                # than one politeness delay behind a probe (most hosts serve real 404s). Should it look like
                # one, it is held back (soft404_suspect) and the host probed first. A host's home page (`/`)
                # is its own content, never a "not found" answer, and is not looked at.
                soft404 = NO_SOFT404_YET
                suspect_check = not home
        host_signature = None if soft404 in (NO_SOFT404, NO_SOFT404_YET) else int(soft404, 16)

        headers = await conditional_headers(self.state, req)
        if (why := await turn()) is not None:
            return too_late(why)
        sent_at = self.clock()
        t0 = time.perf_counter()
        try:
            resp = await self.http.get(req.url, self.policy.max_body_bytes, headers)
        except DnsError as exc:
            return dns_failure(result, exc, crawl_delay_s=delay)
        except AddressNotAllowed as exc:  # the name moved to a refused address since the check above
            return result("blocked_address", error=str(exc), crawl_delay_s=delay)
        except NetworkError as exc:
            self.exchanges.ended(req.lease_id, time.perf_counter() - t0, self.clock())
            return result("network_error", error=str(exc), crawl_delay_s=delay,
                          fetch_s=time.perf_counter() - t0)
        except UrlError as exc:
            return result("http_error", error=f"malformed url: {exc}", crawl_delay_s=delay)
        fetch_s = time.perf_counter() - t0
        ended = self.clock()
        self.exchanges.ended(req.lease_id, fetch_s, ended)
        FETCH_SECONDS.observe(fetch_s)
        BODY_BYTES.inc(len(resp.body))
        STATUS.labels(f"{resp.status // 100}xx").inc()
        if suspect_check and looks_suspect(resp):
            if rules.allowed(origin + soft404_probe_path(secrets.token_hex(8))):
                return await self._suspect(req, resp, sent_at, fetch_s, ended, delay, result, archive)
            await self._probe_disallowed(req.host)  # no probe to wait for: the page is judged as it is
        return await classify(req, resp, fetch_s, ended, delay, result, blobs=self.blobs,
                              inline_body_max_bytes=self.policy.inline_body_max_bytes,
                              max_redirect_hops=self.policy.max_redirect_hops, clock=self.clock,
                              host_signature=host_signature, keep_wire=self.policy.warc)
