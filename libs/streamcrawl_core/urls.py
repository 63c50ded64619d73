"""URL reference resolution (RFC 3986 section 5) and crawler URL normalization.

``normalize`` applies the RFC 3986 section 6 syntax-based normalizations (case, percent-encoding,
dot segments, default port, empty path), then crawler policy: http(s) only, no userinfo, valid host
(IDN -> punycode), fragment dropped, tracking/session parameters stripped, query sorted, length cap.
Its output is the canonical spelling that ``fingerprint.url_fingerprint`` hashes, so it must be
deterministic and idempotent: ``normalize(normalize(u)) == normalize(u)``.

Every rejection is a ``UrlError`` (a ``ValueError``) with a machine-readable ``reason``.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import unquote

import idna

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


class UrlError(ValueError):
    """A URL was rejected. ``reason`` is one of: "type", "scheme", "userinfo", "host", "port",
    "too_long", "malformed", "base"."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


_DEFAULT_STRIP = frozenset(
    {
        # click/campaign trackers (utm_* is handled by strip_param_prefixes)
        "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid", "ttclid",
        "igshid", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok",
        # session ids: a new value per visit for the same content is a classic crawler trap
        "jsessionid", "phpsessid", "aspsessionid", "sessionid", "sid", "cfid", "cftoken",
    }
)  # fmt: skip


@dataclass(frozen=True)
class NormalizerConfig:
    """Policy knobs of ``normalize``. Parameter names match case-insensitively."""

    strip_params: frozenset[str] = _DEFAULT_STRIP
    strip_param_prefixes: tuple[str, ...] = ("utm_",)
    sort_query: bool = True
    max_length: int = 2048
    # Derived, precomputed once so the per-URL path does no set building.
    _strip_lower: frozenset[str] = field(init=False, repr=False, compare=False)
    _prefixes_lower: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _path_param_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _query_strip_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_length < 16:
            raise ValueError("max_length must be >= 16")
        lower = frozenset(p.lower() for p in self.strip_params)
        object.__setattr__(self, "_strip_lower", lower)
        object.__setattr__(self, "_prefixes_lower", tuple(p.lower() for p in self.strip_param_prefixes))
        pattern = None
        if lower:
            alts = "|".join(re.escape(p) for p in sorted(lower))
            pattern = re.compile(rf";(?:{alts})=[^/;]*", re.IGNORECASE)
        object.__setattr__(self, "_path_param_re", pattern)
        # Pre-filter for _normalize_query: finds every parameter that might be stripped (ASCII case-
        # insensitive matching accepts a superset of the exact lower()-based test), so a query it does
        # not match needs no per-parameter checks.
        names = [re.escape(p) + r"(?:[=&]|$)" for p in sorted(lower)]
        names += [re.escape(p) for p in self._prefixes_lower]
        query_re = re.compile(rf"(?:^|&)(?:{'|'.join(names)})", re.IGNORECASE) if names else None
        object.__setattr__(self, "_query_strip_re", query_re)


DEFAULT_CONFIG = NormalizerConfig()


class _Parts(NamedTuple):
    scheme: str | None
    authority: str | None
    path: str
    query: str | None
    fragment: str | None


_SCHEME_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*")


def _split(s: str) -> _Parts:
    # RFC 3986 Appendix B done with str.find (3x faster than the regex on CPython). A candidate
    # scheme that breaks the RFC grammar (e.g. "a b:c") is read as a relative reference, like browsers.
    scheme = None
    colon = s.find(":")
    if colon > 0 and _SCHEME_RE.fullmatch(s, 0, colon) is not None:
        scheme = s[:colon]
        s = s[colon + 1 :]
    fragment = query = authority = None
    cut = s.find("#")
    if cut >= 0:
        s, fragment = s[:cut], s[cut + 1 :]
    cut = s.find("?")
    if cut >= 0:
        s, query = s[:cut], s[cut + 1 :]
    if s.startswith("//"):
        cut = s.find("/", 2)
        if cut < 0:
            authority, s = s[2:], ""
        else:
            authority, s = s[2:cut], s[cut:]
    return _Parts(scheme, authority, s, query, fragment)


def remove_dot_segments(path: str) -> str:
    """RFC 3986 section 5.2.4. Absolute paths use an equivalent O(n) segment walk."""
    if "." not in path:
        return path
    if path.startswith("/"):
        if "/." not in path:  # every segment of an absolute path follows a "/": no dot segment here
            return path
    else:
        return _remove_dot_segments_literal(path)
    segs = path.split("/")
    out: list[str] = []
    last = len(segs) - 1
    for i in range(1, len(segs)):
        seg = segs[i]
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
            continue
        if i == last:  # a trailing "." or ".." leaves the path ending in "/"
            out.append("")
    return "/" + "/".join(out)


def _remove_dot_segments_literal(path: str) -> str:
    # The RFC's buffer algorithm verbatim; only reached for rootless paths (non-http URIs).
    inp, out = path, ""
    while inp:
        if inp.startswith("../"):
            inp = inp[3:]
        elif inp.startswith(("./", "/./")):
            inp = inp[2:]
        elif inp == "/.":
            inp = "/"
        elif inp.startswith("/../") or inp == "/..":
            inp = "/" + inp[4:]
            out = out[: max(out.rfind("/"), 0)]
        elif inp in (".", ".."):
            inp = ""
        else:
            cut = inp.find("/", 1)
            cut = len(inp) if cut < 0 else cut
            out, inp = out + inp[:cut], inp[cut:]
    return out


def _merge(base: _Parts, ref_path: str) -> str:
    if base.authority is not None and base.path == "":
        return "/" + ref_path
    return base.path[: base.path.rfind("/") + 1] + ref_path


def _resolve_parts(base: _Parts, r: _Parts) -> _Parts:
    # RFC 3986 section 5.2.2, strict (a reference with a scheme is never treated as relative).
    if r.scheme is not None:
        return _Parts(r.scheme, r.authority, remove_dot_segments(r.path), r.query, r.fragment)
    if r.authority is not None:
        return _Parts(base.scheme, r.authority, remove_dot_segments(r.path), r.query, r.fragment)
    if r.path == "":
        query = r.query if r.query is not None else base.query
        return _Parts(base.scheme, base.authority, base.path, query, r.fragment)
    path = r.path if r.path.startswith("/") else _merge(base, r.path)
    return _Parts(base.scheme, base.authority, remove_dot_segments(path), r.query, r.fragment)


def _recompose(p: _Parts) -> str:
    # RFC 3986 section 5.3
    out = []
    if p.scheme is not None:
        out.append(p.scheme + ":")
    if p.authority is not None:
        out.append("//" + p.authority)
    out.append(p.path)
    if p.query is not None:
        out.append("?" + p.query)
    if p.fragment is not None:
        out.append("#" + p.fragment)
    return "".join(out)


def resolve(base: str, ref: str) -> str:
    """Resolve reference ``ref`` against absolute URI ``base`` exactly as RFC 3986 section 5.2.

    No normalization beyond dot-segment removal. Raises ``UrlError("base")`` if ``base`` has no scheme.
    """
    if not isinstance(base, str) or not isinstance(ref, str):
        raise UrlError("type", "resolve() needs str arguments")
    b = _split(base)
    if b.scheme is None:
        raise UrlError("base", "base URI must be absolute")
    return _recompose(_resolve_parts(b, _split(ref)))


# --- percent-encoding -------------------------------------------------------------------------------

_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_PCHAR_CLASS = r"A-Za-z0-9\-._~!$&'()*+,;=:@"
_PATH_OK = re.compile(rf"[{_PCHAR_CLASS}/]*")
_QUERY_OK = re.compile(rf"[{_PCHAR_CLASS}/?]*")
_PATH_TOKEN = re.compile(rf"%([0-9A-Fa-f]{{2}})|([^{_PCHAR_CLASS}/]+)")
_QUERY_TOKEN = re.compile(rf"%([0-9A-Fa-f]{{2}})|([^{_PCHAR_CLASS}/?]+)")


def _pct_sub(m: re.Match[str]) -> str:
    hx = m.group(1)
    if hx is not None:
        ch = chr(int(hx, 16))
        return ch if ch in _UNRESERVED else "%" + hx.upper()
    # Illegal characters (space, quotes, non-ASCII, a lone '%', ...) become UTF-8 %XX.
    try:
        raw = m.group(2).encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates cannot be UTF-8
        raise UrlError("malformed", "invalid character") from exc
    return "".join(f"%{b:02X}" for b in raw)


def _normalize_pct(s: str, ok: re.Pattern[str], token: re.Pattern[str]) -> str:
    if ok.fullmatch(s) is not None:  # fast path: nothing to decode, nothing illegal
        return s
    return token.sub(_pct_sub, s)


# --- host ------------------------------------------------------------------------------------------

_LABEL_RE = re.compile(r"[a-z0-9_](?:[a-z0-9_\-]{0,61}[a-z0-9_])?")
# A last label that is a number makes browsers read the host as IPv4 (incl. hex/shorthand forms):
# such hosts are only accepted as canonical dotted-quad addresses.
_NUMERIC_LABEL_RE = re.compile(r"[0-9]+|0x[0-9a-f]*")


def _idna_encode(host: str) -> str:
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except Exception:  # idna raises several error types on hostile input; all mean "try per label"
        pass
    out = []
    for label in re.split(r"[.\u3002\uff0e\uff61]", host):
        if label.isascii():
            out.append(label)
            continue
        try:
            out.append(idna.encode(label, uts46=True).decode("ascii"))
        except Exception:
            try:
                out.append(label.encode("idna").decode("ascii"))
            except UnicodeError as exc:
                raise UrlError("host", "not an IDNA-encodable host") from exc
    return ".".join(out)


@functools.lru_cache(maxsize=65536)
def _normalize_host(raw: str) -> str:
    host = raw
    if "%" in host:
        try:
            host = unquote(host, encoding="utf-8", errors="strict")
        except UnicodeError as exc:
            raise UrlError("host", "bad percent-encoding in host") from exc
    if host.startswith("["):
        inner = host[1:-1]
        if not host.endswith("]") or "%" in inner or inner[:1] in ("v", "V"):
            raise UrlError("host", "unsupported IP literal")  # zone ids and IPvFuture
        try:
            return f"[{ipaddress.IPv6Address(inner).compressed}]"
        except ValueError as exc:
            raise UrlError("host", "invalid IPv6 literal") from exc
    if host.endswith("."):  # FQDN form: "example.com." is the same host
        host = host[:-1]
    if not host.isascii():
        host = _idna_encode(host)
    host = host.lower()
    if not host or len(host) > 253:
        raise UrlError("host", "empty or over-long host")
    labels = host.split(".")
    if _NUMERIC_LABEL_RE.fullmatch(labels[-1]):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError as exc:
            raise UrlError("host", "numeric host that is not a dotted-quad IPv4") from exc
    for label in labels:
        if _LABEL_RE.fullmatch(label) is None:
            raise UrlError("host", f"invalid host label {label[:64]!r}")
    return host


# --- normalize -------------------------------------------------------------------------------------

_DEFAULT_PORT = {"http": "80", "https": "443"}
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


def _split_authority(authority: str, scheme: str) -> tuple[str, str]:
    if "@" in authority:
        raise UrlError("userinfo", "credentials in URL")
    if authority.startswith("["):
        end = authority.find("]") + 1
        host, rest = (authority[:end], authority[end:]) if end else (authority, "")
        if rest and not rest.startswith(":"):
            raise UrlError("host", "garbage after IP literal")
        port = rest[1:]
    else:
        host, _, port = authority.partition(":")
    if not host:
        raise UrlError("host", "empty host")
    if port:
        if not (port.isascii() and port.isdigit()) or not 0 < int(port) <= 65535:
            raise UrlError("port", f"invalid port {port[:16]!r}")
        port = str(int(port))  # drop leading zeros
        if port == _DEFAULT_PORT[scheme]:
            port = ""
    return _normalize_host(host), port


def _normalize_query(query: str, config: NormalizerConfig) -> str:
    if _QUERY_OK.fullmatch(query) is None:
        query = _QUERY_TOKEN.sub(_pct_sub, query)
    return _filter_query(query, config)


def _filter_query(query: str, config: NormalizerConfig) -> str:
    """Drop empty and tracking/session parameters, then sort by key (``query`` is already escaped)."""
    params = query.split("&")
    if "" in params:
        params = [p for p in params if p]
    rx = config._query_strip_re
    if rx is not None and rx.search(query) is not None:
        strip, prefixes = config._strip_lower, config._prefixes_lower
        kept = []
        for p in params:
            low = p.partition("=")[0].lower()
            if low in strip or (prefixes and low.startswith(prefixes)):
                continue
            kept.append(p)
        params = kept
    if config.sort_query and len(params) > 1:
        # Sort by key only; list.sort is stable so repeated keys keep their (meaningful) order.
        params.sort(key=_param_key)
    return "&".join(params)


def _param_key(param: str) -> str:
    return param.partition("=")[0]


# Absolute http(s) URLs made only of characters that need no cleaning, decoding or escaping: no
# surrounding blanks/controls, no userinfo, IP literal or "%" in the authority, no "%" or ";" in the path,
# only legal characters in the query, anything but controls/space in the (dropped) fragment. For these,
# every step of the full path that is an identity is skipped; every other step calls the same helper.
# (The scheme is spelled out, not matched with (?i): Unicode case folding would accept "httpſ".)
_FAST_RE = re.compile(
    rf"([Hh][Tt][Tt][Pp][Ss]?)://([A-Za-z0-9._\-]+(?::[0-9]{{1,5}})?)"
    rf"(/[{_PCHAR_CLASS.replace(';', '')}/]*)?(?:\?([{_PCHAR_CLASS}/?]*))?(?:#[^\x00-\x20]*)?"
)


def normalize(url: str, base: str | None = None, config: NormalizerConfig = DEFAULT_CONFIG) -> str:
    """Canonical absolute http(s) URL for ``url`` (resolved against ``base`` if relative).

    Raises ``UrlError`` (reason: type/scheme/userinfo/host/port/too_long/malformed/base) for anything
    a crawler should not fetch or cannot spell canonically.
    """
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
        host, port = _split_authority(authority, scheme)
    else:
        host, port = _normalize_host(authority), ""
    query = _filter_query(query, config) if query else ""
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
    rf"([{_PCHAR_CLASS.replace(';', '').replace(':', '')}/]*)(?:\?([{_PCHAR_CLASS}/?]*))?(?:#[^\x00-\x20]*)?"
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
        host, port = _split_authority(authority, scheme)
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
    query = _filter_query(query, config) if query else ""
    out = f"{fb.origin}{path}?{query}" if query else f"{fb.origin}{path}"
    if len(out) > config.max_length:
        raise UrlError("too_long", f"{len(out)} > {config.max_length}")
    return out


@functools.lru_cache(maxsize=1024)  # the links of one page share their base
def _base_parts(base: str, max_length: int) -> _Parts:
    b = _split(_clean_input(base, max_length))
    if b.scheme is None:
        raise UrlError("base", "base URL must be absolute")
    return b


def _normalize_full(url: str, base: str | None, config: NormalizerConfig) -> str:
    """The general path of ``normalize``: every step, for any input."""
    url = _clean_input(url, config.max_length)
    parts = _split(url)
    if parts.scheme is None:
        if base is None:
            raise UrlError("scheme", "relative URL without base")
        if not isinstance(base, str):
            raise UrlError("type", f"expected str, got {type(base).__name__}")
        parts = _resolve_parts(_base_parts(base, config.max_length), parts)
    scheme = (parts.scheme or "").lower()
    if scheme not in _DEFAULT_PORT:
        raise UrlError("scheme", f"unsupported scheme {scheme[:16]!r}")
    if not parts.authority:
        raise UrlError("host", "no host")
    host, port = _split_authority(parts.authority, scheme)

    # RFC 3986 6.2.2 order: percent-encoding first (it may reveal "%2E" dots), then dot segments.
    # Session path params go before dot removal so stripping cannot leave a new "." segment behind.
    path = _normalize_pct(parts.path, _PATH_OK, _PATH_TOKEN)
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
    authority = _split(normalized_url).authority
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
    p = _split(url.strip(_STRIP_CHARS))
    if p.scheme is None or p.authority is None:
        raise UrlError("malformed", "not an absolute URL with a host")
    return normalize(f"{p.scheme}://{p.authority}/")[:-1]
