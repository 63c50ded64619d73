"""Sitemaps end to end: a synthetic web whose ordinary hosts serve sitemaps (plain, an index of a gzip and a
plain one, gzip, malformed, plain text, RSS 2.0, Atom) listing pages that nothing links to. Judged from the
web server's own log: the sitemaps are found (robots.txt Sitemap: lines and /sitemap.xml), fetched under robots.txt and
politeness, and the pages only they list are fetched; a malformed sitemap yields the entries before the
damage and nothing breaks."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamcrawl_launcher.crawl import Crawl, CrawlOptions
from streamcrawl_synthweb import sitemaps
from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.log import load_log, politeness_violations
from streamcrawl_synthweb.model import PROFILES

from tests.e2e.page_fetched import read_page_fetched

pytestmark = pytest.mark.e2e

HOSTS = 8
WEB_SEED = 3


@pytest.mark.timeout(600)
def test_sitemaps_are_found_fetched_politely_and_followed(tmp_path: Path) -> None:
    web = generate(HOSTS, WEB_SEED, PROFILES["sitemaps"], port=8480)
    crawl = Crawl(CrawlOptions(workdir=tmp_path, hosts=HOSTS, web_seed=WEB_SEED, log_level="WARNING",
                               synthweb_args=["--profile", "sitemaps"]))
    crawl.start()
    try:
        crawl.seed(crawl.manifest["seeds"])
        progress = crawl.wait_idle(idle_s=10, timeout_s=400, every_s=3)
    finally:
        crawl.stop()
    assert progress.dead_letters == 0
    entries = load_log(tmp_path / "requests.jsonl")
    assert politeness_violations(entries) == []
    requested: dict[str, dict[str, int]] = {}
    for e in entries:
        requested.setdefault(e.host, {})[e.path] = e.status
    variants = {h.name: sitemaps.variant(h) for h in web.hosts}
    assert set(variants.values()) == set(sitemaps.VARIANTS)
    files = {"plain": ["/sitemap.xml"], "index": ["/sitemap.xml", "/sitemap-pages.xml.gz", "/sitemap-orphans.xml"],
             "gzip": ["/sitemap.xml.gz"], "malformed": ["/sitemap.xml"], "text": ["/sitemap.txt"],
             "rss": ["/feed.rss"], "atom": ["/atom.xml"]}
    for h in web.hosts:
        got = requested.get(h.name, {})
        v = variants[h.name]
        assert v is not None
        # the sitemap files were fetched; the one robots.txt disallows never was
        assert all(got.get(f) == 200 for f in files[v]), (h.name, v, got)
        assert "/private/sitemap.xml" not in got, h.name
        # the pages only a sitemap lists were fetched (the malformed one: those before the damage)
        for path in sitemaps.orphan_paths():
            if path in sitemaps.listed(h):
                assert got.get(path) == 200, (h.name, v, path)
            else:
                assert path not in got, (h.name, v, path)
        # robots.txt came first
        first = min((e for e in entries if e.host == h.name), key=lambda e: e.start)
        assert first.path == "/robots.txt", (h.name, first.path)
    # sitemaps are no pages: never published
    urls = [m["url"] for m in read_page_fetched(crawl.settings.kafka_bootstrap, "e2e-sm", timeout_s=None)]
    assert urls and not [u for u in urls if u.endswith((".xml", ".xml.gz", ".txt", ".rss"))]
    assert any("/orphan/" in u for u in urls)
