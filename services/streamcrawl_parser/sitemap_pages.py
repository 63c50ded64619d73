"""A fetched sitemap as ParsedPage messages for dedup: its entries (or, for an index, its child sitemaps)
as out-links with their lastmods, in parts of at most `part_urls` entries so that no message nears
Kafka's 1 MB limit (a sitemap may list 50,000 URLs)."""

from __future__ import annotations

from datetime import UTC, datetime

from streamcrawl_contracts.messages import FetchResult, ParsedPage
from streamcrawl_core.sitemaps import Sitemap, SitemapError, may_be_sitemap, parse_sitemap

__all__ = ["PART_URLS", "may_be_sitemap", "sitemap_of", "sitemap_pages"]

#: ~5,000 URLs of ~100 bytes plus their lastmods: about 0.6 MB of JSON per part.
PART_URLS = 5_000


def sitemap_of(result: FetchResult, body: bytes) -> Sitemap | None:
    """The sitemap a fetched body is, or None (not XML, another document, unreadable)."""
    if not may_be_sitemap(result.url, result.content_type):
        return None
    try:
        return parse_sitemap(body, result.url)
    except SitemapError:
        return None


def sitemap_pages(result: FetchResult, sitemap: Sitemap, part_urls: int | None = None) -> list[ParsedPage]:
    assert result.content_hash is not None and result.storage_key is not None
    part_urls = part_urls or PART_URLS
    parts = [(sitemap.urls[i:i + part_urls], sitemap.lastmods[i:i + part_urls])
             for i in range(0, len(sitemap.urls), part_urls)] or [([], [])]
    fetched_at = datetime.fromtimestamp(result.started_at, UTC)
    return [ParsedPage(url=result.url, host=result.host, url_fp=result.url_fp, depth=result.depth, kind=result.kind,
                       fetched_at=fetched_at, http_status=result.status or 200, content_type=result.content_type,
                       content_hash=result.content_hash, storage_key=result.storage_key, out_links=urls,
                       lastmods=lastmods, sitemap=True, sitemap_part=n, noindex=True, etag=result.etag,
                       last_modified=result.last_modified, exchange=result.exchange if n == 0 else None,
                       fetch_s=result.fetch_s, truncated=result.truncated, wire_hash=result.wire_hash,
                       wire_key=result.wire_key, wire_body=result.wire_body if n == 0 else None)
            for n, (urls, lastmods) in enumerate(parts)]
