"""Sitemaps (sitemaps.org protocol 0.9): recognise and parse ``<urlset>`` and ``<sitemapindex>`` files,
RSS 2.0 and Atom feeds (the protocol accepts both as sitemaps: each item's link, dated by ``<pubDate>`` or
``<updated>``) and plain-text sitemaps (one URL per line), plain or gzip, within the protocol's limits:
50,000 URLs and 50 MB (uncompressed) per file.

XML is read with lxml's pull parser in recover mode (a malformed file yields the entries before the
damage). A text file is a sitemap only when its first lines are all absolute http(s) URLs (up to
``TEXT_PROBE_LINES``), so an ordinary text page is not mistaken for one; later lines that are no URL are
dropped and mark the file malformed.

Entries must be on the sitemap's own host (the protocol's rule for a sitemap found at a URL; robots.txt
may point at sitemaps on other hosts, whose entries are then on that host); others are dropped.
``lastmod`` (W3C datetime: a date, or a date and time with a zone; RFC 822 in RSS) becomes epoch seconds.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from urllib.parse import urljoin, urlsplit

from lxml import etree

MAX_URLS = 50_000
MAX_BYTES = 50 * 1024 * 1024
#: The protocol's bound on a URL's length (text sitemaps; longer lines are dropped).
MAX_URL_CHARS = 2048
#: A text body is a sitemap only if this many of its first non-blank lines (or all, if fewer) are URLs.
TEXT_PROBE_LINES = 100
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_XML_TYPES = ("application/xml", "text/xml", "application/gzip", "application/x-gzip", "application/rss+xml",
              "application/atom+xml")
_SUFFIXES = (".xml", ".xml.gz", ".txt", ".txt.gz", ".rss", ".atom")
_ATOM_NS = "http://www.w3.org/2005/Atom"
_ROOTS = {"urlset": "urlset", "sitemapindex": "index", "rss": "feed", "feed": "feed"}


class SitemapError(ValueError):
    """Not a sitemap we can read (too large once decompressed, corrupt gzip)."""


@dataclass(frozen=True)
class Sitemap:
    kind: str  # "urlset" | "index" | "feed" (RSS 2.0 or Atom) | "text"
    urls: list[str] = field(default_factory=list)
    lastmods: list[float | None] = field(default_factory=list)
    truncated: bool = False  # more than MAX_URLS entries: the rest is ignored
    malformed: bool = False  # broken XML (what came before the damage is kept), or text lines no URL
    dropped: int = 0  # entries off the sitemap's host, or without a usable URL


def may_be_sitemap(url: str, content_type: str | None) -> bool:
    """Worth a parse attempt: an XML, feed, gzip or plain-text media type, or a path that ends like a
    sitemap's (.xml, .txt, .rss, .atom, optionally .gz)."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    path = urlsplit(url).path.lower()
    return mime in _XML_TYPES or mime == "text/plain" or path.endswith(_SUFFIXES)


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


# RFC 822 / 2822 dates (email.utils parses them too, but imports socket, which the pure core must not).
_RFC822 = re.compile(r"^\s*(?:[A-Za-z]{3},\s*)?(\d{1,2})\s+([A-Za-z]{3})\s+(\d{2,4})\s+(\d{1,2}):(\d{2})(?::(\d{2}))?"
                     r"\s*([A-Za-z]{1,5}|[+-]\d{4})?\s*$")
_MONTHS = {m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                       "dec"), 1)}
_ZONES = {"ut": 0, "utc": 0, "gmt": 0, "z": 0, "est": -5, "edt": -4, "cst": -6, "cdt": -5, "mst": -7, "mdt": -6,
          "pst": -8, "pdt": -7}


def parse_feed_date(text: str | None) -> float | None:
    """An RSS ``<pubDate>`` (RFC 822, e.g. ``Thu, 15 Jan 2026 08:00:00 GMT``), or a W3C datetime as Atom
    and many RSS feeds write it."""
    if not text:
        return None
    m = _RFC822.match(text)
    if m is None:
        return parse_lastmod(text)
    day, mon, year, hh, mm, ss, zone = m.groups()
    month = _MONTHS.get(mon.lower())
    if month is None:
        return None
    y = int(year)
    y += (2000 if y < 50 else 1900) if y < 100 else 0  # RFC 2822's reading of two-digit years
    z = (zone or "gmt").lower()
    if z[0] in "+-":
        offset = timedelta(hours=int(z[1:3]), minutes=int(z[3:5])) * (-1 if z[0] == "-" else 1)
    else:
        offset = timedelta(hours=_ZONES.get(z, 0))  # unknown (military) zones read as UTC, as RFC 2822 allows
    try:
        when = datetime(y, month, int(day), int(hh), int(mm), int(ss or 0), tzinfo=timezone(offset))
    except ValueError:
        return None
    return when.timestamp()


def _local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _ns(tag: object) -> str:
    return tag[1:].split("}", 1)[0] if isinstance(tag, str) and tag.startswith("{") else ""


def _absolute(url: str) -> bool:
    return url.startswith(("http://", "https://")) and bool(urlsplit(url).hostname)


class _Entries:
    """Entries kept so far, under the limits and the same-host rule."""

    def __init__(self, sitemap_url: str, max_urls: int) -> None:
        self.own_host = (urlsplit(sitemap_url).hostname or "").lower()
        self.max_urls = max_urls
        self.urls: list[str] = []
        self.lastmods: list[float | None] = []
        self.dropped = 0
        self.truncated = False

    def add(self, loc: str | None, lastmod: float | None) -> None:
        if len(self.urls) >= self.max_urls:
            self.truncated = True
        elif loc and _absolute(loc) and (urlsplit(loc).hostname or "").lower() == self.own_host:
            self.urls.append(loc)
            self.lastmods.append(lastmod)
        else:
            self.dropped += 1


def parse_sitemap(body: bytes, sitemap_url: str, max_urls: int = MAX_URLS,
                  max_bytes: int = MAX_BYTES) -> Sitemap | None:
    """The sitemap in ``body`` (plain or gzip; XML or text), or None when it is no sitemap (another root
    element, a text whose first lines are not URLs, or nothing parseable)."""
    data = decompress(body, max_bytes)
    head = data[len(_BOM):] if data.startswith(_BOM) else data
    if head.lstrip()[:1] != b"<":
        return _parse_text(head, sitemap_url, max_urls)
    return _parse_xml(data, sitemap_url, max_urls)


def _parse_text(data: bytes, sitemap_url: str, max_urls: int) -> Sitemap | None:
    entries = _Entries(sitemap_url, max_urls)
    text = data.decode("utf-8", errors="replace")
    seen = 0
    bad = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        seen += 1
        ok = _absolute(line) and len(line) <= MAX_URL_CHARS and not any(c.isspace() or c == "\ufffd" for c in line)
        if not ok:
            if seen <= TEXT_PROBE_LINES:
                return None  # an ordinary text document, not a list of URLs
            bad += 1
            continue
        entries.add(line, None)
        if entries.truncated:
            break
    if not seen:
        return None
    return Sitemap("text", entries.urls, entries.lastmods, entries.truncated, bad > 0, entries.dropped + bad)


def _parse_xml(data: bytes, sitemap_url: str, max_urls: int) -> Sitemap | None:
    parser = etree.XMLPullParser(events=("start", "end"), recover=True, resolve_entities=False, no_network=True,
                                 huge_tree=False)
    kind: str | None = None
    atom = False
    entries = _Entries(sitemap_url, max_urls)
    loc: str | None = None
    lastmod: str | None = None
    in_item = False  # inside a feed's <item> / <entry> (the channel's own <link> is no entry)
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
                    if name not in _ROOTS:
                        return None
                    kind, atom = _ROOTS[name], name == "feed"
                elif kind == "feed" and name in ("item", "entry"):
                    in_item, loc, lastmod = True, None, None
                elif atom and in_item and name == "link" and loc is None and _ns(el.tag) == _ATOM_NS \
                        and el.get("rel", "alternate") == "alternate" and el.get("href"):
                    loc = urljoin(sitemap_url, el.get("href", "").strip())
                continue
            if name in ("urlset", "sitemapindex", "rss", "feed") and el.getparent() is None:
                closed = True
            elif kind == "feed":
                if not in_item:
                    pass
                elif name == "link" and not atom and not _ns(el.tag) and loc is None:
                    loc = (el.text or "").strip()
                elif name in ("pubDate", "updated") or (name == "published" and lastmod is None):
                    lastmod = el.text
                elif name in ("item", "entry"):
                    entries.add(loc, parse_feed_date(lastmod))
                    in_item, loc, lastmod = False, None, None
                    el.clear()
            elif name == "loc":
                loc = (el.text or "").strip()
            elif name == "lastmod":
                lastmod = el.text
            elif name in ("url", "sitemap"):
                entries.add(loc, parse_lastmod(lastmod))
                loc = lastmod = None
                el.clear()
        if entries.truncated:
            break
    try:
        parser.close()
        malformed = not closed or bool(parser.error_log)
    except etree.XMLSyntaxError:
        malformed = True
    if kind is None:
        return None
    return Sitemap(kind, entries.urls, entries.lastmods, entries.truncated, malformed, entries.dropped)
