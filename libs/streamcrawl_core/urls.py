"""Crawler URL normalization: the public URL API of the core (``normalize``, ``resolve``, ``host_of``,
``origin_of``, ``UrlError``, ``NormalizerConfig``, ``remove_dot_segments``).

``normalize`` applies the RFC 3986 section 6 syntax-based normalizations (case, percent-encoding,
dot segments, default port, empty path), then crawler policy: http(s) only, no userinfo, valid host
(IDN -> punycode), fragment dropped, tracking/session parameters stripped, query sorted, length cap.
Its output is the canonical spelling that ``fingerprint.url_fingerprint`` hashes, so it must be
deterministic and idempotent: ``normalize(normalize(u)) == normalize(u)``.

Every rejection is a ``UrlError`` (a ``ValueError``) with a machine-readable ``reason``. This module
owns the order of the steps and the fast paths; the steps live in ``rfc3986`` (syntax, resolution,
percent-encoding), ``url_host`` (hosts, ports) and ``url_policy`` (config, query filter).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from streamcrawl_core.rfc3986 import (
    PATH_OK,
    PATH_TOKEN,
    PCHAR_CLASS,
    QUERY_OK,
    QUERY_TOKEN,
    Parts,
    normalize_pct,
    pct_sub,
    remove_dot_segments,
    remove_dot_segments_literal,
    resolve,
    resolve_parts,
    split,
)
from streamcrawl_core.url_host import DEFAULT_PORT, normalize_host, split_authority
from streamcrawl_core.url_policy import DEFAULT_CONFIG, NormalizerConfig, UrlError, filter_query

__all__ = [
    "DEFAULT_CONFIG",
    "NormalizerConfig",
    "UrlError",
    "host_of",
    "normalize",
    "origin_of",
    "remove_dot_segments",
    "resolve",
]

_remove_dot_segments_literal = remove_dot_segments_literal  # the spelling the tests import


_STRIP_CHARS = "".join(chr(c) for c in range(33))  # C0 controls and space, as browsers do


def _clean_input(s: str, max_length: int) -> str:
    if not isinstance(s, str):
        raise UrlError("type", f"expected str, got {type(s).__name__}")
    s = s.strip(_STRIP_CHARS)
    if "\t" in s or "\n" in s or "\r" in s:  # browsers drop these anywhere (wrapped hrefs)
        s = s.replace("\t", "").replace("\n", "").replace("\r", "")
    # Guard against pathological input before doing O(n) work; no valid result could come out
    # of something this long except via massive parameter stripping.
    if len(s) > 16 * max_length:
        raise UrlError("too_long", f"{len(s)} chars")
    return s


def _normalize_query(query: str, config: NormalizerConfig) -> str:
    if QUERY_OK.fullmatch(query) is None:
        query = QUERY_TOKEN.sub(pct_sub, query)
    return filter_query(query, config)


# Absolute http(s) URLs made only of characters that need no cleaning, decoding or escaping: no
# surrounding blanks/controls, no userinfo, IP literal or "%" in the authority, no "%" or ";" in the path,
# only legal characters in the query, anything but controls/space in the (dropped) fragment. For these,
# every step of the full path that is an identity is skipped; every other step calls the same helper.
# (The scheme is spelled out, not matched with (?i): Unicode case folding would accept "httpſ".)
_FAST_RE = re.compile(
    rf"([Hh][Tt][Tt][Pp][Ss]?)://([A-Za-z0-9._\-]+(?::[0-9]{{1,5}})?)"
    rf"(/[{PCHAR_CLASS.replace(';', '')}/]*)?(?:\?([{PCHAR_CLASS}/?]*))?(?:#[^\x00-\x20]*)?"
)


def normalize(url: str, base: str | None = None, config: NormalizerConfig = DEFAULT_CONFIG) -> str:
    """Canonical absolute http(s) URL for ``url`` (resolved against ``base`` if relative).

    Raises ``UrlError`` (reason: type/scheme/userinfo/host/port/too_long/malformed/base) for anything
    a crawler should not fetch or cannot spell canonically.
    """
    native = config._native
    if native is not None:  # the compiled fast paths: same result, or None to run the code below
        out = native.normalize(url, base)
        if out is not None:
            return out
    m = _FAST_RE.fullmatch(url) if isinstance(url, str) and len(url) <= 16 * config.max_length else None
    if m is None:
        if isinstance(base, str) and isinstance(url, str):
            out = _normalize_relative_fast(url, base, config)
            if out is not None:
                return out
        return _normalize_full(url, base, config)
    scheme_raw, authority, path, query = m.groups()
    scheme = scheme_raw.lower()
    if ":" in authority:
        host, port = split_authority(authority, scheme)
    else:
        host, port = normalize_host(authority), ""
    query = filter_query(query, config) if query else ""
    if path is None:
        path = "/"
    elif "/." in path:
        path = remove_dot_segments(path)
    out = f"{scheme}://{host}:{port}{path}" if port else f"{scheme}://{host}{path}"
    if query:
        out = f"{out}?{query}"
    if len(out) > config.max_length:
        raise UrlError("too_long", f"{len(out)} > {config.max_length}")
    return out


# A relative reference with no scheme, no authority and only characters that need no escaping, and a
# base that itself takes the fast path: resolution + normalization reduce to a merge, dot-segment
# removal and the query filter on a cached, already normalized "scheme://host[:port]" of the base.
_FAST_REF_RE = re.compile(
    rf"([{PCHAR_CLASS.replace(';', '').replace(':', '')}/]*)(?:\?([{PCHAR_CLASS}/?]*))?(?:#[^\x00-\x20]*)?"
)


class _FastBase(NamedTuple):
    origin: str  # normalized "scheme://host[:port]"
    path: str  # raw path ("" if none), made only of characters that need no escaping
    query: str | None  # raw query


@functools.lru_cache(maxsize=1024)  # the links of one page share their base
def _fast_base(base: str, config: NormalizerConfig) -> _FastBase | None:
    m = _FAST_RE.fullmatch(base) if len(base) <= 16 * config.max_length else None
    if m is None:
        return None
    scheme_raw, authority, path, query = m.groups()
    scheme = scheme_raw.lower()
    try:
        host, port = split_authority(authority, scheme)
    except UrlError:
        return None  # let the full path raise its own error
    origin = f"{scheme}://{host}:{port}" if port else f"{scheme}://{host}"
    return _FastBase(origin, path or "", query)


def _normalize_relative_fast(ref: str, base: str, config: NormalizerConfig) -> str | None:
    """``normalize(ref, base)`` for a simple relative ``ref`` and a fast-path base; None otherwise."""
    m = _FAST_REF_RE.fullmatch(ref) if len(ref) <= 16 * config.max_length else None
    if m is None:
        return None
    rpath, rquery = m.groups()
    if rpath.startswith("//"):
        return None  # network-path reference (its own authority)
    fb = _fast_base(base, config)
    if fb is None:
        return None
    # RFC 3986 section 5.2.2 with no scheme and no authority in the reference
    if not rpath:
        path, query = fb.path, rquery if rquery is not None else fb.query
    else:
        if not rpath.startswith("/"):
            rpath = ("/" + rpath) if not fb.path else fb.path[: fb.path.rfind("/") + 1] + rpath
        path, query = rpath, rquery
    path = remove_dot_segments(path) or "/"
    query = filter_query(query, config) if query else ""
    out = f"{fb.origin}{path}?{query}" if query else f"{fb.origin}{path}"
    if len(out) > config.max_length:
        raise UrlError("too_long", f"{len(out)} > {config.max_length}")
    return out


@functools.lru_cache(maxsize=1024)  # the links of one page share their base
def _base_parts(base: str, max_length: int) -> Parts:
    b = split(_clean_input(base, max_length))
    if b.scheme is None:
        raise UrlError("base", "base URL must be absolute")
    return b


def _normalize_full(url: str, base: str | None, config: NormalizerConfig) -> str:
    """The general path of ``normalize``: every step, for any input."""
    url = _clean_input(url, config.max_length)
    parts = split(url)
    if parts.scheme is None:
        if base is None:
            raise UrlError("scheme", "relative URL without base")
        if not isinstance(base, str):
            raise UrlError("type", f"expected str, got {type(base).__name__}")
        parts = resolve_parts(_base_parts(base, config.max_length), parts)
    scheme = (parts.scheme or "").lower()
    if scheme not in DEFAULT_PORT:
        raise UrlError("scheme", f"unsupported scheme {scheme[:16]!r}")
    if not parts.authority:
        raise UrlError("host", "no host")
    host, port = split_authority(parts.authority, scheme)

    # RFC 3986 6.2.2 order: percent-encoding first (it may reveal "%2E" dots), then dot segments.
    # Session path params go before dot removal so stripping cannot leave a new "." segment behind.
    path = normalize_pct(parts.path, PATH_OK, PATH_TOKEN)
    pattern = config._path_param_re
    if pattern is not None and ";" in path:
        path = pattern.sub("", path)
    path = remove_dot_segments(path) or "/"
    if not path.startswith("/"):
        raise UrlError("malformed", "path must be absolute")  # unreachable for http(s); defensive

    query = _normalize_query(parts.query, config) if parts.query else ""
    out = f"{scheme}://{host}:{port}{path}" if port else f"{scheme}://{host}{path}"
    if query:
        out = f"{out}?{query}"
    if len(out) > config.max_length:
        raise UrlError("too_long", f"{len(out)} > {config.max_length}")
    return out


def host_of(normalized_url: str) -> str:
    """Lowercase host (no port; IPv6 keeps brackets) of an absolute URL, without re-normalizing it."""
    if not isinstance(normalized_url, str):
        raise UrlError("type", "host_of() needs str")
    authority = split(normalized_url).authority
    if not authority:
        raise UrlError("host", "no host")
    authority = authority.rpartition("@")[2]
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise UrlError("host", "unterminated IP literal")
        return authority[: end + 1].lower()
    host = authority.partition(":")[0].lower()
    if not host:
        raise UrlError("host", "empty host")
    return host


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` in normalized form (default port dropped)."""
    if not isinstance(url, str):
        raise UrlError("type", "origin_of() needs str")
    p = split(url.strip(_STRIP_CHARS))
    if p.scheme is None or p.authority is None:
        raise UrlError("malformed", "not an absolute URL with a host")
    return normalize(f"{p.scheme}://{p.authority}/")[:-1]
