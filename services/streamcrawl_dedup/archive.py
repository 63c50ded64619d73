"""What dedup hands the WARC writer (the archive topic) for a parsed page: one ArchiveRecord saying
whether it is a response or a revisit of an earlier capture, and carrying the page_fetched message the
writer publishes once the record is in a WARC file (fetches that leave nothing to parse are archived by
the fetcher: streamcrawl_fetcher.archive).

- new or changed page: response, with the page to publish;
- unchanged page (same body as the URL's last fetch): revisit of the URL's last capture; an exact
  duplicate of another URL's body: revisit of that URL;
- near duplicate, sitemap: response (no page).

A revisit (identical-payload-digest) names the payload digest of the capture it points at, and that is
the body as transferred (Content-Encoding kept): the same decoded body served once with gzip and once
without is two payloads. So an unchanged or duplicate body is a revisit only when the earlier capture's
wire digest (url_state.wire_hash, else its content hash) equals this fetch's; otherwise it is a response
record of its own (still not published).
"""

from __future__ import annotations

from streamcrawl_contracts.messages import (
    ArchiveRecord,
    HttpExchange,
    PageFetched,
    ParsedPage,
    RevisitOf,
)
from streamcrawl_contracts.topics import ARCHIVE
from streamcrawl_runtime.ports.loop import Output
from streamcrawl_runtime.ports.state import UrlState


def payload_digest(page: ParsedPage) -> str:
    """The hex SHA-256 the page's response record would carry as its payload digest: over the wire body,
    or the decoded one from a fetcher that did not say (recorded decoded then)."""
    return page.wire_hash or page.content_hash


def capture_digest(st: UrlState | None, content_hash: str) -> str | None:
    """The payload digest of the last capture recorded in ``st`` if that capture holds this body (by
    content hash), else None (no row, or another body since)."""
    if st is None or st.content_hash != content_hash:
        return None
    return st.wire_hash or st.content_hash


def archive_page(page: ParsedPage, exchange: HttpExchange, *, publish: PageFetched | None = None,
                 revisit_of: RevisitOf | None = None) -> Output:
    """The archive record of a parsed page (keyed by exchange id: see topics.ARCHIVE). A revisit is only
    asked for when the capture it names has this page's payload digest (see the module doc)."""
    return Output(ARCHIVE, exchange.id, ArchiveRecord(
        url=page.url, host=page.host, url_fp=page.url_fp, fetched_at=page.fetched_at.timestamp(),
        fetch_s=page.fetch_s, outcome="fetched", status=page.http_status, exchange=exchange,
        content_hash=page.content_hash, storage_key=page.storage_key, truncated=page.truncated,
        out_links=page.out_links, revisit_of=revisit_of, page=publish,
        wire_hash=page.wire_hash, wire_key=page.wire_key if revisit_of is None else None,
        body_gz=page.body_gz if revisit_of is None else None,
        wire_body=page.wire_body if revisit_of is None else None))
