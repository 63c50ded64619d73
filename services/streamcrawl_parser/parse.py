"""HTML → links, canonical, robots directives, title and visible text. Pure: bytes in, ParseOutcome out.

Decisions (documented here because dedup and the frontier depend on them):

* Charset: BOM → HTTP header charset → <meta charset>/http-equiv in the first 4 KiB → charset-normalizer
  sniff → UTF-8; decoding always uses errors="replace", so any byte string gives text.
* Links: `a`/`area` href (except rel=nofollow ones), `link` href only for rel alternate/next/prev (a
  stylesheet or an icon is not a page); `<base href>` honoured; every link resolved and normalized by
  streamcrawl_core.urls.normalize; rejects are counted by reason; self-links dropped; deduplicated in
  document order; capped at `max_links`.
* Robots: meta name=robots or name=streamcrawl, and X-Robots-Tag (one header per line of the value the
  fetcher passes on; entries addressed to another crawler, "googlebot: noindex", are ignored, and a
  user-agent prefix holds until the next one within its header); `none` = noindex + nofollow; nofollow
  empties out_links; `unavailable_after: <date>` (RFC 850/1123 or ISO 8601; no zone = UTC) is returned as
  a time, and the page counts as noindex once it has passed (ParseOutcome.unavailable_after).
* Canonical: the first `<link rel=canonical>` resolved against `<base>` and normalized (http(s) only;
  another host is allowed). When it names another URL it is also queued like a link (unless nofollow), so
  the canonical page itself is crawled; what it means for page_fetched is in the README's contract.
* Hostile input: libxml2's HTML parser is tolerant and iterative, depth-limited, and we never recurse in
  Python; oversized attributes are dropped before normalization; anything the parser rejects yields an
  empty outcome, never an exception.
"""

from __future__ import annotations

import codecs
import contextlib
import email.utils
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

import charset_normalizer
from lxml import etree
from streamcrawl_core.urls import UrlError, normalize

__all__ = ["Directives", "ParseOutcome", "decode_body", "indexing_directives", "is_html", "parse_html",
           "robots_directives"]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
_DROP_TAGS = ("script", "style", "noscript", "template")
_LINK_RELS = frozenset({"alternate", "next", "prev"})
_MAX_HREF = 8192  # normalize() rejects longer URLs anyway; skip the work on giant attributes
_META_CHARSET = re.compile(rb"""<meta[^>]{0,512}?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]{1,40})""", re.I)
_WS = re.compile(r"\s+")
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_KNOWN_DIRECTIVES = frozenset({"all", "noindex", "nofollow", "none", "noarchive", "nosnippet", "notranslate",
                               "noimageindex", "unavailable_after", "max-snippet", "max-image-preview",
                               "max-video-preview", "indexifembedded", "nocache"})


@dataclass(frozen=True)
class ParseOutcome:
    out_links: list[str] = field(default_factory=list)
    canonical_url: str | None = None
    title: str | None = None
    text: str = ""
    noindex: bool = False
    nofollow: bool = False
    charset: str | None = None
    links_dropped: dict[str, int] = field(default_factory=dict)  # reason → count
    links_capped: int = 0
    unavailable_after: datetime | None = None  # the earliest unavailable_after that applies to us
    html: str = field(default="", repr=False)  # the decoded document (for the main-content extractor)


@dataclass(frozen=True)
class Directives:
    noindex: bool = False
    nofollow: bool = False
    unavailable_after: datetime | None = None

    def merged(self, other: Directives) -> Directives:
        dates = [d for d in (self.unavailable_after, other.unavailable_after) if d is not None]
        return Directives(self.noindex or other.noindex, self.nofollow or other.nofollow, min(dates, default=None))


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def is_html(content_type: str | None) -> bool:
    return media_type(content_type) in HTML_TYPES


def _codec(name: str | None) -> str | None:
    """Python codec name for a declared charset, or None if unknown. ASCII/latin-1 labels mean
    windows-1252 on the web (WHATWG encoding standard)."""
    if not name:
        return None
    label = name.strip().strip("\"'").lower()
    if label in ("us-ascii", "ascii", "iso-8859-1", "latin1", "latin-1", "iso8859-1"):
        return "cp1252"
    try:
        name = codecs.lookup(label).name
        b"a".decode(name, errors="replace")  # not a text encoding (rot13, base64, zlib): LookupError
    except LookupError:
        return None
    return name


def _header_charset(content_type: str | None) -> str | None:
    for param in (content_type or "").split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            return value
    return None


def decode_body(body: bytes, content_type: str | None) -> tuple[str, str]:
    """(text, codec used). Never raises."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(name, errors="replace"), name
    enc = _codec(_header_charset(content_type))
    if enc is None:
        m = _META_CHARSET.search(body[:4096])
        enc = _codec(m.group(1).decode("ascii", "replace")) if m else None
    if enc is None and body:
        best = charset_normalizer.from_bytes(body[:65536]).best()
        enc = _codec(best.encoding) if best is not None else None
    enc = enc or "utf-8"
    try:
        return body.decode(enc, errors="replace"), enc
    except LookupError:  # a codec that cannot decode (e.g. a stateful one): fall back
        return body.decode("utf-8", errors="replace"), "utf-8"


def robots_directives(values: list[str], product_token: str = "streamcrawl") -> tuple[bool, bool]:
    """(noindex, nofollow) from meta robots contents or X-Robots-Tag values."""
    d = indexing_directives(values, product_token)
    return d.noindex, d.nofollow


def _date(text: str) -> datetime | None:
    """An unavailable_after date: RFC 850/1123 (Google's documented form) or ISO 8601; no zone = UTC."""
    text = text.strip()
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.upper().replace("Z", "+00:00") if "T" in text.upper() else text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def indexing_directives(values: list[str], product_token: str = "streamcrawl") -> Directives:
    """noindex, nofollow and unavailable_after from meta robots contents or X-Robots-Tag headers (one header
    per value; a value with several lines holds one header per line)."""
    noindex = nofollow = False
    dates: list[datetime] = []
    for value in (line for v in values for line in v.splitlines()):
        applies = True
        parts = value.split(",")
        for i, raw in enumerate(parts):
            part = raw.strip().lower()
            head, sep, rest = part.partition(":")
            if sep and head.strip() not in _KNOWN_DIRECTIVES and " " not in head.strip():
                applies = head.strip() == product_token  # "googlebot: noindex" is not for us
                part = rest.strip()
            if not applies:
                continue
            noindex = noindex or part in ("noindex", "none")
            nofollow = nofollow or part in ("nofollow", "none")
            name, sep, date_text = part.partition(":")
            if sep and name.strip() == "unavailable_after":
                # An RFC 850 date has a comma of its own ("Sun, 25 Jun 2010 ..."): try it with the next part.
                joined = f"{date_text},{parts[i + 1]}" if i + 1 < len(parts) else None
                when = (_date(joined) if joined else None) or _date(date_text)
                if when is not None:
                    dates.append(when)
    return Directives(noindex, nofollow, min(dates, default=None))


def _attr(el: etree._Element, name: str) -> str:
    value = el.get(name)
    return value if isinstance(value, str) else ""


def _collapse(text: str) -> str:
    return _WS.sub(" ", text).strip()


def parse_html(body: bytes, url: str, content_type: str | None = None, x_robots_tag: str | None = None,
               max_links: int = 1000) -> ParseOutcome:
    """Parse an HTML body fetched from `url` (already normalized). Never raises on any `body`."""
    header = indexing_directives([x_robots_tag] if x_robots_tag else [])
    text, charset = decode_body(body, content_type)
    root = _parse_tree(text)
    if root is None:
        return ParseOutcome(noindex=header.noindex, nofollow=header.nofollow, charset=charset,
                            unavailable_after=header.unavailable_after, html=text)

    base = url
    for el in root.iter("base"):
        href = _attr(el, "href").strip()
        if href and len(href) <= _MAX_HREF:
            with contextlib.suppress(UrlError):  # a bad <base> is ignored, as browsers do
                base = normalize(href, base=url)
        break  # only the first <base> counts (HTML spec)

    meta_values = [_attr(el, "content") for el in root.iter("meta")
                   if _attr(el, "name").strip().lower() in ("robots", "streamcrawl")]
    directives = header.merged(indexing_directives(meta_values))
    noindex, nofollow = directives.noindex, directives.nofollow

    dropped: Counter[str] = Counter()
    canonical: str | None = None
    hrefs: list[str] = []
    for el in root.iter("a", "area", "link"):
        href = _attr(el, "href").strip()
        if not href:
            continue
        rels = set(_attr(el, "rel").lower().split())
        if el.tag == "link":
            if "canonical" in rels and canonical is None:
                canonical = _resolve(href, base, dropped)
                continue
            if not rels & _LINK_RELS or rels & {"stylesheet", "icon"}:
                continue
        elif "nofollow" in rels:
            dropped["rel_nofollow"] += 1
            continue
        hrefs.append(href)

    links: list[str] = []
    capped = 0
    if not nofollow:
        seen = {url}
        for href in hrefs:
            target = _resolve(href, base, dropped)
            if target is None or target in seen:
                continue
            if len(links) >= max_links:
                capped += 1
                continue
            seen.add(target)
            links.append(target)
        if canonical is not None and canonical not in seen and len(links) < max_links:
            links.append(canonical)  # the canonical page itself is crawled too

    title = None
    title_el = next(root.iter("title"), None)
    if title_el is not None:
        title = _collapse("".join(title_el.itertext()))[:1000] or None
    etree.strip_elements(root, *_DROP_TAGS, with_tail=False)
    body_el = next(root.iter("body"), None)
    visible = _collapse(" ".join((body_el if body_el is not None else root).itertext()))
    return ParseOutcome(links, canonical, title, visible, noindex, nofollow, charset, dict(dropped), capped,
                        directives.unavailable_after, text)


def _parse_tree(text: str) -> etree._Element | None:
    # Re-encode to UTF-8 and say so: the parser then ignores in-document charset declarations (we have
    # already decoded) and does not reject the XML declaration some XHTML pages start with.
    data = text.replace("\x00", "\ufffd").encode("utf-8", errors="replace")
    if not data.strip():
        return None
    parser = etree.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True, no_network=True,
                              recover=True)
    try:
        root = etree.fromstring(data, parser)
    except (etree.LxmlError, ValueError):
        return None
    return root if isinstance(root, etree._Element) else None


def _resolve(href: str, base: str, dropped: Counter[str]) -> str | None:
    if len(href) > _MAX_HREF:
        dropped["too_long"] += 1
        return None
    try:
        return normalize(href, base=base)
    except UrlError as exc:
        dropped[exc.reason] += 1
        return None
