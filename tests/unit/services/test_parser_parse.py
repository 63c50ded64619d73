"""parse.py: charset detection, links, base/canonical, robots directives, visible text, hostile input."""

from __future__ import annotations

import codecs
from datetime import UTC, datetime

import pytest
from streamcrawl_parser.parse import decode_body, indexing_directives, is_html, parse_html, robots_directives

URL = "http://site.test/dir/page.html"


def test_links_resolved_normalized_deduped_and_filtered() -> None:
    html = b"""<html><head>
      <link rel="stylesheet" href="/s.css"><link rel="icon" href="/f.ico">
      <link rel="next" href="page2.html"><link rel="alternate" hreflang="de" href="/de/">
      <link rel="canonical" href="/dir/Canonical.html?utm_source=x">
    </head><body>
      <a href="a.html">A</a> <a href="./a.html#frag">A again</a> <a href="HTTP://SITE.test:80/x?b=2&a=1">x</a>
      <a href="mailto:me@site.test">mail</a> <a href="javascript:void(0)">js</a> <a href="http://[bad/">bad</a>
      <a href="page.html">self</a> <a rel="nofollow" href="/sponsored">ad</a> <area href="/map">
      <a>no href</a>
    </body></html>"""
    out = parse_html(html, URL, "text/html")
    assert out.out_links == ["http://site.test/dir/page2.html", "http://site.test/de/",
                             "http://site.test/dir/a.html", "http://site.test/x?a=1&b=2", "http://site.test/map",
                             "http://site.test/dir/Canonical.html"]  # the canonical last, queued like a link
    assert out.canonical_url == "http://site.test/dir/Canonical.html"
    assert out.links_dropped.get("scheme") == 2 and out.links_dropped.get("rel_nofollow") == 1
    assert sum(out.links_dropped.values()) == 4


def test_base_href_is_honoured() -> None:
    html = b'<html><head><base href="http://other.test/root/"></head><body><a href="x">x</a></body></html>'
    assert parse_html(html, URL).out_links == ["http://other.test/root/x"]


def test_link_cap() -> None:
    html = ("<html><body>" + "".join(f'<a href="/p{i}">p</a>' for i in range(50)) + "</body></html>").encode()
    out = parse_html(html, URL, max_links=10)
    assert len(out.out_links) == 10 and out.links_capped == 40


@pytest.mark.parametrize(("meta", "header", "noindex", "nofollow"), [
    ('<meta name="robots" content="noindex">', None, True, False),
    ('<meta name="ROBOTS" content="NOFOLLOW, noarchive">', None, False, True),
    ('<meta name="robots" content="none">', None, True, True),
    ('<meta name="streamcrawl" content="nofollow">', None, False, True),
    ('<meta name="googlebot" content="noindex, nofollow">', None, False, False),
    ("", "noindex", True, False),
    ("", "googlebot: nofollow", False, False),
    ("", "streamcrawl: nofollow", False, True),
    ("", "unavailable_after: 25 Jun 2010 15:00:00 PST", False, False),
])
def test_robots_directives(meta: str, header: str | None, noindex: bool, nofollow: bool) -> None:
    html = f'<html><head>{meta}</head><body><a href="/x">x</a></body></html>'.encode()
    out = parse_html(html, URL, "text/html", header)
    assert (out.noindex, out.nofollow) == (noindex, nofollow)
    assert out.out_links == ([] if nofollow else ["http://site.test/x"])


def test_robots_directives_helper() -> None:
    assert robots_directives(["all"]) == (False, False)
    assert robots_directives(["noindex, nofollow"]) == (True, True)


@pytest.mark.parametrize(("header", "noindex", "nofollow"), [
    ("googlebot: noindex, nofollow\nnoindex", True, False),   # two headers: the prefix holds in its own only
    ("googlebot: noindex\nstreamcrawl: nofollow", False, True),
    ("streamcrawl: none\notherbot: all", True, True),
    ("googlebot: noindex, streamcrawl: noindex", True, False),  # a second prefix within one header
    ("NoIndex", True, False),
])
def test_x_robots_tag_headers_are_kept_apart(header: str, noindex: bool, nofollow: bool) -> None:
    assert robots_directives([header]) == (noindex, nofollow)


@pytest.mark.parametrize(("value", "when"), [
    ("unavailable_after: 25 Jun 2010 15:00:00 PST", datetime(2010, 6, 25, 23, 0, tzinfo=UTC)),
    ("noindex, unavailable_after: Sun, 25 Jun 2010 15:00:00 GMT, nofollow", datetime(2010, 6, 25, 15, 0, tzinfo=UTC)),
    ("unavailable_after: 25-Aug-2007 15:00:00 EST", datetime(2007, 8, 25, 20, 0, tzinfo=UTC)),
    ("unavailable_after: 2030-01-02", datetime(2030, 1, 2, tzinfo=UTC)),
    ("unavailable_after: 2030-01-02T03:04:05Z", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("streamcrawl: unavailable_after: 2030-01-02T03:04:05+02:00", datetime(2030, 1, 2, 1, 4, 5, tzinfo=UTC)),
    ("googlebot: unavailable_after: 2010-01-01", None),  # not for us
    ("unavailable_after: next tuesday", None),  # unreadable: ignored
    ("unavailable_after: 2031-01-01, unavailable_after: 2030-06-01", datetime(2030, 6, 1, tzinfo=UTC)),
])
def test_unavailable_after_dates(value: str, when: datetime | None) -> None:
    assert indexing_directives([value]).unavailable_after == when


def test_unavailable_after_in_meta_and_header_takes_the_earlier() -> None:
    html = b'<html><head><meta name="robots" content="unavailable_after: 2031-01-01"></head><body>x</body></html>'
    out = parse_html(html, URL, "text/html", "unavailable_after: 2030-01-01")
    assert out.unavailable_after == datetime(2030, 1, 1, tzinfo=UTC) and not out.noindex  # build_page decides


def test_the_canonical_is_queued_like_a_link_unless_nofollow() -> None:
    html = b'<html><head><link rel="canonical" href="/main"></head><body><a href="/x">x</a></body></html>'
    assert parse_html(html, URL, "text/html").out_links == ["http://site.test/x", "http://site.test/main"]
    self_canonical = html.replace(b"/main", b"/dir/page.html")
    assert parse_html(self_canonical, URL, "text/html").out_links == ["http://site.test/x"]
    assert parse_html(html, URL, "text/html", "nofollow").out_links == []


def test_title_and_visible_text() -> None:
    html = b"""<html><head><title>  The
      Title </title><style>p{color:red}</style><script>var hidden = 1;</script></head>
      <body><p>Hello <b>world</b></p><noscript>no js</noscript><template>tpl</template>
      <!-- a comment --><script>alert(1)</script>tail text</body></html>"""
    out = parse_html(html, URL)
    assert out.title == "The Title"
    assert out.text == "Hello world tail text"


@pytest.mark.parametrize(("body", "ctype", "expected"), [
    ("café".encode("latin-1"), "text/html; charset=ISO-8859-1", "cp1252"),
    ('<meta charset="windows-1251"><p>Привет</p>'.encode("cp1251"), "text/html", "cp1251"),
    ('<meta http-equiv="Content-Type" content="text/html; charset=shift_jis"><p>日本語</p>'.encode("shift_jis"),
     "text/html", "shift_jis"),
    ("\ufeffhello".encode(), "text/html; charset=latin-1", "utf-8"),  # BOM wins over the header
])
def test_charset_detection(body: bytes, ctype: str, expected: str) -> None:
    _text, enc = decode_body(body, ctype)
    assert enc == expected


@pytest.mark.parametrize(("body", "want"), [
    (b"plain ascii", "plain ascii"),
    ("café crème".encode(), "café crème"),
    (('<meta charset="rot13"><p>' + "Съешь же ещё этих мягких французских булок. " * 5 + "</p>").encode("cp1251"),
     "французских булок"),
])
def test_unknown_or_lying_charset_falls_back_to_sniffing(body: bytes, want: str) -> None:
    """A charset Python does not know (or that is not a text codec) is ignored: the body is decoded by
    the next rule (meta, BOM, sniffing), never dropped, and the codec named is a real one."""
    text, enc = decode_body(body, "text/html; charset=bogus-charset")
    assert want in text
    assert codecs.lookup(enc).name


def test_charset_sniffed_without_declaration() -> None:
    body = ("<html><body><p>" + "Съешь же ещё этих мягких французских булок, да выпей чаю. " * 20
            + "</p></body></html>").encode("cp1251")
    out = parse_html(body, URL, "text/html")
    assert "французских" in out.text


def test_xml_declaration_and_xhtml() -> None:
    body = (b'<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
            b'<body><a href="/q">q</a></body></html>')
    assert parse_html(body, URL, "application/xhtml+xml").out_links == ["http://site.test/q"]
    assert is_html("application/xhtml+xml; charset=utf-8") and not is_html("application/pdf") and not is_html(None)


@pytest.mark.parametrize(("body", "links"), [
    (b"", []),
    (b"   \n\t ", []),
    (b"\x00" * 1000, []),
    (bytes(range(256)) * 200, []),
    (b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000, []),
    (b'<a href="' + b"x" * 2_000_000 + b'">huge</a><a href="/ok">ok</a>', ["http://site.test/ok"]),
    (b"<html><body><a href=", []),
    (b"<<<>>><a href='/\x00x'>n</a>\xff\xfe\xfd", ["http://site.test/%EF%BF%BDx"]),  # NUL → U+FFFD
    (b"\xef\xbb\xbf", []),
])
def test_hostile_bodies_give_a_defined_result(body: bytes, links: list[str]) -> None:
    out = parse_html(body, URL, "text/html")
    assert out.out_links == links
    assert isinstance(out.text, str)


def test_huge_attribute_is_dropped_but_others_kept() -> None:
    body = b'<a href="/' + b"x" * 20_000 + b'">huge</a><a href="/ok">ok</a>'
    out = parse_html(body, URL)
    assert out.out_links == ["http://site.test/ok"] and out.links_dropped == {"too_long": 1}
