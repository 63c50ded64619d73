"""What dedup hands the WARC writer (the archive topic) for a parsed page: one ArchiveRecord saying
whether it is a response or a revisit of an earlier capture, and carrying the page_fetched message the
writer publishes once the record is in a WARC file (fetches that leave nothing to parse are archived by
the fetcher: streamcrawl_fetcher.archive).

- new or changed page: response, with the page to publish;
- unchanged page (same body as the URL's last fetch): revisit of the URL's last capture; an exact
  duplicate of another URL's body: revisit of that URL;
- near duplicate, sitemap: response (no page).
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


def archive_page(page: ParsedPage, exchange: HttpExchange, *, publish: PageFetched | None = None,
                 revisit_of: RevisitOf | None = None) -> Output:
    """The archive record of a parsed page (keyed by exchange id: see topics.ARCHIVE)."""
    return Output(ARCHIVE, exchange.id, ArchiveRecord(
        url=page.url, host=page.host, url_fp=page.url_fp, fetched_at=page.fetched_at.timestamp(),
        fetch_s=page.fetch_s, outcome="fetched", status=page.http_status, exchange=exchange,
        content_hash=page.content_hash, storage_key=page.storage_key, truncated=page.truncated,
        out_links=page.out_links, revisit_of=revisit_of, page=publish))
