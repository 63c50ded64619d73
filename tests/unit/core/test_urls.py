"""Tests for streamcrawl_core.urls: RFC 3986 resolution, normalization policy, properties."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamcrawl_core.urls import (
    DEFAULT_CONFIG,
    NormalizerConfig,
    UrlError,
    _normalize_full,
    _remove_dot_segments_literal,
    host_of,
    normalize,
    origin_of,
    remove_dot_segments,
    resolve,
)

BASE = "http://a/b/c/d;p?q"

# RFC 3986 section 5.4.1
NORMAL = [
    ("g:h", "g:h"), ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"),
    ("/g", "http://a/g"), ("//g", "http://g"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"),
    ("#s", "http://a/b/c/d;p?q#s"), ("g#s", "http://a/b/c/g#s"), ("g?y#s", "http://a/b/c/g?y#s"),
    (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"), ("g;x?y#s", "http://a/b/c/g;x?y#s"),
    ("", "http://a/b/c/d;p?q"), (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"),
    ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"),
    ("../../g", "http://a/g"),
]  # fmt: skip

# RFC 3986 section 5.4.2 (strict parser for "http:g")
ABNORMAL = [
    ("../../../g", "http://a/g"), ("../../../../g", "http://a/g"), ("/./g", "http://a/g"),
    ("/../g", "http://a/g"), ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."),
    ("..g", "http://a/b/c/..g"), ("./../g", "http://a/b/g"), ("./g/.", "http://a/b/c/g/"),
    ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"), ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
    ("g;x=1/../y", "http://a/b/c/y"), ("g?y/./x", "http://a/b/c/g?y/./x"), ("g?y/../x", "http://a/b/c/g?y/../x"),
    ("g#s/./x", "http://a/b/c/g#s/./x"), ("g#s/../x", "http://a/b/c/g#s/../x"), ("http:g", "http:g"),
]  # fmt: skip


@pytest.mark.parametrize(("ref", "expected"), NORMAL + ABNORMAL)
def test_rfc3986_section_5_4_examples(ref: str, expected: str) -> None:
    assert resolve(BASE, ref) == expected


def test_resolve_rejects_relative_base_and_non_str() -> None:
    with pytest.raises(UrlError) as ei:
        resolve("/relative/base", "g")
    assert ei.value.reason == "base"
    with pytest.raises(UrlError) as ei:
        resolve(BASE, None)  # type: ignore[arg-type]
    assert ei.value.reason == "type"


def test_resolve_base_with_authority_and_empty_path() -> None:
    assert resolve("http://a", "g") == "http://a/g"
    assert resolve("http://a?x", "") == "http://a?x"


def test_rootless_dot_segments_follow_rfc_buffer_algorithm() -> None:
    # Non-hierarchical paths are rare but resolve() must still be the RFC algorithm.
    assert remove_dot_segments("a/../b") == "/b"
    assert remove_dot_segments("../a") == "a"
    assert remove_dot_segments("./a/.") == "a/"
    assert remove_dot_segments("..") == ""
    assert resolve("x:a/b", "../c") == "x:/c"  # the RFC algorithm really yields a rooted path here


@given(st.lists(st.sampled_from(["a", "b", ".", "..", "", "c.d", "..x"]), max_size=12))
def test_segment_walk_matches_literal_rfc_algorithm(segments: list[str]) -> None:
    path = "/" + "/".join(segments)
    assert remove_dot_segments(path) == _remove_dot_segments_literal(path)


_EXAMPLES = [
    ("HTTP://Example.com:80/a/./b?utm_source=x#top", "http://example.com/a/b"),
    ("http://EXAMPLE.com:80/", "http://example.com/"),
    ("https://example.com:443", "https://example.com/"),
    ("https://example.com:80/", "https://example.com:80/"),
    ("http://example.com:0080/x", "http://example.com/x"),
    ("http://example.com:/x", "http://example.com/x"),
    ("http://a.com/%7euser/%2f%41b?%3d=1", "http://a.com/~user/%2FAb?%3D=1"),
    ("http://a.com/%7Ea/%2e%2E/b", "http://a.com/b"),
    ("http://a.com/a b/ä?q=ü x", "http://a.com/a%20b/%C3%A4?q=%C3%BC%20x"),
    ("http://a.com/100%", "http://a.com/100%25"),
    ('http://a.com/"<>\\^`{|}', "http://a.com/%22%3C%3E%5C%5E%60%7B%7C%7D"),
    ("http://a.com/x;jsessionid=ABC123?sid=9&z=2", "http://a.com/x?z=2"),
    ("http://a.com/x;JSESSIONID=1;v=2/y", "http://a.com/x;v=2/y"),
    ("http://a.com/?b=2&a=1&fbclid=z&UTM_Campaign=c&GCLID=q", "http://a.com/?a=1&b=2"),
    ("http://a.com/p?a=2&c=0&a=1&b", "http://a.com/p?a=2&a=1&b&c=0"),
    ("http://a.com/?&&a=1&", "http://a.com/?a=1"),
    ("http://a.com/?", "http://a.com/"),
    ("http://a.com/?utm_source=x", "http://a.com/"),
    ("http://a.com/q?x=a+b&y=%20", "http://a.com/q?x=a+b&y=%20"),
    ("http://a.com/?next=/a?b", "http://a.com/?next=/a?b"),
    ("  http://a.com/\n  x\t ", "http://a.com/%20%20x"),
    ("http://bücher.DE/", "http://xn--bcher-kva.de/"),
    ("http://faß.de/", "http://xn--fa-hia.de/"),
    ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/"),
    ("http://a_b.例え.jp/", "http://a_b.xn--r8jz45g.jp/"),
    ("http://exa%6Dple.com/", "http://example.com/"),
    ("http://example.com./a", "http://example.com/a"),
    ("http://[2001:DB8:0::1]:8080/a", "http://[2001:db8::1]:8080/a"),
    ("http://192.168.0.1:80/", "http://192.168.0.1/"),
    ("http://a_b.example.com/", "http://a_b.example.com/"),
]


@pytest.mark.parametrize(("raw", "expected"), _EXAMPLES)
def test_normalize_examples(raw: str, expected: str) -> None:
    assert normalize(raw) == expected
    assert normalize(expected) == expected


@pytest.mark.parametrize(
    ("ref", "base", "expected"),
    [
        ("../shop?b=2&a=1&utm_source=x#top", "https://Example.com/blog/", "https://example.com/shop?a=1&b=2"),
        ("/index.html", "http://EXAMPLE.com:80/", "http://example.com/index.html"),
        ("//cdn.Example.com/x", "https://example.com/a", "https://cdn.example.com/x"),
        ("?page=2", "http://a.com/list?page=1", "http://a.com/list?page=2"),
        ("#frag", "http://a.com/list?page=1", "http://a.com/list?page=1"),
        ("HTTPS://other.org", "http://a.com/", "https://other.org/"),
    ],
)
def test_normalize_relative(ref: str, base: str, expected: str) -> None:
    assert normalize(ref, base) == expected


_REJECTS = [
    ("ftp://a.com/", "scheme"),
    ("mailto:x@a.com", "scheme"),
    ("javascript:alert(1)", "scheme"),
    ("//a.com/x", "scheme"),
    ("/just/a/path", "scheme"),
    ("http://user:pw@a.com/", "userinfo"),
    ("http://@a.com/", "userinfo"),
    ("http:///x", "host"),
    ("http:g", "host"),
    ("http://:80/", "host"),
    ("http://a..com/", "host"),
    ("http://-a.com/", "host"),
    ("http://a b.com/", "host"),
    ("http://a.com:99999/", "port"),
    ("http://a.com:0/", "port"),
    ("http://a.com:8o/", "port"),
    ("http://0x7f.1/", "host"),
    ("http://2130706433/", "host"),
    ("http://01.2.3.4/", "host"),
    ("http://1.2.3/", "host"),
    ("http://[::1/", "host"),
    ("http://[::1]x/", "host"),
    ("http://[fe80::1%25eth0]/", "host"),
    ("http://[v1.x]/", "host"),
    ("http://[zz::1]/", "host"),
    ("http://%ff.com/", "host"),
    ("http://" + "a" * 64 + ".com/", "host"),
    ("http://" + ("a" * 60 + ".") * 5 + "com/", "host"),
    ("http://a.com/" + "x" * 3000, "too_long"),
    ("http://a.com/?" + "x" * 40000, "too_long"),
    ("http://a.com/\ud800", "malformed"),
    ("http://\u2028.com/", "host"),
]


@pytest.mark.parametrize(("raw", "reason"), _REJECTS)
def test_normalize_rejects(raw: str, reason: str) -> None:
    with pytest.raises(UrlError) as ei:
        normalize(raw)
    assert ei.value.reason == reason
    assert isinstance(ei.value, ValueError)


def test_normalize_bad_types_and_bad_base() -> None:
    with pytest.raises(UrlError) as ei:
        normalize(b"http://a.com/")  # type: ignore[arg-type]
    assert ei.value.reason == "type"
    with pytest.raises(UrlError) as ei:
        normalize("g", "relative/base")
    assert ei.value.reason == "base"


def test_config_knobs() -> None:
    keep_order = NormalizerConfig(sort_query=False)
    assert normalize("http://a.com/?b=1&a=2&utm_x=1", config=keep_order) == "http://a.com/?b=1&a=2"
    nothing_stripped = NormalizerConfig(strip_params=frozenset(), strip_param_prefixes=())
    assert (
        normalize("http://a.com/x;jsessionid=1?utm_a=1&sid=2", config=nothing_stripped)
        == "http://a.com/x;jsessionid=1?sid=2&utm_a=1"
    )
    custom = NormalizerConfig(strip_params=frozenset({"Ref"}), max_length=30)
    assert normalize("http://a.com/?ref=1&REF=2&x=1", config=custom) == "http://a.com/?x=1"
    with pytest.raises(UrlError):
        normalize("http://a.com/" + "x" * 20, config=custom)
    with pytest.raises(ValueError):
        NormalizerConfig(max_length=3)
    assert "fbclid" in DEFAULT_CONFIG.strip_params


def test_host_and_origin() -> None:
    assert host_of("http://Example.com:8080/x") == "example.com"
    assert host_of("http://[2001:db8::1]:81/") == "[2001:db8::1]"
    assert host_of("http://u@h.com/") == "h.com"
    assert origin_of("HTTPS://Example.COM:443/path?q#f") == "https://example.com"
    assert origin_of("http://example.com:8080/a") == "http://example.com:8080"
    for bad, fn in [("/x", host_of), ("http://[::1/", host_of), ("http://:80/", host_of), ("x", origin_of)]:
        with pytest.raises(UrlError):
            fn(bad)
    with pytest.raises(UrlError):
        host_of(1)  # type: ignore[arg-type]
    with pytest.raises(UrlError):
        origin_of(None)  # type: ignore[arg-type]
    with pytest.raises(UrlError) as ei:
        origin_of("http://u:p@a.com/")
    assert ei.value.reason == "userinfo"


# --- properties ------------------------------------------------------------------------------------

_host = st.from_regex(r"[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,8}[a-zA-Z0-9])?(?:\.[a-zA-Z]{2,5}){1,2}", fullmatch=True)
_unicode_host = st.sampled_from(["bücher.de", "例え.jp", "ÉCOLE.fr", "[::FFFF:1.2.3.4]", "10.0.0.1", "faß.de"])
_chunk = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
_piece = st.one_of(
    _chunk,
    st.sampled_from(["/", ".", "..", "%", "%2e", "%41", "%7e", "%zz", ";jsessionid=1", "?", "#", "&", "="]),
    st.sampled_from(["utm_source=a", "sid=1", "a=1", "b=", "%3D", "+", " ", "é", "\n", ":"]),
)
_url = st.builds(
    lambda scheme, host, port, rest: f"{scheme}://{host}{port}{''.join(rest)}",
    st.sampled_from(["http", "https", "HTTP", "hTTps"]),
    st.one_of(_host, _unicode_host),
    st.sampled_from(["", ":80", ":443", ":8080", ":"]),
    st.lists(_piece, max_size=12),
)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(_url)
def test_normalize_is_idempotent(url: str) -> None:
    try:
        once = normalize(url)
    except UrlError:
        return
    assert normalize(once) == once
    assert once.isascii()
    assert "#" not in once
    assert host_of(once) == host_of(normalize(once))


@settings(max_examples=300)
@given(st.lists(_piece, max_size=10), _url)
def test_relative_resolution_is_idempotent(parts: list[str], base: str) -> None:
    try:
        once = normalize("".join(parts), base)
    except UrlError:
        return
    assert normalize(once) == once


@settings(max_examples=800)
@given(st.text(), st.one_of(st.none(), st.text(), _url))
def test_fuzz_only_url_error(text: str, base: str | None) -> None:
    try:
        out = normalize(text, base)
    except UrlError as exc:
        assert isinstance(exc.reason, str) and exc.reason
    else:
        assert out.startswith(("http://", "https://"))
    for fn in (host_of, origin_of):
        with contextlib.suppress(UrlError):
            fn(text)


# --- the fast path of normalize() must be invisible -------------------------------------------------


def _outcome(url: object, base: str | None, config: NormalizerConfig, full: bool) -> tuple[str, str]:
    try:
        if full:
            return ("ok", _normalize_full(url, base, config))  # type: ignore[arg-type]
        return ("ok", normalize(url, base, config))  # type: ignore[arg-type]
    except UrlError as exc:
        return ("error", exc.reason)


_CONFIGS = [
    DEFAULT_CONFIG,
    NormalizerConfig(strip_params=frozenset({"page", "ID"}), strip_param_prefixes=(), sort_query=False, max_length=40),
    # odd knobs for the query pre-filter: non-ASCII, empty and "="-containing names, regex metacharacters
    NormalizerConfig(strip_params=frozenset({"\u017fid", "", "a=b", "\u212a", "x.*"}), strip_param_prefixes=("q+",)),
    NormalizerConfig(strip_params=frozenset(), strip_param_prefixes=("",)),
]


def _assert_same(url: object, base: str | None = None) -> None:
    for config in _CONFIGS:
        assert _outcome(url, base, config, False) == _outcome(url, base, config, True), (url, base, config)


_FAST_CORPUS = [
    "http://a.com", "http://a.com/", "HTTPS://A.COM:443/x/../y/./z?b=1&a=2#f", "http://a.com:8080/?",
    "http://a.com:/x", "http://a.com:00080/x", "http://a.com:0/", "http://a.com:65536/", "http://a.com:65535",
    "http://a.com./x", "http://a..com/", "http://.a.com/", "http://a.com../", "http://1.2.3.4:80/", "http://1.2.3/",
    "http://0x7f.1/", "http://A_B.com/x?", "http://a.com/.hidden/..x/.", "http://a.com/a/..", "http://a.com//x//",
    "http://a.com/?utm_x=1&sid=2", "http://a.com/?&", "http://a.com/p?a=1#", "http://a.com/p#frag#frag2",
    "http://a.com/p#\u00e9", "http://a.com/p?q#x y", "http://a.com/p?q=#\t", "http://a.com/p?" + "q" * 2100,
    "http://a.com/" + "p" * 2030, "http://a.com/#" + "f" * 40000, "http://a.com/x;y", "http://a.com/x?y;z",
    "http://a.com/x?y%41", "http://" + "a" * 63 + ".com/", "http://" + "a" * 64 + ".com/", "http://-a.com/",
    "http://a-.com/", "http://a.com ", " http://a.com", "http://a.com/\x7f", "http://a.com/x?y=\x7f",
    "hTtP://a.COM/A?B=C", "https://a.com:443", "http://a.com:443/", "http://a.com:-1/", "http://a.com:+80/",
    "http://a.com:8o/", "http:/a.com/", "http:a.com", "httpx://a.com/", "http://a.com/?next=/a?b#c",
    "http\u017f://a.com/", "HTTP\u017f://a.com/", "http://\u212a.com/", "http://a.com/\u017f", "http://a.com/?\u212a",
]  # fmt: skip


_FAST_BASES = [
    "http://a/b/c/d?q", "HTTPS://A.com:443", "http://a.com", "http://a.com?x=1", "http://a.com/?b=2&a=1#f",
    "http://a.com:8080/x/y/", "http://a.com/x/./y/../z", "http://a..com/x", "http://a.com:99999/", "http://a.com:0",
    "http://1.2.3/x", "http://a.com/x;y/z", "http://a.com/%41/b", " http://a.com/x", "http://a.com/" + "p" * 2040,
]  # fmt: skip
_FAST_REFS = [
    "", "#", "#f", "?", "?y=1", "?utm_source=z&b=2&a=1", "g", "g/", "./g", "../g", "../../../../g", "/g", "/./g",
    "//g", "//g/x", "g?y#s", ".", "..", "./", "../", "g.", ".g", "a:b", "./a:b", "a/b:c", "g;x", "g%41", "g h",
    "g\t", "/" + "x" * 2100, "?" + "q" * 2100, "?sid=1", "x?a:b", "/x?next=/a?b", "\u017f", "?\u212a=1",
]  # fmt: skip


def test_fast_path_matches_full_path_on_corpora() -> None:
    for raw, _ in _EXAMPLES:
        _assert_same(raw)
    for raw, _ in _REJECTS:
        _assert_same(raw)
    for url in _FAST_CORPUS:
        _assert_same(url)
    for ref, _ in NORMAL + ABNORMAL:
        _assert_same(ref, "http://a/b/c/d;p?q")
        _assert_same("http://a/b/c/" + ref)
        for base in _FAST_BASES:
            _assert_same(ref, base)
    for ref in _FAST_REFS:
        for base in _FAST_BASES:
            _assert_same(ref, base)
    for bad in (None, 1, b"http://a.com/"):
        _assert_same(bad)


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(_url)
def test_fast_path_matches_full_path_on_generated_urls(url: str) -> None:
    _assert_same(url)


_fast_shaped = st.builds(
    lambda scheme, host, port, path, query, frag: f"{scheme}://{host}{port}{path}{query}{frag}",
    st.sampled_from(["http", "https", "HTTP", "hTTps"]),
    st.from_regex(r"[a-zA-Z0-9._\-]{1,20}", fullmatch=True),
    st.sampled_from(["", ":80", ":443", ":8080", ":0", ":99999", ":00080"]),
    st.one_of(st.just(""), st.from_regex(r"/[a-zA-Z0-9\-._~!$&'()*+,=:@/]{0,30}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"\?[a-zA-Z0-9\-._~!$&'()*+,;=:@/?]{0,30}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"#[^\x00-\x20]{0,10}", fullmatch=True)),
)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_fast_shaped)
def test_fast_path_matches_full_path_on_fast_shaped_urls(url: str) -> None:
    _assert_same(url)


@settings(max_examples=300)
@given(st.text(), st.one_of(st.none(), _url))
def test_fast_path_matches_full_path_on_any_text(text: str, base: str | None) -> None:
    _assert_same(text, base)


_fast_base = st.builds(
    lambda scheme, host, port, path, query: f"{scheme}://{host}{port}{path}{query}",
    st.sampled_from(["http", "https", "HTTP"]),
    st.from_regex(r"[a-zA-Z0-9._\-]{1,12}", fullmatch=True),
    st.sampled_from(["", ":80", ":443", ":8080", ":0"]),
    st.one_of(st.just(""), st.from_regex(r"/[a-zA-Z0-9._~!$&'()*+,=:@/\-]{0,20}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"\?[a-zA-Z0-9._~!$&'()*+,;=:@/?\-]{0,12}", fullmatch=True)),
)
_fast_ref = st.one_of(
    st.from_regex(r"[a-zA-Z0-9._~!$&'()*+,=@/\-]{0,20}(\?[a-zA-Z0-9._=&;:/?\-]{0,12})?(#[a-z]{0,3})?", fullmatch=True),
    st.lists(st.sampled_from(["/", ".", "..", "a", "b.c", "?", "&", "=", "#", ":", ";", "%41", "//"]), max_size=8).map(
        "".join
    ),
)


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_fast_ref, _fast_base)
def test_fast_relative_path_matches_full_path(ref: str, base: str) -> None:
    _assert_same(ref, base)
