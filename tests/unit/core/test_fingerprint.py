"""Tests for streamcrawl_core.fingerprint (URL fingerprints, content hashes, registered domains)."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import mmh3
import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcrawl_core import fingerprint
from streamcrawl_core.fingerprint import content_hash, public_suffix, registered_domain, url_fingerprint


def test_url_fingerprint_is_signed_int64_of_mmh3_x64_128() -> None:
    url = "http://example.com/"
    fp = url_fingerprint(url)
    unsigned = mmh3.hash64(url.encode(), signed=False)[0]
    assert fp == (unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned)
    assert url_fingerprint("http://example.com/a") != fp


@given(st.text())
def test_url_fingerprint_fits_bigint(url: str) -> None:
    fp = url_fingerprint(url)
    assert -(1 << 63) <= fp < (1 << 63)
    assert url_fingerprint(url) == fp


def test_url_fingerprint_rejects_non_str() -> None:
    with pytest.raises(TypeError):
        url_fingerprint(b"http://a/")  # type: ignore[arg-type]


def test_content_hash() -> None:
    assert content_hash(b"") == hashlib.sha256(b"").hexdigest()
    assert content_hash(bytearray(b"abc")) == hashlib.sha256(b"abc").hexdigest()
    assert len(content_hash(memoryview(b"x"))) == 64
    with pytest.raises(TypeError):
        content_hash("abc")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("www.example.co.uk", "example.co.uk"),
        ("WWW.Example.COM.", "example.com"),
        ("a.b.c.example.com", "example.com"),
        ("h0001.synth.test", "synth.test"),
        ("synth.test", "synth.test"),
        ("localhost", "localhost"),
        ("co.uk", "co.uk"),
        ("192.168.1.1", "192.168.1.1"),
        ("[2001:db8::1]", "[2001:db8::1]"),
        ("2001:db8::1", "2001:db8::1"),
        ("a.b.github.io", "github.io"),
        ("www.city.kawasaki.jp", "city.kawasaki.jp"),  # exception rule !city.kawasaki.jp
        ("x.y.kawasaki.jp", "x.y.kawasaki.jp"),  # wildcard rule *.kawasaki.jp
        ("bücher.de", "xn--bcher-kva.de"),
        ("a.b.公司.cn", "b.xn--55qx5d.cn"),
        ("", ""),
        (".com", ".com"),
    ],
)
def test_registered_domain(host: str, expected: str) -> None:
    assert registered_domain(host) == expected


def test_private_domains_are_opt_in() -> None:
    assert registered_domain("alice.github.io", include_private=True) == "alice.github.io"
    assert public_suffix("alice.github.io", include_private=True) == "github.io"
    assert public_suffix("alice.github.io") == "io"
    assert public_suffix("10.0.0.1") == ""


def test_type_errors() -> None:
    for fn in (registered_domain, public_suffix):
        with pytest.raises(TypeError):
            fn(None)  # type: ignore[arg-type]


def test_unencodable_unicode_host_is_kept_not_raised() -> None:
    # A label too long for IDNA cannot be encoded; the function still returns a defined value.
    host = "ü" * 70 + ".de"
    assert registered_domain(host) == host


def test_agrees_with_tldextract_offline_snapshot() -> None:
    tldextract = pytest.importorskip("tldextract")
    ext = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    assert ext.suffix_list_urls == ()  # never fetched from the network
    hosts = [
        "www.bbc.co.uk", "news.google.com", "a.b.c.d.blogspot.com", "www.parliament.uk", "x.sch.uk",
        "shop.example.com.au", "foo.bar.s3.amazonaws.com", "xn--bcher-kva.de", "www.gov.br", "m.k12.ca.us",
        "t.co", "www.ck", "a.b.ck", "city.kobe.jp", "www.city.kobe.jp", "foo.appspot.com", "ex.ample.ac.jp",
    ]  # fmt: skip
    for host in hosts:
        r = ext(host)
        expected = f"{r.domain}.{r.suffix}" if r.domain and r.suffix else host
        assert registered_domain(host) == expected, host


def test_no_network_or_io_client_imported() -> None:
    # Pure-core rule: importing and using these modules must not pull in sockets or HTTP clients, and
    # must work with the network unreachable (the PSL is read from the vendored file).
    code = (
        "import socket\n"
        "def _no_net(*a, **k):\n    raise OSError('network disabled in test')\n"
        "socket.socket = _no_net; socket.create_connection = _no_net; socket.getaddrinfo = _no_net\n"
        "import sys\n"
        "import streamcrawl_core.fingerprint as f, streamcrawl_core.urls as u, streamcrawl_core.partition\n"
        "import streamcrawl_core.bloom, streamcrawl_core.simhash\n"
        "assert f.registered_domain('www.example.co.uk') == 'example.co.uk'\n"
        "bad = [m for m in ('requests', 'urllib3', 'http.client', 'ssl', 'tldextract', 'aiohttp', 'httpx') "
        "if m in sys.modules]\n"
        "assert not bad, bad\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_psl_snapshot_is_vendored() -> None:
    text = fingerprint.PSL_PATH.read_text(encoding="utf-8")
    assert "===BEGIN ICANN DOMAINS===" in text and "===BEGIN PRIVATE DOMAINS===" in text
