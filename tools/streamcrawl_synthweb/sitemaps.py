"""Sitemaps of the synthetic web (profiles with ``sitemaps=True``): every ordinary host serves one, in the
variant its index picks, listing its pages and a few "orphan" pages that no page links to (so only a
crawler that reads the sitemap finds them):

- ``plain``: robots.txt names ``/sitemap.xml``, a ``<urlset>`` with ``<lastmod>``;
- ``index``: robots.txt names nothing; ``/sitemap.xml`` (the conventional place) is a ``<sitemapindex>``
  of ``/sitemap-pages.xml.gz`` (gzip) and ``/sitemap-orphans.xml``;
- ``gzip``: robots.txt names ``/sitemap.xml.gz``, served as application/gzip (the body is the gzip file);
- ``malformed``: robots.txt names ``/sitemap.xml``, whose XML breaks off after the first entries;
- ``text``: robots.txt names ``/sitemap.txt``, one URL per line (text/plain);
- ``rss``: robots.txt names ``/feed.rss``, an RSS 2.0 feed whose items link the pages (with ``<pubDate>``);
- ``atom``: robots.txt names ``/atom.xml``, an Atom feed whose entries link them (relative hrefs for some).

Every variant's robots.txt also names ``/private/sitemap.xml`` under ``Disallow: /private/``: a crawler
that obeys robots.txt never asks for it.
"""

from __future__ import annotations

import gzip

from streamcrawl_synthweb.model import NORMAL, Host, SynthWeb

VARIANTS = ("plain", "index", "gzip", "malformed", "text", "rss", "atom")
#: The file robots.txt names, per variant (the index variant relies on the conventional /sitemap.xml).
NAMED = {"plain": "/sitemap.xml", "gzip": "/sitemap.xml.gz", "malformed": "/sitemap.xml", "text": "/sitemap.txt",
         "rss": "/feed.rss", "atom": "/atom.xml"}
ORPHANS = 3
LASTMOD = "2026-01-15T08:00:00+00:00"
PUBDATE = "Thu, 15 Jan 2026 08:00:00 GMT"  # LASTMOD in RFC 822, as RSS writes it
_NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def variant(host: Host) -> str | None:
    return VARIANTS[host.index % len(VARIANTS)] if host.kind == NORMAL else None


def orphan_paths() -> list[str]:
    return [f"/orphan/{i}.html" for i in range(ORPHANS)]


def robots_txt(web: SynthWeb, host: Host) -> str:
    lines = ["User-agent: *", "Disallow: /private/", ""]
    named = NAMED.get(variant(host) or "")
    if named:
        lines.append(f"Sitemap: {web.url(host, named)}")
    lines.append(f"Sitemap: {web.url(host, '/private/sitemap.xml')}")
    return "\n".join(lines) + "\n"


def _urlset(web: SynthWeb, host: Host, paths: list[str]) -> bytes:
    items = "".join(f"<url><loc>{web.url(host, p)}</loc><lastmod>{LASTMOD}</lastmod></url>\n" for p in paths)
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {_NS}>\n{items}</urlset>\n'.encode()


def _rss(web: SynthWeb, host: Host, paths: list[str]) -> bytes:
    items = "".join(f"<item><title>{p}</title><link>{web.url(host, p)}</link><pubDate>{PUBDATE}</pubDate></item>\n"
                    for p in paths)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<rss version="2.0"><channel><title>{host.name}</title>'
            f"<link>{web.url(host, '/')}</link>\n{items}</channel></rss>\n").encode()


def _atom(web: SynthWeb, host: Host, paths: list[str]) -> bytes:
    entries = "".join(f'<entry><title>{p}</title><link href="{web.url(host, p) if i % 2 else p}"/>'
                      f"<id>{web.url(host, p)}</id><updated>{LASTMOD}</updated></entry>\n"
                      for i, p in enumerate(paths))
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<feed xmlns="http://www.w3.org/2005/Atom">'
            f'<title>{host.name}</title><link href="{web.url(host, "/")}"/><updated>{LASTMOD}</updated>\n'
            f"{entries}</feed>\n").encode()


def listed(host: Host) -> list[str]:
    """The paths a host's sitemap lists (the malformed one: only those before it breaks off)."""
    paths = sorted(p for p, page in host.pages.items() if page.kind == "html" and "?" not in p)
    if variant(host) == "malformed":
        return [*paths[:1], *orphan_paths()[:1]]
    return [*paths, *orphan_paths()]


def serve(web: SynthWeb, host: Host, path: str) -> tuple[bytes, str] | None:
    """(body, content type) of a sitemap path of this host, or None."""
    v = variant(host)
    if v is None:
        return None
    pages = sorted(p for p, page in host.pages.items() if page.kind == "html" and "?" not in p)
    if v == "index":
        if path == "/sitemap.xml":
            subs = "".join(f"<sitemap><loc>{web.url(host, p)}</loc><lastmod>{LASTMOD}</lastmod></sitemap>\n"
                           for p in ("/sitemap-pages.xml.gz", "/sitemap-orphans.xml"))
            body = f'<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex {_NS}>\n{subs}</sitemapindex>\n'
            return body.encode(), "application/xml"
        if path == "/sitemap-pages.xml.gz":
            return gzip.compress(_urlset(web, host, pages), mtime=0), "application/gzip"
        if path == "/sitemap-orphans.xml":
            return _urlset(web, host, orphan_paths()), "application/xml"
    if v == "plain" and path == "/sitemap.xml":
        return _urlset(web, host, [*pages, *orphan_paths()]), "application/xml"
    if v == "gzip" and path == "/sitemap.xml.gz":
        return gzip.compress(_urlset(web, host, [*pages, *orphan_paths()]), mtime=0), "application/gzip"
    if v == "malformed" and path == "/sitemap.xml":
        full = _urlset(web, host, [*pages[:1], *orphan_paths()[:1], *orphan_paths()[1:]])
        cut = full.index(b"<url>", full.index(b"<url>", full.index(b"<url>") + 1) + 1)  # after two entries
        return full[:cut] + b"<url><loc>http://broken</lo", "application/xml"
    if v == "text" and path == "/sitemap.txt":
        return "".join(web.url(host, p) + "\n" for p in [*pages, *orphan_paths()]).encode(), "text/plain; charset=utf-8"
    if v == "rss" and path == "/feed.rss":
        return _rss(web, host, [*pages, *orphan_paths()]), "application/rss+xml"
    if v == "atom" and path == "/atom.xml":
        return _atom(web, host, [*pages, *orphan_paths()]), "application/atom+xml"
    return None


def orphan_page(path: str) -> bytes | None:
    if path not in orphan_paths():
        return None
    body = "<p>Only a sitemap links here.</p>"
    return f"<html><head><title>orphan {path}</title></head><body>{body}</body></html>\n".encode()
