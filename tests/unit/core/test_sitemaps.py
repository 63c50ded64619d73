"""Sitemap parsing: urlset and index, gzip, lastmod, the limits, malformed XML, foreign hosts."""

from __future__ import annotations

import gzip

import pytest
from streamcrawl_core.sitemaps import MAX_URLS, SitemapError, decompress, may_be_sitemap, parse_lastmod, parse_sitemap

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
    assert parse_sitemap(b"<rss><channel/></rss>", SM) is None


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
