"""Tests for streamcrawl_core.simhash: exactness vs a naive reference, near-dup behaviour, the index."""

from __future__ import annotations

import random
import re
import statistics
from collections import Counter

import mmh3
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamcrawl_core.simhash import (
    _VECTOR_MIN_CHARS,
    SimHashIndex,
    _simhash_ascii,
    _simhash_generic,
    from_signed64,
    hamming,
    simhash,
    to_signed64,
)

_VOCAB = """the of and to in is that for it as was with be by on not he this are or his from at which but have an
they you were her she there been one all we their has would when if so what up out no about into them can only other
time new some could these two may first then do any like my now over such our man me even most made after also
did many before must through back years where much your way well down should because each just those people
how too little state good very make world still own see men work long get here between both life being under
never day same another know while last might us great old year off come since against go came right used take
three city market report council police school water health minister company government river bridge weather
train station energy price budget election hospital museum festival harbour village teacher football season
storm flood""".split()  # noqa: SIM905 - a word list reads better as prose


def _article(rnd: random.Random, words: int) -> str:
    sentences, count = [], 0
    while count < words:
        s = [rnd.choice(_VOCAB) for _ in range(rnd.randint(8, 20))]
        sentences.append(" ".join(s).capitalize() + ".")
        count += len(s)
    # paragraphs of ~5 sentences, like extracted article text
    return "\n\n".join(" ".join(sentences[i : i + 5]) for i in range(0, len(sentences), 5))


def _reference(text: str, shingle: int = 3) -> int:
    """Textbook SimHash: Counter of shingles, 64 signed counters, one Python loop per bit."""
    tokens = [t for t in re.findall(r"\w+", text.lower()) if not t.isdigit()]
    if not tokens:
        return 0
    if len(tokens) < shingle:
        feats = Counter([" ".join(tokens)])
    else:
        feats = Counter(" ".join(tokens[i : i + shingle]) for i in range(len(tokens) - shingle + 1))
    v = [0] * 64
    for f, w in feats.items():
        h = mmh3.hash64(f.encode(), signed=False)[0]
        for j in range(64):
            v[j] += w if h >> j & 1 else -w
    return sum(1 << j for j in range(64) if v[j] > 0)


@settings(max_examples=150)
@given(st.text(), st.integers(min_value=1, max_value=4))
def test_matches_naive_reference(text: str, shingle: int) -> None:
    assert simhash(text, shingle) == _reference(text, shingle)


def test_matches_reference_on_repetitive_text() -> None:
    text = "buy now buy now buy now cheap cheap cheap " * 50 + _article(random.Random(1), 300)
    assert simhash(text) == _reference(text)
    assert simhash(text, 1) == _reference(text, 1)


def test_edge_inputs() -> None:
    assert simhash("") == 0
    assert simhash("  ... !!! ") == 0
    assert simhash("2024 10 31") == 0  # numbers only: no features
    assert simhash("2024 10 31", ignore_numbers=False) != 0
    assert simhash("hello") == simhash("HELLO") != 0
    assert 0 <= simhash(_article(random.Random(2), 200)) < 1 << 64
    assert simhash("caf\udce9 menu prices") == simhash("caf\udce9 menu prices")  # lone surrogate: no crash
    with pytest.raises(TypeError):
        simhash(b"bytes")  # type: ignore[arg-type]
    for bad in (0, -1, True):
        with pytest.raises(ValueError):
            simhash("a b c", bad)


def test_hamming_and_signed_helpers() -> None:
    assert hamming(0, (1 << 64) - 1) == 64
    assert hamming(-1, (1 << 64) - 1) == 0
    assert hamming(0b1011, 0b0001) == 2
    assert to_signed64((1 << 64) - 1) == -1
    assert to_signed64(5) == 5 == from_signed64(5)
    assert from_signed64(-1) == (1 << 64) - 1
    for fp in (0, 1, (1 << 63) - 1, 1 << 63, (1 << 64) - 1):
        assert from_signed64(to_signed64(fp)) == fp
    for bad in (1 << 64, -(1 << 63) - 1, 1.0, True):
        with pytest.raises(ValueError):
            to_signed64(bad)  # type: ignore[arg-type]


def _pairs(change: str, words: int, seeds: range) -> list[int]:
    out = []
    for seed in seeds:
        rnd = random.Random(seed)
        body = _article(rnd, words)
        if change == "timestamp":
            a = f"Published 2024-03-{seed % 28 + 1:02d} 10:{seed % 60:02d} UTC by Staff Reporter\n\n{body}"
            b = f"Updated 2025-01-{seed % 28 + 1:02d} 08:{(seed * 7) % 60:02d} UTC by Staff Reporter\n\n{body}"
        else:  # one advert paragraph (a sentence of 8-20 words) replaced
            paras = body.split("\n\n")
            mid = len(paras) // 2
            ad_a, ad_b = _article(random.Random(seed + 10_000), 8), _article(random.Random(seed + 20_000), 8)
            a = "\n\n".join([*paras[:mid], "Advertisement. " + ad_a, *paras[mid:]])
            b = "\n\n".join([*paras[:mid], "Advertisement. " + ad_b, *paras[mid:]])
        out.append(hamming(simhash(a), simhash(b)))
    return out


def test_timestamp_change_is_near_duplicate() -> None:
    # Digits are ignored, so only "published" -> "updated" changes: one shingle out of ~1000.
    dists = _pairs("timestamp", 1000, range(40))
    assert max(dists) <= 4
    assert sum(d <= 3 for d in dists) >= 0.95 * len(dists), dists


def test_advert_paragraph_change_is_mostly_near_duplicate() -> None:
    # SimHash is statistical: swapping ~15 of ~1500 words flips a couple of bits on average, and
    # occasionally more than 3 (see docs/benchmarks-core-a.md). We assert the measured behaviour.
    dists = _pairs("advert", 1500, range(40))
    assert statistics.median(dists) <= 3, dists
    assert sum(d <= 3 for d in dists) >= 0.7 * len(dists), dists


def test_unrelated_articles_are_far_apart() -> None:
    fps = [simhash(_article(random.Random(1000 + i), 600)) for i in range(30)]
    dists = [hamming(a, b) for i, a in enumerate(fps) for b in fps[i + 1 :]]
    assert min(dists) > 3
    assert 24 <= statistics.mean(dists) <= 40  # ~32 expected for independent fingerprints


# --- index -----------------------------------------------------------------------------------------


def test_index_finds_all_within_distance_and_nothing_else() -> None:
    rnd = random.Random(7)
    idx = SimHashIndex(max_distance=3)
    stored = {}
    for i in range(5000):
        fp = rnd.getrandbits(64)
        stored[f"k{i}"] = fp
        idx.add(fp, f"k{i}")
    assert len(idx) == 5000
    for _ in range(300):
        base = rnd.choice(list(stored.values()))
        flips = rnd.sample(range(64), rnd.randint(0, 5))
        q = base
        for b in flips:
            q ^= 1 << b
        expected = sorted((k, fp, hamming(fp, q)) for k, fp in stored.items() if hamming(fp, q) <= 3)
        got = idx.query(q)
        assert sorted(got) == expected
        assert [d for _, _, d in got] == sorted(d for _, _, d in got)  # nearest first


def test_index_keys_duplicates_remove_and_signed_input() -> None:
    idx = SimHashIndex()
    idx.add(-1, "a")  # signed spelling of 0xFFFF...FF
    idx.add((1 << 64) - 1, "b")
    idx.add((1 << 64) - 1, "b")  # same pair: no-op
    assert len(idx) == 2
    assert (1 << 64) - 1 in idx and -1 in idx and 5 not in idx and "x" not in idx
    assert idx.query(-1) == [("a", (1 << 64) - 1, 0), ("b", (1 << 64) - 1, 0)]
    assert idx.query((1 << 64) - 1 - 0b111) == [("a", (1 << 64) - 1, 3), ("b", (1 << 64) - 1, 3)]
    assert idx.query((1 << 64) - 1 - 0b1111) == []
    assert idx.remove(-1, "a") is True
    assert idx.remove(-1, "a") is False
    assert idx.remove(123, "zz") is False
    assert idx.remove(-1, "b") is True
    assert len(idx) == 0 and idx.query(-1) == []
    assert all(bucket is None for table in idx._tables for bucket in table)  # no empty buckets left


def test_index_bad_input() -> None:
    for bad in (4, -1, True, "3"):
        with pytest.raises(ValueError):
            SimHashIndex(bad)  # type: ignore[arg-type]
    idx = SimHashIndex(0)
    with pytest.raises(ValueError):
        idx.add(1 << 64, "k")
    with pytest.raises(TypeError):
        idx.add(1, 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        idx.query(1.5)  # type: ignore[arg-type]
    idx.add(8, "k")
    assert idx.query(8) == [("k", 8, 0)] and idx.query(9) == []


# --- the vectorized ASCII path must give exactly the generic path's value ----------------------------

_ASCII_TEXT = st.text(alphabet=st.characters(max_codepoint=127), max_size=400)


@settings(max_examples=300)
@given(_ASCII_TEXT, st.integers(min_value=1, max_value=5), st.booleans())
def test_vectorized_ascii_path_matches_generic(text: str, shingle: int, ignore_numbers: bool) -> None:
    fast = _simhash_ascii(text, shingle, ignore_numbers)
    if fast is not None:  # None = fewer tokens than one shingle; simhash() then uses the generic path
        assert fast == _simhash_generic(text, shingle, ignore_numbers)


def _noisy_page(rnd: random.Random, nbytes: int) -> str:
    """ASCII text with every token shape the tokenizer must get right: long words (multi-block
    MurmurHash3 features), digits, mixed alnum, underscores, case, punctuation runs, all whitespace."""
    pieces, size = [], 0
    while size < nbytes:
        kind = rnd.random()
        if kind < 0.6:
            w = rnd.choice(_VOCAB)
        elif kind < 0.7:
            w = str(rnd.randrange(10 ** rnd.randint(1, 12)))
        elif kind < 0.8:
            w = "".join(rnd.choice("abcXYZ019_") for _ in range(rnd.randint(1, 70)))
        else:
            w = rnd.choice(["A", "THE", "unused", "x_y", "_", "__init__", "co-op", "e.g.", "it's"])
        sep = rnd.choice([" ", " ", " ", "  ", "\n\n", "\t", ", ", ". ", " -- ", "/", "(", ")\r\n", "\x0b"])
        pieces.append(w + sep)
        size += len(w) + len(sep)
    return "".join(pieces)


def test_vectorized_ascii_path_on_long_pages() -> None:
    rnd = random.Random(99)
    for i in range(60):
        page = _noisy_page(rnd, rnd.choice([3_000, 8_000, 20_000]))
        shingle = 1 + i % 4
        for ignore in (True, False):
            assert _simhash_ascii(page, shingle, ignore) == _simhash_generic(page, shingle, ignore)
        assert simhash(page, shingle) == _reference(page, shingle)


def test_threshold_paths_agree() -> None:
    # just below / above the length where simhash() switches to numpy
    base = _article(random.Random(5), 2000)
    for cut in (_VECTOR_MIN_CHARS - 1, _VECTOR_MIN_CHARS, _VECTOR_MIN_CHARS + 1):
        text = base[:cut]
        assert simhash(text) == _simhash_generic(text, 3, True) == _reference(text)
    assert simhash("1 2 3 " * 1000) == 0 == simhash("!!! " * 1000)  # long, but no word tokens
    assert simhash("word " + "7 " * 2000) == _reference("word " + "7 " * 2000)  # one token left
