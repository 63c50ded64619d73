"""The compiled hot paths (``streamcrawl_native``) against the pure-Python code they replace.

Every case runs both paths in one process: the extension as loaded by ``streamcrawl_core._native``, and
the pure code with the extension switched off (a config without its native normalizer, the modules'
``_nat`` set to None). They must agree on every input, including hypothesis-generated ones; where the
extension declines a case (returns None) the pure code answers, which is checked too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import shutil
import sys
import types
import warnings
from collections.abc import Iterator

import mmh3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from streamcrawl_core import _native, bloom, simhash
from streamcrawl_core.bloom import BloomFilter
from streamcrawl_core.urls import DEFAULT_CONFIG, NormalizerConfig, UrlError, normalize

from tests.unit.core.test_urls import (
    _CONFIGS,
    _EXAMPLES,
    _FAST_BASES,
    _FAST_CORPUS,
    _FAST_REFS,
    _REJECTS,
    ABNORMAL,
    NORMAL,
    _fast_base,
    _fast_ref,
    _fast_shaped,
    _url,
)

NATIVE = _native.NATIVE
needs_native = pytest.mark.skipif(NATIVE is None, reason="streamcrawl_native is not built (no Rust toolchain)")


def test_extension_is_built_where_a_toolchain_is() -> None:
    # make venv builds the extension whenever cargo is on PATH; a silently failed build would otherwise
    # only show up as every test below being skipped.
    if shutil.which("cargo") is None:
        pytest.skip("no cargo on PATH: the pure-Python fallback is the expected state")
    assert NATIVE is not None, "cargo is installed but streamcrawl_native is not: run `make venv`"


def test_stale_extension_is_ignored_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("streamcrawl_native")
    fake.API_VERSION = _native.API_VERSION + 1  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "streamcrawl_native", fake)
    with pytest.warns(RuntimeWarning, match="API version"):
        assert _native._load() is None
    monkeypatch.setitem(sys.modules, "streamcrawl_native", None)  # import fails: silently pure
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _native._load() is None


# --- MurmurHash3 -----------------------------------------------------------------------------------


def _mmh3_128(data: bytes) -> tuple[int, int]:
    digest = mmh3.hash_bytes(data)  # x64-128, seed 0: h1 then h2, little-endian
    return int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")


@needs_native
@settings(max_examples=500)
@given(st.binary(max_size=80))
def test_murmur3_matches_mmh3(data: bytes) -> None:
    assert NATIVE is not None
    assert NATIVE.murmur3_128(data) == _mmh3_128(data)


@needs_native
def test_murmur3_every_tail_length() -> None:
    assert NATIVE is not None
    data = bytes(range(256)) * 2
    for n in range(70):
        assert NATIVE.murmur3_128(data[:n]) == _mmh3_128(data[:n]), n


# --- normalize -------------------------------------------------------------------------------------


def _pure(config: NormalizerConfig) -> NormalizerConfig:
    copy = dataclasses.replace(config)
    object.__setattr__(copy, "_native", None)
    return copy


_PURE = {id(c): _pure(c) for c in _CONFIGS}


def _outcome(url: object, base: object, config: NormalizerConfig) -> tuple[str, str]:
    try:
        return ("ok", normalize(url, base, config))  # type: ignore[arg-type]
    except UrlError as exc:
        return ("error", exc.reason)


def _check(url: object, base: object = None) -> None:
    for config in _CONFIGS:
        pure = _outcome(url, base, _PURE[id(config)])
        assert _outcome(url, base, config) == pure, (url, base, config)
        if config._native is not None:
            native = config._native.normalize(url, base)
            assert native is None or ("ok", native) == pure, (url, base, config, native)


@needs_native
def test_normalize_corpora_agree() -> None:
    for raw, _ in _EXAMPLES + _REJECTS:
        _check(raw)
    for url in _FAST_CORPUS:
        _check(url)
        _check(url, 1)  # a non-str base is ignored by an absolute URL
    for ref, _ in NORMAL + ABNORMAL:
        for base in [*_FAST_BASES, "http://a/b/c/d;p?q"]:
            _check(ref, base)
    for ref in _FAST_REFS:
        for base in _FAST_BASES:
            _check(ref, base)
    # Sorting must be stable: repeated keys keep their order (a short list would not show it).
    rnd = random.Random(5)
    params = [f"{rnd.choice('abcd')}={i}" for i in range(200)]
    _check("http://a.com/?" + "&".join(params))
    _check("?" + "&".join(params), "http://a.com/x")
    for bad in (None, 1, b"http://a.com/", "http://a.com/\ud800", "http://a.com/#\ud800"):
        _check(bad)
        _check("g", bad)
    _check("x", "http://a.com/\udcff")


@needs_native
def test_native_normalizer_handles_the_common_shapes() -> None:
    # Not vacuous: the usual absolute and relative links must take the compiled path.
    nn = DEFAULT_CONFIG._native
    assert nn is not None
    handled = [
        ("HTTPS://Example.COM:443/a/./b/../c?b=2&a=1&utm_source=x&sid=1#top", None),
        ("http://h0001.synth.test/section/3/article-9.html?page=2", None),
        ("http://1.2.3.4:8080/x", None),
        ("../c/d.html", "https://h1.synth.test/a/b/index.html"),
        ("/x?y=1", "https://h1.synth.test/a/b/index.html"),
        ("e.html#f", "https://h1.synth.test/a/b/index.html"),
        ("?page=3", "http://a.com/list?page=1"),
    ]
    for url, base in handled:
        out = nn.normalize(url, base)
        assert out is not None, (url, base)
        assert out == normalize(url, base, _pure(DEFAULT_CONFIG))
    # ... and what the Python code must decide is left to it.
    for url in ("http://a.com/%41", "http://user@a.com/", "http://0x7f.1/", "http://bücher.de/", " http://a.com/"):
        assert nn.normalize(url) is None, url


@needs_native
@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_fast_shaped)
def test_normalize_fast_shaped_agree(url: str) -> None:
    _check(url)


@needs_native
@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(_url)
def test_normalize_generated_urls_agree(url: str) -> None:
    _check(url)


@needs_native
@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(_fast_ref, _fast_base)
def test_normalize_relative_agree(ref: str, base: str) -> None:
    _check(ref, base)


@needs_native
@settings(max_examples=500)
@given(st.text(), st.one_of(st.none(), st.text(), _fast_base))
def test_normalize_any_text_agrees(text: str, base: str | None) -> None:
    _check(text, base)


@needs_native
@settings(max_examples=300)
@given(
    st.frozensets(st.from_regex(r"[A-Za-z_]{0,4}", fullmatch=True), max_size=4),
    st.lists(st.from_regex(r"[A-Za-z_]{0,3}", fullmatch=True), max_size=2),
    st.booleans(),
    st.integers(16, 80),
    _fast_shaped,
)
def test_normalize_random_configs_agree(
    strip: frozenset[str], prefixes: list[str], sort_query: bool, max_length: int, url: str
) -> None:
    config = NormalizerConfig(strip, tuple(prefixes), sort_query, max_length)
    assert _outcome(url, None, config) == _outcome(url, None, _pure(config))


# --- SimHash ---------------------------------------------------------------------------------------


@pytest.fixture
def pure_simhash(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(simhash, "_nat", None)
    yield


def _both_simhash(text: str, shingle: int, ignore_numbers: bool) -> tuple[int, int]:
    native = simhash.simhash(text, shingle, ignore_numbers=ignore_numbers)
    return native, simhash._simhash_pure(text, shingle, ignore_numbers)


# Characters where Unicode and ASCII rules differ: dotted I (lowercases to two code points), sharp s,
# the Kelvin sign (lowercases to ASCII k), superscript two (isdigit but not isdecimal), one half
# (numeric but not a digit), a combining accent (not alnum: splits a token), Arabic-Indic and
# full-width digits, CJK, an emoji, no-break and ideographic spaces, curly quotes.
_TRICKY = "İßKk²½e\u0301٣٤５６中文😀\u00a0\u3000’“_-"
_word = st.text(alphabet=st.sampled_from("abcXYZ019_" + _TRICKY), min_size=1, max_size=6)


@needs_native
@settings(max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(st.text(max_size=300), st.lists(_word, max_size=60).map(" ".join)),
    st.integers(1, 5),
    st.booleans(),
)
def test_simhash_agrees_on_any_text(text: str, shingle: int, ignore_numbers: bool) -> None:
    native, pure = _both_simhash(text, shingle, ignore_numbers)
    assert native == pure


@needs_native
def test_simhash_agrees_on_pages() -> None:
    rnd = random.Random(7)
    vocab = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(1, 12))) for _ in range(900)]
    vocab += ["2024", "10:30", "A1", "x_y", "ÉCOLE", "naïve", "日本", "٣", "İstanbul", "Straße"]
    for size in (50, 2_999, 3_000, 20_000, 60_000):
        words = [rnd.choice(vocab) for _ in range(size // 6)]
        ascii_page = " ".join(w for w in words if w.isascii())
        mixed_page = " \n".join(words)
        for text in (ascii_page, mixed_page, ascii_page.upper(), mixed_page.replace(" ", "\u00a0")):
            for shingle in (1, 3, 4):
                native, pure = _both_simhash(text, shingle, True)
                assert native == pure, (size, shingle)
    assert _both_simhash(ascii_page, 3, False)[0] == _both_simhash(ascii_page, 3, False)[1]


@needs_native
def test_simhash_edge_cases_agree() -> None:
    for text in ("", " ", "123 456", "a", "a b", "a_b", "__", "ß", "İ", "\ud800 lone surrogate", "x" * 5000):
        for shingle in (1, 2, 3, 10, 2**40, 2**64 - 1, 2**64):
            native, pure = _both_simhash(text, shingle, True)
            assert native == pure, (text[:20], shingle)


def test_simhash_fallback_gives_the_known_values(pure_simhash: None) -> None:
    # The pure path alone (as on a machine without the toolchain) against the textbook reference.
    from tests.unit.core.test_simhash import _reference

    rnd = random.Random(3)
    page = " ".join(rnd.choice(["alpha", "beta", "gamma", "delta", "42", "Épée"]) for _ in range(4000))
    assert simhash._nat is None
    assert simhash.simhash(page) == _reference(page)
    ascii_page = page.encode("ascii", "ignore").decode()
    assert simhash.simhash(ascii_page) == _reference(ascii_page)


# --- Bloom -----------------------------------------------------------------------------------------


def _pure_bloom(monkeypatch: pytest.MonkeyPatch, fn, *args):  # type: ignore[no-untyped-def]
    with monkeypatch.context() as m:
        m.setattr(bloom, "_nat", None)
        return fn(*args)


_int64ish = st.one_of(
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([0, -1, 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1]),
    st.integers(-5, 5),
)


@needs_native
@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_int64ish, max_size=200), st.lists(_int64ish, max_size=200), st.integers(1, 500))
def test_bloom_add_and_contains_agree(
    monkeypatch: pytest.MonkeyPatch, added: list[int], probed: list[int], capacity: int
) -> None:
    fast, slow = BloomFilter(capacity, 0.05), BloomFilter(capacity, 0.05)
    assert fast.add_many(added) == _pure_bloom(monkeypatch, slow.add_many, added)
    assert fast.to_bytes() == slow.to_bytes()
    assert fast.contains_many(probed) == _pure_bloom(monkeypatch, slow.contains_many, probed)
    assert fast.contains_many(tuple(probed)) == _pure_bloom(monkeypatch, slow.contains_many, tuple(probed))
    for x in probed[:20]:
        assert (x in fast) == _pure_bloom(monkeypatch, slow.__contains__, x)
        assert fast.add(x) == _pure_bloom(monkeypatch, slow.add, x)
    assert fast.to_bytes() == slow.to_bytes()
    assert len(fast) == len(slow)


@needs_native
def test_bloom_large_batches_and_old_snapshots(monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(11)
    items = [rnd.getrandbits(64) - (1 << 63) for _ in range(60_000)] + [rnd.getrandbits(64) for _ in range(20_000)]
    items += items[:500]  # duplicates within the batch
    old = BloomFilter(50_000, 0.01)
    flags_pure = _pure_bloom(monkeypatch, old.add_many, items)
    snapshot = old.to_bytes()  # as the pure code (and every earlier version) wrote it
    new = BloomFilter(50_000, 0.01)
    assert new.add_many(items) == flags_pure
    assert new.to_bytes() == snapshot
    restored = BloomFilter.from_bytes(snapshot)
    probes = items[::7] + [rnd.getrandbits(64) for _ in range(30_000)]
    assert restored.contains_many(probes) == _pure_bloom(monkeypatch, old.contains_many, probes)


def test_bloom_snapshot_format_vector(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pins the stored layout (S3 snapshots): the digest was computed with the code before the extension
    # (main at the time); the same bytes must come out with and without it.
    digests = set()
    for nat in (bloom._nat, None):
        with monkeypatch.context() as m:
            m.setattr(bloom, "_nat", nat)
            bf = BloomFilter(1000, 0.01)
            bf.add_many([*range(-300, 300), 2**64 - 1, 2**63])
            bf.add(b"bytes item")
            digests.add(hashlib.sha256(bf.to_bytes()).hexdigest())
    assert digests == {"9052d5d2c887859d5388a7e6e7e91ea6886d2cf774f3269d5ae6cf5433a77285"}


@needs_native
def test_bloom_declined_batches_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    fast, slow = BloomFilter(100, 0.01), BloomFilter(100, 0.01)
    mixed = [1, b"x", bytearray(b"y"), 2**63, -5]
    assert fast.add_many(mixed) == _pure_bloom(monkeypatch, slow.add_many, mixed)
    assert fast.to_bytes() == slow.to_bytes()
    for bad in ([1, 2**64], [1, -(2**63) - 1], [1, True], [1, 2.0]):
        with pytest.raises((ValueError, TypeError)) as fast_err:
            fast.add_many(bad)
        with pytest.raises((ValueError, TypeError)) as slow_err:
            _pure_bloom(monkeypatch, slow.add_many, bad)
        assert type(fast_err.value) is type(slow_err.value) and str(fast_err.value) == str(slow_err.value)
    assert fast.to_bytes() == slow.to_bytes()  # nothing inserted by a rejected batch
    assert NATIVE is not None
    assert NATIVE.bloom_contains(fast._bits, fast.m + 8, fast.k, [1]) is None  # inconsistent size: declined


# --- purity: the extension and the modules split from urls.py do no I/O ----------------------------


@pytest.mark.parametrize("module", ["_native", "url_policy", "rfc3986", "url_host", "urls", "bloom", "simhash"])
def test_core_modules_import_no_io_library(module: str) -> None:
    import ast
    import importlib.util

    spec = importlib.util.find_spec(f"streamcrawl_core.{module}")
    assert spec is not None and spec.origin is not None
    with open(spec.origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module.split(".")[0])
    allowed = {"__future__", "array", "collections", "dataclasses", "functools", "idna", "ipaddress", "math",
               "mmh3", "numpy", "re", "struct", "typing", "urllib", "warnings", "streamcrawl_core",
               "streamcrawl_native"}  # fmt: skip
    assert imported <= allowed, imported - allowed


def test_rust_crate_does_no_io() -> None:
    from pathlib import Path

    crate = Path(__file__).resolve().parents[3] / "native"
    manifest = (crate / "Cargo.toml").read_text(encoding="utf-8")
    deps = manifest.split("[dependencies]", 1)[1].split("[", 1)[0]
    assert [line.split("=")[0].strip() for line in deps.splitlines() if "=" in line] == ["pyo3"]
    sources = list((crate / "src").glob("*.rs"))
    assert len(sources) >= 5
    for src in sources:
        text = src.read_text(encoding="utf-8")
        for banned in ("std::fs", "std::net", "std::process", "std::env", "std::io", "std::thread"):
            assert banned not in text, (src.name, banned)
