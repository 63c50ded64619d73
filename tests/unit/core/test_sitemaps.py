"""Sitemap parsing: urlset and index, gzip, lastmod, the limits, malformed XML, foreign hosts."""

from __future__ import annotations

import gzip

import pytest
from streamcrawl_core.sitemaps import (
    MAX_URLS,
    TEXT_PROBE_LINES,
    SitemapError,
    decompress,
    may_be_sitemap,
    parse_feed_date,
    parse_lastmod,
    parse_sitemap,
)

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
SM = "http://a.test/sitemap.xml"


def urlset(*entries: str) -> bytes:
    items = "".join(f"<url><loc>{e}</loc><lastmod>2024-05-01</lastmod></url>" for e in entries)
    return f'<?xml version="1.0"?><urlset {NS}>{items}</urlset>'.encode()


def test_urlset_with_lastmods() -> None:
    sm = parse_sitemap(urlset("http://a.test/1", "http://a.test/2"), SM)
    assert sm is not None and sm.kind == "urlset" and sm.urls == ["http://a.test/1", "http://a.test/2"]
    assert sm.lastmods == [parse_lastmod("2024-05-01")] * 2 and not sm.malformed and not sm.truncated


def test_index_and_gzip() -> None:
    body = f'<sitemapindex {NS}><sitemap><loc>http://a.test/s1.xml.gz</loc></sitemap></sitemapindex>'.encode()
    sm = parse_sitemap(gzip.compress(body), "http://a.test/sitemap_index.xml")
    assert sm is not None and sm.kind == "index" and sm.urls == ["http://a.test/s1.xml.gz"] and sm.lastmods == [None]


def test_entries_on_other_hosts_are_dropped() -> None:
    sm = parse_sitemap(urlset("http://a.test/1", "http://evil.test/x", "ftp://a.test/f"), SM)
    assert sm is not None and sm.urls == ["http://a.test/1"] and sm.dropped == 2


def test_malformed_xml_keeps_what_came_before_the_damage() -> None:
    body = urlset("http://a.test/1", "http://a.test/2")[:-10] + b"<url><loc>http://a.test/3</lo"
    sm = parse_sitemap(body, SM)
    assert sm is not None and sm.malformed and sm.urls[:2] == ["http://a.test/1", "http://a.test/2"]


def test_not_a_sitemap() -> None:
    assert parse_sitemap(b"<html><body>hi</body></html>", SM) is None
    assert parse_sitemap(b"\x00\x01 not xml at all", SM) is None
    assert parse_sitemap(b"<catalog><book/></catalog>", SM) is None
    # a text page is no sitemap unless its first lines are all URLs
    assert parse_sitemap(b"Hello.\nhttp://a.test/1\n", "http://a.test/notes.txt") is None
    assert parse_sitemap(b"   \n", "http://a.test/empty.txt") is None


def test_url_limit_truncates() -> None:
    sm = parse_sitemap(urlset(*(f"http://a.test/{i}" for i in range(MAX_URLS + 5))), SM)
    assert sm is not None and len(sm.urls) == MAX_URLS and sm.truncated


def test_size_limit_counts_the_uncompressed_bytes() -> None:
    bomb = gzip.compress(b"<urlset>" + b" " * 2_000_000 + b"</urlset>")
    assert len(bomb) < 10_000
    with pytest.raises(SitemapError):
        decompress(bomb, max_bytes=1_000_000)
    with pytest.raises(SitemapError):
        decompress(b"\x1f\x8b garbage", max_bytes=1000)


def test_lastmod_forms() -> None:
    assert parse_lastmod("2024-05-01T10:00:00Z") == parse_lastmod("2024-05-01T12:00:00+02:00")
    assert parse_lastmod("yesterday") is None and parse_lastmod(None) is None


def test_may_be_sitemap() -> None:
    assert may_be_sitemap("http://a.test/x", "application/xml; charset=utf-8")
    assert may_be_sitemap("http://a.test/sitemap.xml.gz", "application/octet-stream")
    assert not may_be_sitemap("http://a.test/page", "text/html")
    assert may_be_sitemap("http://a.test/sitemap.txt", None) and may_be_sitemap("http://a.test/s", "text/plain")
    assert may_be_sitemap("http://a.test/feed", "application/atom+xml")
    assert may_be_sitemap("http://a.test/feed.rss", "application/octet-stream")


# --- plain text: one URL per line (sitemaps.org "Text file") ---------------------------------------------

def test_text_sitemap_one_url_per_line() -> None:
    body = "\ufeffhttp://a.test/1\r\n\n  http://a.test/2  \nhttp://evil.test/3\nhttps://a.test/4\n".encode()
    sm = parse_sitemap(body, "http://a.test/sitemap.txt")
    assert sm is not None and sm.kind == "text" and not sm.malformed
    assert sm.urls == ["http://a.test/1", "http://a.test/2", "https://a.test/4"] and sm.lastmods == [None] * 3
    assert sm.dropped == 1
    gz = parse_sitemap(gzip.compress(body), "http://a.test/sitemap.txt.gz")
    assert gz is not None and gz.urls == sm.urls


def test_text_sitemap_limits_and_bad_lines() -> None:
    lines = [f"http://a.test/{i}" for i in range(MAX_URLS + 5)]
    sm = parse_sitemap("\n".join(lines).encode(), "http://a.test/s.txt")
    assert sm is not None and len(sm.urls) == MAX_URLS and sm.truncated
    # past the probe lines, a line that is no URL (or too long, or not UTF-8) is dropped and marks the file
    ok = [f"http://a.test/{i}" for i in range(TEXT_PROBE_LINES)]
    body = "\n".join([*ok, "not a url", "http://a.test/" + "x" * 2100, "http://a.test/last"]).encode()
    sm = parse_sitemap(body + b"\nhttp://a.test/\xff\n", "http://a.test/s.txt")
    assert sm is not None and sm.malformed and sm.urls == [*ok, "http://a.test/last"] and sm.dropped == 3
    with pytest.raises(SitemapError):
        parse_sitemap(gzip.compress(b"http://a.test/1\n" * 100_000), "http://a.test/s.txt.gz", max_bytes=1_000_000)


# --- RSS 2.0 and Atom feeds (sitemaps.org "Syndication feed") ---------------------------------------------

RSS = b"""<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>
<title>t</title><link>http://a.test/</link><atom:link href="http://a.test/feed.rss" rel="self"/>
<image><url>http://a.test/logo.png</url><link>http://a.test/</link></image>
<item><title>1</title><link>http://a.test/p1</link><pubDate>Wed, 15 Jan 2026 08:00:00 GMT</pubDate></item>
<item><title>2</title><atom:link href="http://a.test/nope"/><link> http://a.test/p2 </link></item>
<item><title>3</title><link>http://elsewhere.test/p3</link></item>
<item><title>no link</title><description>x</description></item>
</channel></rss>"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>t</title><link href="http://a.test/"/>
<updated>2026-01-20T00:00:00Z</updated>
<entry><title>1</title><link rel="self" href="http://a.test/e1.atom"/><link href="http://a.test/e1"/>
  <published>2025-12-01T00:00:00Z</published><updated>2026-01-15T08:00:00Z</updated></entry>
<entry><title>2</title><link rel="alternate" href="/e2"/><published>2026-01-15T08:00:00+00:00</published></entry>
</feed>"""


def test_rss_items_are_entries_dated_by_pubdate() -> None:
    sm = parse_sitemap(RSS, "http://a.test/feed.rss")
    assert sm is not None and sm.kind == "feed" and not sm.malformed
    assert sm.urls == ["http://a.test/p1", "http://a.test/p2"] and sm.dropped == 2
    assert sm.lastmods == [parse_lastmod("2026-01-15T08:00:00Z"), None]


def test_atom_entries_take_the_alternate_link_and_updated() -> None:
    sm = parse_sitemap(gzip.compress(ATOM), "http://a.test/atom.xml")
    assert sm is not None and sm.kind == "feed" and not sm.malformed
    assert sm.urls == ["http://a.test/e1", "http://a.test/e2"]  # a relative href is read against the feed
    assert sm.lastmods == [parse_lastmod("2026-01-15T08:00:00Z")] * 2


def test_feed_limits_and_damage() -> None:
    items = "".join(f"<item><link>http://a.test/{i}</link></item>" for i in range(MAX_URLS + 3))
    sm = parse_sitemap(f"<rss><channel>{items}</channel></rss>".encode(), "http://a.test/f.rss")
    assert sm is not None and len(sm.urls) == MAX_URLS and sm.truncated
    cut = RSS[:RSS.index(b"<item><title>3")] + b"<item><link>http://a.te"
    sm = parse_sitemap(cut, "http://a.test/feed.rss")
    assert sm is not None and sm.malformed and sm.urls == ["http://a.test/p1", "http://a.test/p2"]
    assert parse_sitemap(b"<rss><channel/></rss>", "http://a.test/f.rss") == parse_sitemap(
        b"<rss><channel></channel></rss>", "http://a.test/f.rss")


def test_feed_dates() -> None:
    assert parse_feed_date("Wed, 15 Jan 2026 09:00:00 +0100") == parse_lastmod("2026-01-15T08:00:00Z")
    assert parse_feed_date("2026-01-15T08:00:00Z") == parse_lastmod("2026-01-15T08:00:00Z")
    assert parse_feed_date("15 Jan 26 03:00 EST") == parse_lastmod("2026-01-15T08:00:00Z")
    assert parse_feed_date("Thu, 15 Jan 2026 08:00:00 GMT") == parse_lastmod("2026-01-15T08:00:00Z")
    assert parse_feed_date("someday") is None and parse_feed_date(None) is None
    assert parse_feed_date("31 Feb 2026 08:00 GMT") is None and parse_feed_date("1 Foo 2026 08:00 GMT") is None
