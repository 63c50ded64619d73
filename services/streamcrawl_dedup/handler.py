"""The dedup run-loop handler.

- url_candidates (keyed by the target host): trap rules, per-host budgets and the blocklist, then the
  seen-set; a new URL is recorded in url_state and sent to the frontier.
- parsed (keyed by the page's host): exact duplicates by SHA-256 (content_index, first claimer wins) and
  near duplicates by SimHash (Hamming distance <= 3, via the 4×16-bit block index). A duplicate becomes
  an alias of its canonical URL and its links are not followed. A new or changed page is published on
  page_fetched and its out-links become candidates for their own hosts' partitions.
- fetch_results: redirects (each target is a URL of its own, back through normalization and dedup) and
  the url_state status of pages that produced no parsed record (a soft 404 is status "soft404": never
  published, its links not followed).
"""

from __future__ import annotations

import fnmatch
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from prometheus_client import Counter
from streamcrawl_contracts.messages import (
    Envelope,
    FetchResult,
    PageFetched,
    ParsedPage,
    UrlCandidates,
    UrlMessage,
)
from streamcrawl_contracts.topics import HOST_PARTITIONS, PAGE_FETCHED, URL_CANDIDATES, URLS
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.partition import host_key
from streamcrawl_core.simhash import from_signed64, hamming
from streamcrawl_core.traps import HostBudget, QueryParamTracker, TrapConfig, check_url
from streamcrawl_core.urls import UrlError, host_of, normalize
from streamcrawl_runtime.crawl_state import CrawlState, UrlState
from streamcrawl_runtime.errors import PoisonMessage
from streamcrawl_runtime.kafka_loop import Output, Record

from streamcrawl_dedup.seen import SeenSet

log = logging.getLogger("streamcrawl.dedup")

URL_DECISIONS = Counter("streamcrawl_dedup_urls_total", "Candidate URL decisions", ["decision"])
PAGES = Counter("streamcrawl_dedup_pages_total", "Parsed page decisions", ["decision"])


class DedupHandler:
    def __init__(self, state: CrawlState, seen: SeenSet, traps: TrapConfig, *, simhash_distance: int = 3,
                 snapshot_interval_s: float = 30.0, partitions: int = HOST_PARTITIONS,
                 cycle_s: float = 86400.0) -> None:
        self.state = state
        self.seen = seen
        self.traps = traps
        self.budget = HostBudget(traps)
        self.params = QueryParamTracker(traps)
        self.simhash_distance = simhash_distance
        self.snapshot_interval_s = snapshot_interval_s
        self.partitions = partitions
        self.cycle_s = cycle_s  # the per-host page budget renews every cycle
        self.cycle = 0
        self.blocklist: list[str] = []
        self._last_snapshot = time.monotonic()
        self._blocklist_at = 0.0

    async def on_assign(self, partitions: list[int]) -> None:
        for part in partitions:
            await self.seen.restore(part)

    async def on_revoke(self, partitions: list[int]) -> None:
        for part in partitions:
            await self.seen.drop(part)

    async def tick(self, now: float) -> Sequence[Output]:
        if time.monotonic() - self._last_snapshot >= self.snapshot_interval_s:
            self._last_snapshot = time.monotonic()
            await self.seen.snapshot_dirty()
        if now - self._blocklist_at >= 10.0:  # the control plane edits it; pick changes up quickly
            self._blocklist_at = now
            self.set_blocklist(await self.state.blocklist_patterns())
            for host, row in (await self.state.host_overrides()).items():
                if row.page_budget is not None:  # an agreed page budget per cycle for this host
                    self.budget.set_budget(host, row.page_budget)
        return []

    async def close(self) -> None:
        await self.seen.snapshot_dirty()

    def set_blocklist(self, patterns: list[str]) -> None:
        self.blocklist = [p.lower() for p in patterns]

    def _blocked(self, host: str) -> bool:
        for pat in self.blocklist:
            if pat.startswith(".") and (host.endswith(pat) or host == pat[1:]):
                return True
            if host == pat or fnmatch.fnmatchcase(host, pat):
                return True
        return False

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if isinstance(message, UrlCandidates):
            return await self._candidates(record, message)
        if isinstance(message, ParsedPage):
            return await self._parsed(message)
        if isinstance(message, FetchResult):
            return await self._fetch_result(message)
        raise PoisonMessage(f"unexpected message type {type(message).__name__}")

    # ------------------------------------------------------------------ URLs

    async def _candidates(self, record: Record, batch: UrlCandidates) -> Sequence[Output]:
        host = batch.host
        if self._blocked(host):
            URL_DECISIONS.labels("blocked").inc(len(batch.urls))
            return []
        priority = 0 if batch.source_url.startswith("seed:") else min(9, 1 + batch.depth)
        out: list[Output] = []
        for url, url_fp in zip(batch.urls, batch.url_fps, strict=True):
            reason = check_url(url, batch.depth, self.traps) or self.params.observe(host, url)
            if reason is not None:
                URL_DECISIONS.labels(f"trap_{reason}").inc()
                continue
            verdict = await self.seen.check_and_add(record.partition, host, url_fp, batch.event_id)
            if verdict == "seen":
                URL_DECISIONS.labels("seen").inc()
                continue
            if verdict == "new":
                cycle = int(time.time() // self.cycle_s)
                if cycle != self.cycle:
                    self.cycle = cycle
                    self.budget.forget_before(cycle)
                if not self.budget.try_consume(host, self.cycle):
                    URL_DECISIONS.labels("over_budget").inc()
                    continue
                await self.state.url_insert_discovered(host, url_fp, url, batch.depth, time.time(),
                                                       batch.event_id)
            URL_DECISIONS.labels(verdict).inc()
            out.append(Output(URLS, host, UrlMessage(url=url, host=host, url_fp=url_fp, depth=batch.depth,
                                                     priority=priority, kind="discovery",
                                                     via=batch.source_url, replayed=verdict == "replay")))
        return out

    def _links_out(self, urls: list[str], depth: int, source: str) -> list[Output]:
        """Normalize links and group them by target host: one UrlCandidates message per host."""
        by_host: dict[str, dict[str, int]] = {}  # host → {url: fingerprint}, in link order
        for url in urls:
            try:
                url = normalize(url)
                host = host_key(host_of(url))
            except UrlError:
                URL_DECISIONS.labels("malformed").inc()
                continue
            group = by_host.setdefault(host, {})
            if url not in group:
                group[url] = url_fingerprint(url)
        return [Output(URL_CANDIDATES, host, UrlCandidates(host=host, depth=depth, source_url=source,
                                                           urls=list(group), url_fps=list(group.values())))
                for host, group in by_host.items()]

    # ------------------------------------------------------------------ pages

    async def _parsed(self, page: ParsedPage) -> Sequence[Output]:
        now = time.time()
        prev = await self.state.url_get(page.host, page.url_fp)
        fetched_at = page.fetched_at.timestamp()
        if (prev is not None and prev.fetched_at is not None and abs(prev.fetched_at - fetched_at) < 0.002
                and prev.content_hash == page.content_hash):
            # A replay of the same fetch (at-least-once): repeat the first decision instead of reading our
            # own write as "unchanged", or a crash between the state write and the publish loses the page.
            if prev.status == "duplicate":
                return []
            PAGES.labels("replayed").inc()
            return self._publish(page, changed=prev.fetch_count > 1)
        changed = prev is None or prev.content_hash != page.content_hash
        fetch_count = (prev.fetch_count if prev else 0) + 1
        if not changed and prev is not None and prev.status == "duplicate":
            # Same body as last time and it was an alias then: it stays one (a near duplicate still owns
            # its own hash in content_index, so the claim below would wrongly make it canonical).
            prev.fetched_at, prev.fetch_count = fetched_at, fetch_count
            await self.state.url_put_fetch(prev)
            PAGES.labels("duplicate").inc()
            return []
        canonical = await self.state.content_claim(page.content_hash, page.url, page.storage_key, now)
        duplicate_of: str | None = canonical if canonical != page.url else None
        if duplicate_of is None and page.simhash is not None and changed:
            duplicate_of = await self._near_duplicate(page)
        st = UrlState(page.host, page.url_fp, page.url, page.depth, "duplicate" if duplicate_of else "fetched",
                      page.http_status, page.content_type, page.content_hash, page.simhash, page.storage_key,
                      page.etag, page.last_modified, fetched_at, fetch_count, canonical_url=duplicate_of)
        await self.state.url_put_fetch(st)
        if duplicate_of is not None:
            PAGES.labels("duplicate").inc()
            return []
        if not changed:
            PAGES.labels("unchanged").inc()
            return []
        PAGES.labels("new" if prev is None or prev.content_hash is None else "changed").inc()
        return self._publish(page, changed=prev is not None and prev.content_hash is not None)

    def _publish(self, page: ParsedPage, changed: bool) -> list[Output]:
        links = [] if page.nofollow else page.out_links
        out: list[Output] = [Output(PAGE_FETCHED, page.host, PageFetched(
            url=page.url, canonical_url=page.canonical_url or page.url, fetched_at=page.fetched_at,
            http_status=page.http_status, content_type=page.content_type, content_hash=page.content_hash,
            simhash=page.simhash, storage_key=page.storage_key, out_links=links, title=page.title,
            changed=changed))]
        out.extend(self._links_out(links, page.depth + 1, page.url))
        return out

    async def _near_duplicate(self, page: ParsedPage) -> str | None:
        assert page.simhash is not None
        fp = from_signed64(page.simhash)
        for other_fp, other_url in await self.state.simhash_candidates(page.simhash):
            if other_url != page.url and hamming(fp, from_signed64(other_fp)) <= self.simhash_distance:
                return other_url
        await self.state.simhash_add(page.simhash, page.url)
        return None

    async def _fetch_result(self, res: FetchResult) -> Sequence[Output]:
        if res.outcome in ("fetched", "robots_fetched", "probe_fetched", "lease_expired"):
            return []  # fetched pages are handled from the parsed topic; the others fetched no page
        prev = await self.state.url_get(res.host, res.url_fp)
        status = {"not_modified": "fetched", "redirect": "redirected", "robots_disallowed": "disallowed",
                  "robots_unavailable": "disallowed", "soft_404": "soft404"}.get(res.outcome, "error")
        st = prev or UrlState(res.host, res.url_fp, res.url, res.depth)
        st.status = status
        st.http_status = res.status
        st.fetched_at = datetime.now(UTC).timestamp()
        st.fetch_count = (prev.fetch_count if prev else 0) + 1
        await self.state.url_put_fetch(st)
        if res.outcome == "redirect" and res.redirect_to:
            return self._links_out([res.redirect_to], res.depth, res.url)
        return []
