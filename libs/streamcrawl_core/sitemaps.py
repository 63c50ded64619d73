"""Sitemaps (sitemaps.org protocol 0.9): recognise and parse ``<urlset>`` and ``<sitemapindex>`` files,
plain or gzip, with lxml's pull parser in recover mode (a malformed file yields the entries before the
damage), within the protocol's limits: 50,000 URLs and 50 MB (uncompressed) per file.

Entries must be on the sitemap's own host (the protocol's rule for a sitemap found at a URL; robots.txt
may point at sitemaps on other hosts, whose entries are then on that host); others are dropped.
``lastmod`` (W3C datetime: a date, or a date and time with a zone) becomes epoch seconds.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlsplit

from lxml import etree

MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
_GZIP_MAGIC = b"\x1f\x8b"
_XML_TYPES = ("application/xml", "text/xml", "application/gzip", "application/x-gzip", "application/rss+xml")


class SitemapError(ValueError):
    """Not a sitemap we can read (too large once decompressed, corrupt gzip)."""


@dataclass(frozen=True)
class Sitemap:
    kind: str  # "urlset" | "index"
    urls: list[str] = field(default_factory=list)
    lastmods: list[float | None] = field(default_factory=list)
    truncated: bool = False  # more than MAX_URLS entries: the rest is ignored
    malformed: bool = False  # the XML was broken: what came before the damage is kept
    dropped: int = 0  # entries off the sitemap's host, or without a usable <loc>


def may_be_sitemap(url: str, content_type: str | None) -> bool:
    """Worth a parse attempt: an XML or gzip media type, or a path that ends like a sitemap's."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    path = urlsplit(url).path.lower()
    return mime in _XML_TYPES or path.endswith((".xml", ".xml.gz"))


def decompress(body: bytes, max_bytes: int = MAX_BYTES) -> bytes:
    """The body, gunzipped when it is gzip (a .xml.gz file), at most ``max_bytes`` of it."""
    if not body.startswith(_GZIP_MAGIC):
        if len(body) > max_bytes:
            raise SitemapError(f"sitemap over {max_bytes} bytes")
        return body
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise SitemapError(f"corrupt gzip: {exc}") from exc
    if len(out) > max_bytes:
        raise SitemapError(f"sitemap over {max_bytes} bytes uncompressed")
    return out


def parse_lastmod(text: str | None) -> float | None:
    if not text:
        return None
    value = text.strip()
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def parse_sitemap(body: bytes, sitemap_url: str, max_urls: int = MAX_URLS,
                  max_bytes: int = MAX_BYTES) -> Sitemap | None:
    """The sitemap in ``body`` (plain or gzip), or None when it is no sitemap (another root element, or
    nothing parseable)."""
    data = decompress(body, max_bytes)
    parser = etree.XMLPullParser(events=("start", "end"), recover=True, resolve_entities=False, no_network=True,
                                 huge_tree=False)
    kind: str | None = None
    own_host = (urlsplit(sitemap_url).hostname or "").lower()
    urls: list[str] = []
    lastmods: list[float | None] = []
    dropped = 0
    truncated = False
    loc: str | None = None
    lastmod: str | None = None
    closed = False
    chunk = 1 << 16
    for i in range(0, max(len(data), 1), chunk):
        try:
            parser.feed(data[i:i + chunk])
        except etree.XMLSyntaxError:
            break
        for event, el in parser.read_events():
            name = _local(el.tag)
            if event == "start":
                if kind is None:
                    if name not in ("urlset", "sitemapindex"):
                        return None
                    kind = "urlset" if name == "urlset" else "index"
                continue
            if name in ("urlset", "sitemapindex"):
                closed = True
            elif name == "loc":
                loc = (el.text or "").strip()
            elif name == "lastmod":
                lastmod = el.text
            elif name in ("url", "sitemap"):
                if len(urls) >= max_urls:
                    truncated = True
                elif loc and (urlsplit(loc).hostname or "").lower() == own_host and loc.startswith(("http://",
                                                                                                     "https://")):
                    urls.append(loc)
                    lastmods.append(parse_lastmod(lastmod))
                else:
                    dropped += 1
                loc = lastmod = None
                el.clear()
        if truncated:
            break
    try:
        parser.close()
        malformed = not closed or bool(parser.error_log)
    except etree.XMLSyntaxError:
        malformed = True
    if kind is None:
        return None
    return Sitemap(kind, urls, lastmods, truncated, malformed, dropped)
