"""What dedup hands the WARC writer (the archive topic): one ArchiveRecord per fetch with an HTTP
exchange, saying whether it is a response or a revisit of an earlier capture, and carrying the
page_fetched message the writer publishes once the record is in a WARC file.

- new or changed page: response, with the page to publish;
- unchanged page (same body as the URL's last fetch) and 304 Not Modified: revisit of the URL's last
  capture; an exact duplicate of another URL's body: revisit of that URL;
- near duplicate, redirect, HTTP error, soft 404: response (no page; redirects, errors and soft 404s
  have no stored body).
"""

from __future__ import annotations

from streamcrawl_contracts.messages import (
    ArchiveRecord,
    FetchResult,
    HttpExchange,
    PageFetched,
    ParsedPage,
    RevisitOf,
)
from streamcrawl_contracts.topics import ARCHIVE
from streamcrawl_runtime.ports.loop import Output


def archive_page(page: ParsedPage, exchange: HttpExchange, *, publish: PageFetched | None = None,
                 revisit_of: RevisitOf | None = None) -> Output:
    """The archive record of a parsed page (keyed by exchange id: see topics.ARCHIVE)."""
    return Output(ARCHIVE, exchange.id, ArchiveRecord(
        url=page.url, host=page.host, url_fp=page.url_fp, fetched_at=page.fetched_at.timestamp(),
        fetch_s=page.fetch_s, outcome="fetched", status=page.http_status, exchange=exchange,
        content_hash=page.content_hash, storage_key=page.storage_key, truncated=page.truncated,
        out_links=page.out_links, revisit_of=revisit_of, page=publish))


def archive_result(res: FetchResult, prev_hash: str | None, prev_fetched_at: float | None) -> Output | None:
    """The archive record of a fetch that produced no parsed page (304, redirect, error, soft 404)."""
    if res.exchange is None:
        return None
    revisit = None
    content_hash = None
    if res.outcome == "not_modified" and prev_hash is not None:
        revisit, content_hash = RevisitOf(url=res.url, fetched_at=prev_fetched_at), prev_hash
    return Output(ARCHIVE, res.exchange.id, ArchiveRecord(
        url=res.url, host=res.host, url_fp=res.url_fp, fetched_at=res.started_at, fetch_s=res.fetch_s,
        outcome=res.outcome, status=res.status, exchange=res.exchange, content_hash=content_hash,
        out_links=[res.redirect_to] if res.redirect_to else [], revisit_of=revisit))
