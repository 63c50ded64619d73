"""Rendering of synthetic pages and robots.txt files to bytes.

All output is a pure function of (web, host, page, version[, sid]) so duplicates are byte-identical
and a page only changes when its content version does. The server adds HTTP concerns (status,
conditional GET, compression, delays); the ground truth reuses ``robots_spec`` for the rules.
"""

from __future__ import annotations

import html
import json
import random
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from streamcrawl_synthweb.model import Host, Link, Page, Profile, SynthWeb

__all__ = [
    "Rendered",
    "RobotsSpec",
    "big_body_chunks",
    "render_calendar",
    "render_page",
    "render_repeat",
    "render_soft404",
    "robots_spec",
]

_WORDS = [
    "stream",
    "crawler",
    "frontier",
    "kafka",
    "partition",
    "offset",
    "politeness",
    "robots",
    "fetch",
    "parse",
    "canonical",
    "seed",
    "host",
    "delay",
    "queue",
    "shard",
    "replica",
    "lag",
    "batch",
    "commit",
    "record",
    "schema",
    "topic",
    "broker",
    "consumer",
    "producer",
    "index",
    "render",
    "anchor",
    "link",
    "graph",
    "page",
    "content",
    "archive",
    "window",
    "backoff",
    "budget",
    "trap",
    "session",
]
_CHARSET_TEXT = {
    "iso-8859-1": "Café crème à Zürich, naïve façade, Ærøskøbing.",
    "shift_jis": "日本語のページです。東京の天気は晴れ。",
    "windows-1251": "Привет, мир. Москва и Санкт-Петербург.",
    "utf-8": "Ünïcödé text, encoding not declared: ✓ ñ ß €.",
}
_CHARSET_LABEL = {"iso-8859-1": "ISO-8859-1", "shift_jis": "Shift_JIS", "windows-1251": "windows-1251"}
_ADS = ("Buy more streams today!", "Buy more streams tonight!")  # near-duplicates differ by one word


@dataclass(frozen=True)
class Rendered:
    body: bytes
    content_type: str


@dataclass(frozen=True)
class RobotsSpec:
    """What /robots.txt answers. ``status`` 0 means: hang for Profile.robots_timeout_s first."""

    status: int
    body: str = ""
    location: str | None = None


_DISALLOW_PRIVATE = "User-agent: *\nDisallow: /private/\n"


def robots_spec(kind: str, profile: Profile) -> RobotsSpec:
    if kind == "robots_disallow":
        return RobotsSpec(200, _DISALLOW_PRIVATE)
    if kind == "robots_404":
        return RobotsSpec(404, "not found\n")
    if kind == "robots_500":
        return RobotsSpec(500, "internal error\n")
    if kind == "robots_503":
        return RobotsSpec(503, "unavailable\n")
    if kind == "robots_timeout":
        return RobotsSpec(0, "User-agent: *\nDisallow:\n")
    if kind == "robots_redirect":
        return RobotsSpec(301, location="/robots-real.txt")
    if kind == "robots_crawl_delay":
        return RobotsSpec(200, f"User-agent: *\nCrawl-delay: {profile.crawl_delay_s:g}\nDisallow:\n")
    if kind == "robots_wildcard":
        return RobotsSpec(
            200,
            "User-agent: *\nAllow: /private/public-*\nDisallow: /private/\nDisallow: /*.pdf$\n",
        )
    if kind == "robots_ua_group":
        return RobotsSpec(
            200,
            "User-agent: *\nDisallow: /\n\nUser-agent: streamcrawl\nDisallow: /private/\n",
        )
    if kind == "trap_calendar":
        return RobotsSpec(200, "User-agent: *\nDisallow:\n# the calendar is endless; we do not say so\n")
    return RobotsSpec(200, "User-agent: *\nDisallow:\n")


def robots_real_txt() -> str:
    """Body behind the robots redirect (/robots-real.txt)."""
    return _DISALLOW_PRIVATE


def _sentences(key: int, n: int) -> list[str]:
    rng = random.Random(key)
    out = []
    for _ in range(n):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 16))]
        out.append(" ".join(words).capitalize() + ".")
    return out


def _href(web: SynthWeb, link: Link, sid: str | None) -> str:
    if link.host is not None:
        return web.url(link.host, link.href)
    # Session-id trap: every same-host link carries a fresh sid, so one page has endless URLs.
    return f"{link.href}?sid={sid}" if sid is not None else link.href


def _doc(title: str, head: str, body: str) -> str:
    return (
        f"<!DOCTYPE html>\n<html><head>{head}<title>{html.escape(title)}</title></head>\n"
        f"<body><h1>{html.escape(title)}</h1>\n{body}</body></html>\n"
    )


def _links_html(hrefs: list[str]) -> str:
    items = "".join(f'<li><a href="{html.escape(h)}">{html.escape(h)}</a></li>\n' for h in hrefs)
    return f"<ul>\n{items}</ul>\n"


def render_page(web: SynthWeb, host: Host, page: Page, version: int = 0, sid: str | None = None) -> Rendered:
    """Render a table page (kinds html, pdf, png, json; 'big' is streamed by ``big_body_chunks``)."""
    if page.kind == "pdf":
        return Rendered(_pdf(page.body_key), "application/pdf")
    if page.kind == "png":
        return Rendered(_png(page.body_key), "image/png")
    if page.kind == "json":
        doc = {"id": page.body_key, "items": _sentences(page.body_key, 3), "version": version}
        return Rendered(json.dumps(doc, sort_keys=True).encode(), "application/json")
    if page.kind == "error":
        return Rendered(_doc(f"Error {page.status}", "", "<p>Something broke.</p>\n").encode(), "text/html")
    head = []
    charset = page.charset
    if page.charset_via == "meta":
        head.append(f'<meta charset="{_CHARSET_LABEL.get(charset, charset)}">')
    elif page.charset_via == "http-equiv":
        label = _CHARSET_LABEL.get(charset, charset)
        head.append(f'<meta http-equiv="Content-Type" content="text/html; charset={label}">')
    elif page.charset_via == "header" and charset == "utf-8":
        head.append('<meta charset="utf-8">')
    if page.base:
        head.append(f'<base href="{html.escape(page.base)}">')
    if page.canonical:
        head.append(f'<link rel="canonical" href="{web.url(host, page.canonical)}">')
    elif sid is not None:
        head.append(f'<link rel="canonical" href="{web.url(host, page.path)}">')
    if page.meta_robots:
        head.append(f'<meta name="robots" content="{page.meta_robots}">')
    # a near-duplicate host's articles are long, as real ones are: SimHash's 3-bit threshold is meant for
    # a small edit (a date, an advert line) in a long text, not in four sentences
    paras = _sentences(page.body_key, 40 if host.kind == "dup_near" else 4)
    if page.charset != "utf-8" or page.charset_via == "none":
        paras.insert(0, _CHARSET_TEXT[page.charset])
    if page.body_key and page.path.startswith(("/p/", "/print/")) and host.kind == "dup_near":
        # Near-duplicates: same article, different timestamp and advert line.
        paras.insert(0, f"Published 2026-03-0{page.variant + 1} 10:1{page.variant}:00 UTC.")
        paras.append(f"Advertisement: {_ADS[page.variant % len(_ADS)]}")
    if version:
        paras.append(f"Revision {version}: {_sentences(page.body_key + version * 7919, 1)[0]}")
    body = "".join(f"<p>{html.escape(p)}</p>\n" for p in paras)
    body += _links_html([_href(web, link, sid) for link in page.links])
    title = f"Page {page.body_key}"
    if host.kind == "template_heavy":
        text = _templated(title, "".join(head), host.index, page.body_key, body)
    else:
        text = _doc(title, "".join(head), body)
    ctype = "text/html"
    if page.charset_via == "header":
        ctype = f"text/html; charset={_CHARSET_LABEL.get(charset, charset)}"
    return Rendered(text.encode(charset), ctype)


def _pseudo_words(rng: random.Random, n: int) -> list[str]:
    """Pronounceable made-up words from a large space (a real text's vocabulary, not _WORDS' 39 words)."""
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    return ["".join(rng.choice(consonants) + rng.choice(vowels) for _ in range(rng.randint(2, 4)))
            for _ in range(n)]


def _prose(rng: random.Random, words: int) -> str:
    out = _pseudo_words(rng, words)
    return " ".join(out).capitalize() + "."


def _templated(title: str, head: str, host_index: int, body_key: int, links_and_paras: str) -> str:
    """A page of a template-heavy site: the same ~1,500 words of header, navigation, sidebar and footer on
    every page of the host, around an article of its own: a ~50-word body (from a large vocabulary) plus
    the page's links. Only the article differs from page to page."""
    rng = random.Random(f"template:{host_index}")
    nav = "".join(f'<li><a href="/">{w}</a></li>' for w in _pseudo_words(rng, 60))
    aside = "".join(f"<p>{html.escape(_prose(rng, 100))}</p>\n" for _ in range(6))
    footer = "".join(f"<p>{html.escape(_prose(rng, 105))}</p>\n" for _ in range(8))
    article = html.escape(_prose(random.Random(f"article:{body_key}"), 50))
    # the page's own links stay in the article (related pages); the old filler paragraphs are dropped
    links = links_and_paras[links_and_paras.find("<ul>"):] if "<ul>" in links_and_paras else ""
    return (
        f"<!DOCTYPE html>\n<html><head>{head}<title>{html.escape(title)}</title></head>\n<body>\n"
        f'<header><div class="logo">Site {host_index}</div><nav class="menu"><ul>{nav}</ul></nav></header>\n'
        f'<div class="layout"><main><article><h1>{html.escape(title)}</h1>\n'
        f"<p>{article}</p>\n{links}</article></main>\n"
        f'<aside class="sidebar">{aside}</aside></div>\n<footer class="site-footer">{footer}</footer>\n'
        "</body></html>\n"
    )


def render_calendar(year: int, month: int) -> Rendered:
    ny, nm = (year + 1, 1) if month == 12 else (year, month + 1)
    body = f"<p>Events for {year}-{month:02d}: none.</p>\n" + _links_html([f"/cal/{ny}/{nm:02d}/", "/"])
    return Rendered(_doc(f"Calendar {year}-{month:02d}", '<meta charset="utf-8">', body).encode(), _HTML)


def render_repeat(depth: int) -> Rendered:
    # A relative "a/" link on /r/a/.../ grows the path by one segment per hop, forever.
    body = f"<p>Directory level {depth}.</p>\n" + _links_html(["a/", "/"])
    return Rendered(_doc(f"Level {depth}", '<meta charset="utf-8">', body).encode(), _HTML)


def render_soft404() -> Rendered:
    body = "<p>Sorry, the page you requested was not found.</p>\n" + _links_html(["/"])
    return Rendered(_doc("Page not found", '<meta charset="utf-8">', body).encode(), _HTML)


_HTML = "text/html; charset=utf-8"


def big_body_chunks(total: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """An HTML document of exactly ``total`` bytes, yielded in ``chunk``-sized pieces."""
    head = b'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Big</title></head><body>\n'
    filler = b"<p>" + b"big body filler " * 60 + b"</p>\n"
    sent = 0
    first = head + filler * (chunk // len(filler))
    while sent < total:
        piece = first if sent == 0 else filler * (chunk // len(filler))
        piece = piece[: total - sent]
        sent += len(piece)
        yield piece


def _pdf(key: int) -> bytes:
    text = " ".join(_sentences(key, 2)).encode()
    return (
        b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
        b"2 0 obj\n<< /Length " + str(len(text)).encode() + b" >>\nstream\n" + text + b"\nendstream\nendobj\n"
        b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
    )


def _png(key: int) -> bytes:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    r, g, b = (key * 37) % 256, (key * 91) % 256, (key * 53) % 256
    raw = b"".join(b"\x00" + bytes((r, g, b)) * 8 for _ in range(8))
    ihdr = struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
