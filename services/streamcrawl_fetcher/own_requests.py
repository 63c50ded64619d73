"""The fetcher's own requests, made under a page's lease instead of the page: the soft-404 probe, and a page
held back because it looked like a "not found" page on a host not probed yet; plus the archive records of
those and of robots.txt. A mixin of FetcherHandler (handler.py), which decides when each is due."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from prometheus_client import Counter
from streamcrawl_contracts.messages import FetchRequest, FetchResult
from streamcrawl_core.politeness import parse_retry_after
from streamcrawl_core.traps import soft404_echoes, soft404_signature
from streamcrawl_core.urls import UrlError, host_of
from streamcrawl_runtime.ports.blobs import BlobStore
from streamcrawl_runtime.ports.loop import Output

from streamcrawl_fetcher.archive import archive_exchange
from streamcrawl_fetcher.classify import body_text, is_text, store_wire
from streamcrawl_fetcher.exchanges import ExchangeLog
from streamcrawl_fetcher.ports import AddressNotAllowed, DnsError, Http, HttpResponse, NetworkError
from streamcrawl_fetcher.robots_cache import NO_SOFT404, RobotsCache

if TYPE_CHECKING:
    from streamcrawl_fetcher.handler import FetchPolicy

log = logging.getLogger("streamcrawl.fetcher")

#: The host's answer is not known (no page has looked like a soft 404 yet, or the page is the home page).
NO_SOFT404_YET = "not-probed"

OWN_BODY_STORE_FAILURES = Counter("streamcrawl_fetcher_archive_body_store_failures",
                                  "robots.txt or probe bodies that could not be stored (archived without them)")
SOFT404_SUSPECTS = Counter("streamcrawl_fetcher_soft404_suspects",
                           "Pages that looked like a \"not found\" page on a host not probed yet (held back, "
                           "the host probed first)")
SOFT404_PROBES = Counter("streamcrawl_fetcher_soft404_probes",
                         "Soft-404 probe answers: signature, none (no soft 404s) or disallowed (not probed)",
                         ["answer"])


class OwnRequests:
    http: Http
    robots: RobotsCache
    blobs: BlobStore
    policy: FetchPolicy
    clock: Callable[[], float]
    exchanges: ExchangeLog

    async def _archive_own(self, url: str, sent_at: float, resp: HttpResponse, outcome: str,
                           with_body: bool) -> list[Output]:
        """The archive record of a robots.txt or probe request, its body stored first when `with_body`.
        A failed store archives it without the body: raising would make the loop retry the lease, whose
        request (robots.txt, or the probe) has been made and whose answer is kept already, so the retry
        would send a second request under one lease."""
        stored = None
        wire: tuple[str, str | None, bytes | None] | None = None
        if with_body:
            try:
                stored = await self.blobs.astore_page(resp.body)
                wire = await store_wire(self.blobs, resp, stored.content_hash, inline=True)
            except Exception as exc:
                stored = None
                OWN_BODY_STORE_FAILURES.inc()
                log.warning("archived without its body", extra={"url": url, "error": repr(exc)[:300]})
        try:
            host = host_of(url)
        except UrlError:
            return []
        archived = archive_exchange(url, host, sent_at, resp, outcome, stored, wire)
        return [archived] if archived is not None else []

    async def _probe_disallowed(self, host: str) -> str:
        """robots.txt forbids the probe path: the host has no signature (until its next robots.txt)."""
        SOFT404_PROBES.labels("disallowed").inc()
        await self.robots.put_soft404(host, NO_SOFT404)
        return NO_SOFT404

    async def _suspect(self, req: FetchRequest, resp: HttpResponse, sent_at: float, fetch_s: float,
                       ended: float, delay: float | None, result: Callable[..., FetchResult],
                       archive: list[Output] | None) -> FetchResult:
        """A page that looks like a "not found" page on a host not probed yet: not stored, parsed or
        published; the host's next lease goes to the probe and the page is fetched again after it (the
        frontier re-queues it as for probe_fetched), to be judged against the probe's signature."""
        self.robots.want_probe(req.host)
        SOFT404_SUSPECTS.inc()
        if archive is not None and self.policy.warc:
            archive.extend(await self._archive_own(req.url, sent_at, resp, "soft404_suspect", True))
        return result("soft404_suspect", status=resp.status, fetch_s=fetch_s, crawl_delay_s=delay, ended_at=ended,
                      error="looks like a \"not found\" page: the host is probed first, the page fetched again")

    async def _probe(self, req: FetchRequest, probe_url: str, probe_path: str, delay: float | None,
                     result: Callable[..., FetchResult], archive: list[Output] | None = None) -> FetchResult:
        """Request the nonsense path and store the host's answer; the result is probe_fetched."""
        sent_at = self.clock()
        t0 = time.perf_counter()
        try:
            resp = await self.http.get(probe_url, self.policy.max_body_bytes)
        except (DnsError, AddressNotAllowed, NetworkError, UrlError) as exc:
            # No answer: count the host as "none" rather than spend every later lease on probes. The
            # missing status makes the frontier back off as for any network error.
            fetch_s, ended = time.perf_counter() - t0, self.clock()
            self.exchanges.ended(req.lease_id, fetch_s, ended)
            SOFT404_PROBES.labels("none").inc()
            await self.robots.put_soft404(req.host, NO_SOFT404)
            return result("probe_fetched", error=f"soft-404 probe: {exc}"[:300], crawl_delay_s=delay,
                          fetch_s=fetch_s, ended_at=ended)
        # ended_at: the exchange's end, before the answer's writes to S3 and host_state below
        fetch_s, ended = time.perf_counter() - t0, self.clock()
        self.exchanges.ended(req.lease_id, fetch_s, ended)
        if archive is not None and self.policy.warc:
            archive.extend(await self._archive_own(probe_url, sent_at, resp, "soft404_probe",
                                                   200 <= resp.status <= 299))
        content_type = resp.headers.get("content-type")
        answer = NO_SOFT404
        if resp.status == 200 and is_text(content_type):
            signature = await asyncio.to_thread(soft404_signature, body_text(resp.body, content_type),
                                                soft404_echoes(probe_path))
            answer = f"{signature:016x}"
        SOFT404_PROBES.labels("none" if answer == NO_SOFT404 else "signature").inc()
        await self.robots.put_soft404(req.host, answer)
        log.info("soft-404 probe", extra={"host": req.host, "status": resp.status,
                                          "soft404": answer != NO_SOFT404})
        retry_after = None
        if resp.status in (429, 503):
            retry_after = parse_retry_after(resp.headers.get("retry-after"), self.clock())
        return result("probe_fetched", status=resp.status, fetch_s=fetch_s, crawl_delay_s=delay,
                      retry_after_s=retry_after, ended_at=ended)
