"""FetchResult (outcome "fetched") → ParsedPage: read the body from the blob store, parse, fingerprint.

The body comes from the result itself when the fetcher carried it (`body_gz`, the blob's stored form,
decoded exactly as the blob store decodes it), else from the blob store. A body that does not decode
fails the same way from either source (not transient: dead-lettered by the run loop); a corrupt inline
body is not retried from S3.

Non-HTML bodies (PDF, images, text/plain…) still produce a ParsedPage, with no links, title or SimHash,
so that dedup records the fetch and its content hash. Every other outcome is ignored (no output).

The SimHash (the near-duplicate signature, streamcrawl_core.textsig) is taken over the page's main
content: `main_text` (the wired extractor, trafilatura: extract.py) removes navigation, sidebars and
footers first, and a page with too little distinct text gets none. Without an extractor (some unit tests)
the visible text stands in.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from prometheus_client import Counter, Histogram
from streamcrawl_contracts.messages import ARCHIVE_INLINE_MAX_BYTES, Envelope, FetchResult, ParsedPage
from streamcrawl_contracts.topics import PARSED
from streamcrawl_core.textsig import near_duplicate_signature
from streamcrawl_runtime.ports.blobs import BlobStore, decode_page
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record, StatelessHandler

from streamcrawl_parser.parse import ParseOutcome, is_html, parse_html
from streamcrawl_parser.sitemap_pages import may_be_sitemap, sitemap_of, sitemap_pages

log = logging.getLogger("streamcrawl.parser")

#: Bodies (as carried: gzip inline, else decoded from S3) up to this size are parsed on the event loop.
INLINE_PARSE_MAX_BYTES = 16 * 1024

PAGES = Counter("streamcrawl_parser_pages", "Fetch results seen by the parser", ["result"])
LINKS = Counter("streamcrawl_parser_links", "Out-links emitted")
LINKS_DROPPED = Counter("streamcrawl_parser_links_dropped", "Links not emitted, by reason", ["reason"])
PARSE_SECONDS = Histogram("streamcrawl_parser_parse_seconds", "Parse time per page",
                          buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5))
BODY_BYTES = Counter("streamcrawl_parser_body_bytes", "Body bytes parsed")
BODY_SOURCE = Counter("streamcrawl_parser_body_source",
                      "Where parsed bodies came from: inline (in the FetchResult) or s3", ["source"])


#: Decoded HTML → its main content as plain text (boilerplate removed).
MainText = Callable[[str], str]


def build_page(result: FetchResult, body: bytes, max_links: int = 1000, simhash_max_chars: int = 2_000_000,
               main_text: MainText | None = None) -> tuple[ParsedPage, ParseOutcome]:
    """The ParsedPage for a fetched body, and the parse details for metrics (pure; CPU-bound: run it in a
    worker thread)."""
    assert result.content_hash is not None and result.storage_key is not None
    html = is_html(result.content_type)
    if html:
        outcome = parse_html(body, result.url, result.content_type, result.x_robots_tag, max_links)
    else:
        outcome = ParseOutcome()
    content = (main_text(outcome.html) if main_text is not None else outcome.text) if html else ""
    fp = near_duplicate_signature(content[:simhash_max_chars])  # None: too little text to compare
    fetched_at = datetime.fromtimestamp(result.started_at, UTC)
    # unavailable_after honoured: once the date has passed (at the fetch) the page is not indexed.
    expired = outcome.unavailable_after is not None and outcome.unavailable_after <= fetched_at
    return ParsedPage(
        url=result.url, host=result.host, url_fp=result.url_fp, depth=result.depth, kind=result.kind,
        fetched_at=fetched_at, http_status=result.status or 200,
        content_type=result.content_type, content_hash=result.content_hash, storage_key=result.storage_key,
        simhash=fp, title=outcome.title, canonical_url=outcome.canonical_url, out_links=outcome.out_links,
        noindex=outcome.noindex or expired, nofollow=outcome.nofollow, charset=outcome.charset if html else None,
        unavailable_after=outcome.unavailable_after,
        text_length=len(outcome.text), etag=result.etag, last_modified=result.last_modified,
        exchange=result.exchange, fetch_s=result.fetch_s, truncated=result.truncated,
        wire_hash=result.wire_hash, wire_key=result.wire_key, wire_body=result.wire_body,
        # The WARC writer then skips its S3 read of the body (small bodies only; see the contract).
        body_gz=result.body_gz if (result.body_gz is not None and not _coded(result)
                                   and len(result.body_gz) <= ARCHIVE_INLINE_MAX_BYTES) else None,
    ), outcome


def _coded(result: FetchResult) -> bool:
    """The body came content-coded: the WARC writer records the wire bytes, not the stored page."""
    return result.wire_hash is not None and result.wire_hash != result.content_hash


class ParserHandler(StatelessHandler):
    def __init__(self, blobs: BlobStore, max_links: int = 1000, simhash_max_chars: int = 2_000_000,
                 main_text: MainText | None = None) -> None:
        self.blobs = blobs
        self.max_links = max_links
        self.simhash_max_chars = simhash_max_chars
        self.main_text = main_text

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if not isinstance(message, FetchResult):
            return ()
        if message.outcome != "fetched" or message.storage_key is None or message.content_hash is None:
            PAGES.labels("skipped").inc()
            return ()
        gz, fetched = message.body_gz, b""
        if gz is not None:
            BODY_SOURCE.labels("inline").inc()
        else:
            try:
                # S3 outages surface as TransientError (retried by the loop); a missing object cannot heal.
                fetched = await asyncio.to_thread(self.blobs.get_page, message.storage_key)
            except KeyError as exc:
                raise PoisonMessage(f"body {message.storage_key} not in the blob store") from exc
            BODY_SOURCE.labels("s3").inc()

        def decode_and_build() -> tuple[bytes, ParsedPage, ParseOutcome, float]:
            # An inline body is decoded in the same worker call that parses it: one thread hop per page.
            body = decode_page(gz) if gz is not None else fetched
            t0 = time.perf_counter()
            page, outcome = build_page(message, body, self.max_links, self.simhash_max_chars, self.main_text)
            return body, page, outcome, time.perf_counter() - t0

        if not is_html(message.content_type) and may_be_sitemap(message.url, message.content_type):
            def decode_sitemap() -> list[ParsedPage]:
                sitemap = sitemap_of(message, decode_page(gz) if gz is not None else fetched)
                return sitemap_pages(message, sitemap) if sitemap is not None else []

            parts = await asyncio.to_thread(decode_sitemap)
            if parts:
                PAGES.labels("sitemap").inc()
                LINKS.inc(sum(len(p.out_links) for p in parts))
                return [Output(PARSED, message.host, p) for p in parts]
        # A worker thread costs a hand-off both ways (40 µs of CPU for a no-op here), about what parsing a
        # typical page takes (~60 µs for the synthetic web's ~1 KB pages): small bodies are parsed right here,
        # large ones (which could hold the event loop for milliseconds) in a thread.
        size = len(gz) if gz is not None else len(fetched)
        if size <= INLINE_PARSE_MAX_BYTES:
            body, page, outcome, parse_s = decode_and_build()
        else:
            body, page, outcome, parse_s = await asyncio.to_thread(decode_and_build)
        PARSE_SECONDS.observe(parse_s)
        BODY_BYTES.inc(len(body))
        PAGES.labels("html" if is_html(message.content_type) else "non_html").inc()
        LINKS.inc(len(page.out_links))
        for reason, n in outcome.links_dropped.items():
            LINKS_DROPPED.labels(reason).inc(n)
        if outcome.links_capped:
            LINKS_DROPPED.labels("cap").inc(outcome.links_capped)
        log.debug("parsed", extra={"url": page.url, "links": len(page.out_links), "noindex": page.noindex})
        return [Output(PARSED, message.host, page)]
