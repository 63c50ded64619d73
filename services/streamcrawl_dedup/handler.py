"""The dedup run-loop handler.

- url_candidates (keyed by the target host): trap rules, per-host budgets and the blocklist, then the
  seen-set; a new URL is recorded in url_state and sent to the frontier.
- Per-host page budgets (URLs admitted per host per crawl cycle) survive restarts and partition moves:
  loaded lazily from host_state and written behind (streamcrawl_dedup.budgets, with the loss bound).
- parsed (keyed by the page's host): a noindex page (meta robots, X-Robots-Tag, a passed unavailable_after)
  is recorded in url_state (status "noindex") and not published; it claims no content hash and enters no
  near-duplicate index (an indexable copy must never become its alias); its links are followed unless
  nofollow. Otherwise exact duplicates by SHA-256 (content_index, first claimer wins) and
  near duplicates by SimHash (Hamming distance <= 3, via the permuted-table index of
  streamcrawl_core.neardup). A duplicate becomes an alias of its canonical URL and its links are not
  followed. A new or changed page is published on page_fetched and its out-links become candidates for
  their own hosts' partitions.
- A sitemap lastmod of a known URL is recorded (url_state.sitemap_lastmod, for the recrawl scheduler's
  change-rate estimator) and, if newer than the URL's last fetch, sends it to the frontier as a refresh.
- Not fetch_results: the fetcher writes the url_state status of fetches that produced no parsed page and
  sends a redirect's target to url_candidates itself (one consumer fewer of every fetch result).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence

from prometheus_client import Counter, Gauge
from streamcrawl_contracts.messages import (
    Envelope,
    PageFetched,
    ParsedPage,
    RevisitOf,
    UrlCandidates,
    UrlMessage,
)
from streamcrawl_contracts.topics import DEFAULT_PARTITIONS, PAGE_FETCHED, URL_CANDIDATES, URLS
from streamcrawl_core.blocklist import Blocklist
from streamcrawl_core.identity import url_identity
from streamcrawl_core.recrawl import LASTMOD_SKEW_S
from streamcrawl_core.simhash import from_signed64, hamming
from streamcrawl_core.traps import QueryParamTracker, TrapConfig, check_url
from streamcrawl_core.urls import UrlError
from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record
from streamcrawl_runtime.ports.state import DedupState, UrlState

from streamcrawl_dedup.archive import archive_page, capture_digest, payload_digest
from streamcrawl_dedup.budgets import PersistedBudgets
from streamcrawl_dedup.seen import SeenSet

log = logging.getLogger("streamcrawl.dedup")

#: How many partitions' Bloom filters an assignment restores at once (each mostly waits on S3 and Kafka).
RESTORE_CONCURRENCY = 8

URL_DECISIONS = Counter("streamcrawl_dedup_urls_total", "Candidate URL decisions", ["decision"])
PAGES = Counter("streamcrawl_dedup_pages_total", "Parsed page decisions", ["decision"])
_URL_DECISION, _PAGE = Children(URL_DECISIONS), Children(PAGES)  # .labels() once per decision
BLOOM_BYTES = Gauge("streamcrawl_dedup_bloom_bytes", "Memory of the owned partitions' seen-set Bloom filters")
BLOOM_URLS = Gauge("streamcrawl_dedup_bloom_urls", "URLs in the owned partitions' seen-set Bloom filters")
BLOOM_FP = Gauge("streamcrawl_dedup_bloom_expected_fp_ratio",
                 "Largest expected false-positive rate of an owned partition's Bloom filter at its fill")


class DedupHandler:
    def __init__(self, state: DedupState, seen: SeenSet, traps: TrapConfig, *, simhash_distance: int = 3,
                 snapshot_interval_s: float = 30.0, partitions: int = DEFAULT_PARTITIONS,
                 cycle_s: float = 86400.0, budget_flush_s: float = 5.0, warc: bool = True) -> None:
        self.state = state
        # Fetches with an HTTP exchange go to the WARC writer, which publishes page_fetched (False: publish here).
        self.warc = warc
        self.seen = seen
        self.traps = traps
        self.params = QueryParamTracker(traps)
        self.simhash_distance = simhash_distance
        self.snapshot_interval_s = snapshot_interval_s
        self.partitions = partitions
        self._owned: set[int] = set()
        self.budgets = PersistedBudgets(state, traps, self._owned, cycle_s=cycle_s, flush_s=budget_flush_s)
        self.blocklist = Blocklist()
        self._last_snapshot = time.monotonic()
        self._blocklist_at = 0.0

    async def on_assign(self, partitions: list[int]) -> None:
        """Restore the gained partitions' Bloom filters, RESTORE_CONCURRENCY at a time: one by one, 64
        partitions took 17 s after a Kafka freeze fenced the dedup (two S3 reads and a replay each, mostly
        waiting), and no record is handled before this returns, so every host waited for its links that
        long (the engine-fault e2e test's worst wait beyond politeness). The first failure cancels the
        rest and is raised as it is (a transient one retries the whole assignment; restores are
        idempotent)."""
        gate = asyncio.Semaphore(RESTORE_CONCURRENCY)

        async def restore(part: int) -> None:
            async with gate:
                await self.seen.restore(part)
            self._owned.add(part)

        tasks = [asyncio.ensure_future(restore(part)) for part in partitions]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        self.report_bloom()

    def report_bloom(self) -> None:
        size, urls, fp = self.seen.stats()
        BLOOM_BYTES.set(size)
        BLOOM_URLS.set(urls)
        BLOOM_FP.set(fp)

    async def on_revoke(self, partitions: list[int]) -> None:
        try:
            await self.budgets.flush(partitions)
        except Exception as exc:  # the new owner reads what was written; the rest is the crash loss bound
            log.warning("budget flush on revoke failed", extra={"error": repr(exc)[:300]})
        for part in partitions:
            self._owned.discard(part)
            self.budgets.forget_partition(part)  # the next owner counts on from host_state
            await self.seen.drop(part)
        self.budgets.drop_dirty(partitions)
        self.report_bloom()

    def tick_due(self, now: float) -> float:
        """The next budget flush (only with dirty counts), seen-set snapshot or blocklist refresh."""
        due = self._blocklist_at + 10.0
        if self.seen.dirty:
            due = min(due, now + self._last_snapshot + self.snapshot_interval_s - time.monotonic())
        return min(due, self.budgets.flush_due())

    async def tick(self, now: float) -> Sequence[Output]:
        await self.budgets.tick(now)
        if time.monotonic() - self._last_snapshot >= self.snapshot_interval_s:
            self._last_snapshot = time.monotonic()
            await self.seen.snapshot_dirty()
            self.report_bloom()
        if now - self._blocklist_at >= 10.0:  # the control plane edits it; pick changes up quickly
            self._blocklist_at = now
            self.set_blocklist(await self.state.blocklist_patterns())
            for host, row in (await self.state.host_overrides()).items():
                if row.page_budget is not None:  # an agreed page budget per cycle for this host
                    self.budgets.counts.set_budget(host, row.page_budget)
        return []

    async def close(self) -> None:
        try:
            await self.budgets.flush()
        finally:
            await self.seen.snapshot_dirty()

    def set_blocklist(self, patterns: list[str]) -> None:
        self.blocklist = Blocklist(patterns)

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if isinstance(message, UrlCandidates):
            return await self._candidates(record, message)
        if isinstance(message, ParsedPage):
            return await self._parsed(message)
        raise PoisonMessage(f"unexpected message type {type(message).__name__}")

    # ------------------------------------------------------------------ URLs

    async def _candidates(self, record: Record, batch: UrlCandidates) -> Sequence[Output]:
        host = batch.host
        if host in self.blocklist:
            _URL_DECISION("blocked").inc(len(batch.urls))
            return []
        if batch.priority is not None:  # the sender's (a guessed /sitemap.xml: last)
            priority = batch.priority
        else:
            priority = 0 if batch.source_url.startswith("seed:") else min(9, 1 + batch.depth)
        out: list[Output] = []
        admitted: list[tuple[int, str]] = []
        lastmods = batch.lastmods if len(batch.lastmods) == len(batch.urls) else [None] * len(batch.urls)
        try:
            await self._decide(record, batch, priority, lastmods, out, admitted)
        except BaseException:
            # The loop retries the message, which admits these URLs again (the exact read finds no row) and
            # counts them again: give their budget back, or every failed attempt (an engine restarting)
            # spends a host's budget on URLs it never admitted, and its last pages read as over budget.
            self.budgets.refund(host, len(admitted))
            raise
        return out

    async def _decide(self, record: Record, batch: UrlCandidates, priority: int, lastmods: Sequence[float | None],
                      out: list[Output], admitted: list[tuple[int, str]]) -> None:
        """`_candidates`' per-URL decisions and the admitted URLs' url_state rows, into ``out`` and
        ``admitted``."""
        host = batch.host
        for url, url_fp, lastmod in zip(batch.urls, batch.url_fps, lastmods, strict=True):
            reason = check_url(url, batch.depth, self.traps) or self.params.observe(host, url)
            if reason is not None:
                _URL_DECISION(f"trap_{reason}").inc()
                continue
            verdict = await self.seen.check_and_add(record.partition, host, url_fp, batch.event_id)
            if verdict == "seen":
                _URL_DECISION("seen").inc()
                if lastmod is not None:  # a sitemap says it changed since our last fetch: refresh it now
                    out.extend(await self._lastmod_refresh(host, url, url_fp, batch.depth, lastmod))
                continue
            if verdict == "new":
                if not await self.budgets.try_consume(record.partition, host, time.time()):
                    _URL_DECISION("over_budget").inc()
                    continue
                admitted.append((url_fp, url))
            _URL_DECISION(verdict).inc()
            out.append(Output(URLS, host, UrlMessage(url=url, host=host, url_fp=url_fp, depth=batch.depth,
                                                     priority=priority, kind="discovery",
                                                     via=batch.source_url, replayed=verdict == "replay",
                                                     redirect_chain=batch.redirect_chain)))
        if log.isEnabledFor(logging.DEBUG):  # per message: what became of each URL (a lost URL's trace)
            log.debug("candidates", extra={"host": host, "event": batch.event_id, "urls": len(batch.urls),
                                           "out": [o.value.url for o in out],  # type: ignore[attr-defined]
                                           "admitted": len(admitted), "partition": record.partition,
                                           "offset": record.offset})
        if admitted:
            # One single-partition batch (url_state is keyed by host, and a message has one target host).
            # If it fails the loop retries the message: the URLs are in the Bloom filter but not yet in
            # the seen-set's memory, so the exact read finds no row and admits them again.
            await self.state.url_insert_discovered_many(host, admitted, batch.depth, time.time(), batch.event_id)
            self.seen.admitted((fp for fp, _ in admitted), batch.event_id)

    async def _lastmod_refresh(self, host: str, url: str, url_fp: int, depth: int, lastmod: float) -> list[Output]:
        """A known URL's sitemap lastmod: recorded for the recrawl estimator (the newest, not from the future),
        and a refresh now if it is newer than the last fetch."""
        st = await self.state.url_get(host, url_fp)
        if (st is not None and math.isfinite(lastmod) and lastmod <= time.time() + LASTMOD_SKEW_S
                and (st.sitemap_lastmod is None or lastmod > st.sitemap_lastmod + 0.001)):
            await self.state.url_put_sitemap_lastmod(host, url_fp, lastmod)
        if st is None or st.fetched_at is None or lastmod <= st.fetched_at or st.status not in ("fetched", "sitemap"):
            return []
        _URL_DECISION("sitemap_lastmod_refresh").inc()
        return [Output(URLS, host, UrlMessage(url=url, host=host, url_fp=url_fp, depth=st.depth, priority=3,
                                              kind="refresh", via="sitemap-lastmod"))]

    def _links_out(self, urls: list[str], depth: int, source: str,
                   lastmods: list[float | None] | None = None) -> list[Output]:
        """Normalize links and group them by target host: one UrlCandidates message per host (with the
        links' sitemap lastmods when given)."""
        by_host: dict[str, dict[str, tuple[int, float | None]]] = {}  # host → {url: (fp, lastmod)}, in order
        dates = lastmods if lastmods is not None and len(lastmods) == len(urls) else [None] * len(urls)
        for raw, lastmod in zip(urls, dates, strict=True):
            try:
                url, host, fp = url_identity(raw)
            except UrlError:
                _URL_DECISION("malformed").inc()
                continue
            by_host.setdefault(host, {}).setdefault(url, (fp, lastmod))
        return [Output(URL_CANDIDATES, host, UrlCandidates(
                    host=host, depth=depth, source_url=source, urls=list(group),
                    url_fps=[fp for fp, _ in group.values()],
                    lastmods=[lm for _, lm in group.values()] if lastmods is not None else []))
                for host, group in by_host.items()]

    # ------------------------------------------------------------------ pages

    async def _parsed(self, page: ParsedPage) -> Sequence[Output]:
        if page.sitemap:
            return await self._sitemap(page)
        now = time.time()
        prev = await self.state.url_get(page.host, page.url_fp)
        fetched_at = page.fetched_at.timestamp()
        replay = (prev is not None and prev.fetched_at is not None and abs(prev.fetched_at - fetched_at) < 0.002
                  and prev.content_hash == page.content_hash)
        if page.noindex:
            return await self._not_indexed(page, prev, replay)
        if replay and prev is not None:
            # A replay of the same fetch (at-least-once): repeat the first decision instead of reading our
            # own write as "unchanged", or a crash between the state write and the publish loses the page.
            if prev.status == "duplicate":
                # The claim is first-claimer-wins, so asking again names the same canonical URL.
                canonical = await self.state.content_claim(page.content_hash, page.url, page.storage_key, now)
                return await self._archive_only(page, canonical if canonical != page.url else None)
            if page.simhash is not None:
                # The first handling's url_state row may have landed without its simhash_index rows (unlogged
                # batches, not atomic: see below) and this path skips the near-duplicate step, so
                # write them again: idempotent, and a page that is no duplicate belongs in the index.
                await self.state.simhash_add(page.simhash, page.url)
            _PAGE("replayed").inc()
            return self._publish(page, changed=prev.fetch_count > 1)
        # A page that was noindex before was never published: indexable now, it is new to the indexers.
        changed = prev is None or prev.content_hash != page.content_hash or prev.status == "noindex"
        fetch_count = (prev.fetch_count if prev else 0) + 1
        if not changed and prev is not None and prev.status == "duplicate":
            # Same body as last time and it was an alias then: it stays one (a near duplicate still owns
            # its own hash in content_index, so the claim below would wrongly make it canonical).
            before = capture_digest(prev, page.content_hash)
            prev.fetched_at, prev.fetch_count, prev.wire_hash = fetched_at, fetch_count, page.wire_hash
            await self.state.url_put_fetch(prev)
            _PAGE("duplicate").inc()
            return await self._archive_only(page, page.url, digest=before)
        canonical = await self.state.content_claim(page.content_hash, page.url, page.storage_key, now)
        duplicate_of: str | None = canonical if canonical != page.url else None
        exact_of = duplicate_of
        index = duplicate_of is None and page.simhash is not None and changed
        if index:
            duplicate_of = await self._near_duplicate(page)
            index = duplicate_of is None
        st = UrlState(page.host, page.url_fp, page.url, page.depth, "duplicate" if duplicate_of else "fetched",
                      page.http_status, page.content_type, page.content_hash, page.simhash, page.storage_key,
                      page.etag, page.last_modified, fetched_at, fetch_count, canonical_url=duplicate_of,
                      wire_hash=page.wire_hash)
        if index:
            # A new canonical page: its simhash_index rows and url_state row in unlogged batches (idempotent
            # upserts). If the request fails the loop retries the message. If only part of it landed: without
            # the url_state row the retry takes this path again; with it, the retry is a replay (above),
            # which rewrites the simhash rows.
            await self.state.url_put_fetch_and_simhash(st)
        else:
            await self.state.url_put_fetch(st)
        if duplicate_of is not None:
            _PAGE("duplicate").inc()
            return await self._archive_only(page, exact_of)
        if not changed:
            _PAGE("unchanged").inc()
            assert prev is not None
            return await self._archive_only(page, page.url, prev.fetched_at, capture_digest(prev, page.content_hash))
        _PAGE("new" if prev is None or prev.content_hash is None else "changed").inc()
        return self._publish(page, changed=prev is not None and prev.content_hash is not None)

    async def _not_indexed(self, page: ParsedPage, prev: UrlState | None, replay: bool) -> list[Output]:
        """A noindex page: recorded and archived (a response record: the fetch happened), not published, no
        duplicate claims; links followed unless nofollow. A replay writes the same row again and re-sends the
        same links (the seen-set drops repeats)."""
        fetch_count = (prev.fetch_count if prev else 0) + (0 if replay else 1)
        await self.state.url_put_fetch(UrlState(
            page.host, page.url_fp, page.url, page.depth, "noindex", page.http_status, page.content_type,
            page.content_hash, page.simhash, page.storage_key, page.etag, page.last_modified,
            page.fetched_at.timestamp(), max(fetch_count, 1), wire_hash=page.wire_hash))
        _PAGE("noindex").inc()
        links = [] if page.nofollow else self._links_out(page.out_links, page.depth + 1, page.url)
        return [*await self._archive_only(page, None), *links]

    def _publish(self, page: ParsedPage, changed: bool) -> list[Output]:
        links = [] if page.nofollow else page.out_links
        published = PageFetched(
            url=page.url, canonical_url=page.canonical_url or page.url, fetched_at=page.fetched_at,
            http_status=page.http_status, content_type=page.content_type, content_hash=page.content_hash,
            simhash=page.simhash, storage_key=page.storage_key, out_links=links, title=page.title,
            changed=changed, unavailable_after=page.unavailable_after)
        if self.warc and page.exchange is not None:  # the writer publishes it once its record is in S3
            out = [archive_page(page, page.exchange, publish=published)]
        else:
            out = [Output(PAGE_FETCHED, page.host, published)]
        out.extend(self._links_out(links, page.depth + 1, page.url))
        return out

    async def _archive_only(self, page: ParsedPage, revisit_url: str | None, revisit_date: float | None = None,
                            digest: str | None = None) -> list[Output]:
        """The archive record of a page that is not published: a revisit of ``revisit_url``'s capture
        (same body) when that capture's payload digest (``digest``; for another URL, read from its row)
        is this page's, else a response (also for a near duplicate: ``revisit_url`` None)."""
        if not self.warc or page.exchange is None:
            return []
        revisit = None
        if revisit_url:
            if revisit_url != page.url:
                digest = capture_digest(await self._row_of(revisit_url), page.content_hash)
            if digest is not None and digest == payload_digest(page):
                revisit = RevisitOf(url=revisit_url, fetched_at=revisit_date)
            else:  # same body, other bytes on the wire (or not known): a response record of its own
                _PAGE("archived_not_revisit").inc()
        return [archive_page(page, page.exchange, revisit_of=revisit)]

    async def _row_of(self, url: str) -> UrlState | None:
        try:
            _url, host, fp = url_identity(url)
        except UrlError:
            return None
        return await self.state.url_get(host, fp)

    async def _sitemap(self, page: ParsedPage) -> list[Output]:
        """A sitemap's entries (or child sitemaps) are candidates at the next depth, with their lastmods; the
        sitemap itself is recorded (part 0) and archived, never published. Replays only repeat idempotent
        writes and candidates the seen-set already knows."""
        out = self._links_out(page.out_links, page.depth + 1, page.url, page.lastmods)
        if page.sitemap_part != 0:
            return out
        prev = await self.state.url_get(page.host, page.url_fp)
        st = UrlState(page.host, page.url_fp, page.url, page.depth, "sitemap", page.http_status, page.content_type,
                      page.content_hash, None, page.storage_key, page.etag, page.last_modified,
                      page.fetched_at.timestamp(), (prev.fetch_count if prev else 0) + 1, wire_hash=page.wire_hash)
        await self.state.url_put_fetch(st)
        _PAGE("sitemap").inc()
        return [*await self._archive_only(page, None), *out]

    async def _near_duplicate(self, page: ParsedPage) -> str | None:
        """The URL of an indexed page within simhash_distance bits of this one, if any (a read only: the
        caller indexes a page that has none)."""
        assert page.simhash is not None
        fp = from_signed64(page.simhash)
        # The candidates are a superset (one IN read over block numbers × block values also returns e.g. a
        # page whose block 0 equals this page's block 1): only the Hamming distance below makes a duplicate.
        for other_fp, other_url in await self.state.simhash_candidates(page.simhash):
            if other_url != page.url and hamming(fp, from_signed64(other_fp)) <= self.simhash_distance:
                return other_url
        return None
