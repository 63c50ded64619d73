"""Tests for streamcrawl_core.bloom."""

from __future__ import annotations

import math
import random

import mmh3
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcrawl_core.bloom import BloomFilter, murmur3_u64


def test_sizing_formulas() -> None:
    bf = BloomFilter(1_000_000, 0.01)
    assert bf.m == math.ceil(-1_000_000 * math.log(0.01) / math.log(2) ** 2)
    assert bf.k == round(bf.m / 1_000_000 * math.log(2)) == 7
    ideal = -math.log(0.01) / math.log(2) ** 2
    assert abs(bf.bits_per_item - ideal) / ideal < 0.01
    assert len(bf.to_bytes()) == 36 + (bf.m + 7) // 8  # 36-byte header, see module docstring
    assert BloomFilter(1, 0.99).k >= 1


@pytest.mark.parametrize(
    ("capacity", "fp"), [(0, 0.1), (-5, 0.1), (True, 0.1), (1.5, 0.1), (10, 0.0), (10, 1.0), (10, "x")]
)
def test_bad_construction(capacity: object, fp: object) -> None:
    with pytest.raises(ValueError):
        BloomFilter(capacity, fp)  # type: ignore[arg-type]


def test_add_and_contains() -> None:
    bf = BloomFilter(1000, 0.01)
    assert bf.add(42) is True
    assert bf.add(42) is False
    assert 42 in bf
    assert bf.add(b"http://example.com/") is True
    assert bytearray(b"http://example.com/") in bf
    assert memoryview(b"http://example.com/") in bf
    assert len(bf) == 2
    assert "a string" not in bf  # foreign types are simply absent
    assert 1.5 not in bf


def test_signed_and_unsigned_fingerprint_are_one_item() -> None:
    bf = BloomFilter(100, 0.01)
    bf.add(-1)
    assert (1 << 64) - 1 in bf
    assert bf.add((1 << 64) - 1) is False


def test_bad_items() -> None:
    bf = BloomFilter(100, 0.01)
    with pytest.raises(ValueError):
        bf.add(1 << 64)
    with pytest.raises(ValueError):
        bf.add(-(1 << 63) - 1)
    with pytest.raises(TypeError):
        bf.add("str")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        bf.add(True)
    with pytest.raises(TypeError):
        bf.contains_many([None])  # type: ignore[list-item]


def test_add_many_reports_duplicates_within_batch() -> None:
    bf = BloomFilter(1000, 0.001)
    assert bf.add_many([1, 2, 1, 3, 2]) == [True, True, False, True, False]
    assert bf.contains_many([1, 2, 3]) == [True, True, True]
    assert len(bf) == 3


@given(st.lists(st.one_of(st.integers(min_value=-(1 << 63), max_value=(1 << 64) - 1), st.binary()), max_size=50))
def test_no_false_negatives(items: list[int | bytes]) -> None:
    bf = BloomFilter(100, 0.01)
    bf.add_many(items)
    assert all(bf.contains_many(items))


def test_serialization_roundtrip() -> None:
    bf = BloomFilter(5000, 0.02)
    items = list(range(-1000, 1000))
    bf.add_many(items)
    copy = BloomFilter.from_bytes(bf.to_bytes())
    assert copy == bf
    assert (copy.m, copy.k, copy.capacity, len(copy)) == (bf.m, bf.k, bf.capacity, len(bf))
    assert all(copy.contains_many(items))
    assert BloomFilter.from_bytes(bytearray(bf.to_bytes())) == bf
    assert bf != BloomFilter(5000, 0.02)
    assert bf != "not a filter"
    assert "BloomFilter(m=" in repr(bf)


def test_from_bytes_rejects_corruption() -> None:
    good = BloomFilter(100, 0.01).to_bytes()
    cases = [
        b"",
        good[:10],
        b"XXXX" + good[4:],
        good[:4] + b"\x09" + good[5:],  # version
        good[:8] + (0).to_bytes(8, "little") + good[16:],  # m = 0
        good[:16] + (0).to_bytes(4, "little") + good[20:],  # k = 0
        good[:-1],
        good + b"\x00",
    ]
    for blob in cases:
        with pytest.raises(ValueError):
            BloomFilter.from_bytes(blob)
    with pytest.raises(ValueError):
        BloomFilter.from_bytes("text")  # type: ignore[arg-type]


def test_expected_fp_rate() -> None:
    bf = BloomFilter(1000, 0.01)
    assert bf.expected_fp_rate() == 0.0
    assert abs(bf.expected_fp_rate(1000) - 0.01) < 0.002
    with pytest.raises(ValueError):
        bf.expected_fp_rate(-1)


def test_measured_fp_rate_at_1m_items_matches_formula() -> None:
    n = 1_000_000
    bf = BloomFilter(n, 0.01)
    rnd = random.Random(20240601)
    inserted = [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]  # signed, like url_fingerprint
    bf.add_many(inserted)
    seen = set(inserted)
    probes = [x for x in (rnd.getrandbits(64) - (1 << 63) for _ in range(300_000)) if x not in seen]
    measured = sum(bf.contains_many(probes)) / len(probes)
    expected = bf.expected_fp_rate(len(bf))
    # 300k probes at p~1% gives a relative std error of ~1.8%, so 10% is > 5 sigma.
    assert abs(measured - expected) / expected < 0.10, (measured, expected)


# --- vectorized batch path vs the per-item path --------------------------------------------------------

_EDGE_INTS = [0, 1, -1, 2, (1 << 63) - 1, -(1 << 63), 1 << 63, (1 << 64) - 1, 12345, -12345]


def test_vectorized_murmur_matches_mmh3() -> None:
    rnd = random.Random(7)
    keys = [rnd.getrandbits(64) for _ in range(5000)] + [x & ((1 << 64) - 1) for x in _EDGE_INTS]
    h1, h2 = murmur3_u64(np.array(keys, dtype=np.uint64))
    for key, a, b in zip(keys, h1.tolist(), h2.tolist(), strict=True):
        assert mmh3.hash64(key.to_bytes(8, "little"), signed=True) == (a, b)


def _one_by_one(bf: BloomFilter, items: list[int | bytes]) -> list[bool]:
    return [bf.add(x) for x in items]


@pytest.mark.parametrize("capacity", [30, 500, 20_000])  # 30: tiny m, many collisions inside one batch
def test_batch_add_equals_sequential_adds(capacity: int) -> None:
    rnd = random.Random(capacity)
    for _ in range(5):
        items: list[int | bytes] = [rnd.getrandbits(64) - (1 << 63) for _ in range(300)]
        items += [rnd.getrandbits(64) for _ in range(100)]  # unsigned spellings too
        items += rnd.sample(items, 80)  # duplicates inside the batch
        items += [x & ((1 << 64) - 1) for x in items[:40] if isinstance(x, int)]  # same item, other sign
        rnd.shuffle(items)
        a, b = BloomFilter(capacity, 0.05), BloomFilter(capacity, 0.05)
        assert a.add_many(items) == _one_by_one(b, items)
        assert a == b and len(a) == len(b)
        probes = items[:50] + [rnd.getrandbits(64) for _ in range(500)]
        assert a.contains_many(probes) == [x in b for x in probes]


def test_batch_accepts_numpy_arrays_and_mixed_items() -> None:
    rnd = random.Random(11)
    signed = [rnd.getrandbits(64) - (1 << 63) for _ in range(1000)]
    a, b = BloomFilter(5000, 0.01), BloomFilter(5000, 0.01)
    assert a.add_many(np.array(signed, dtype=np.int64)) == b.add_many(signed)
    assert a == b
    unsigned = np.array([x & ((1 << 64) - 1) for x in signed], dtype=np.uint64)
    assert all(a.contains_many(unsigned))
    assert a.contains_many(np.array(signed[:100], dtype=np.int64)) == [True] * 100
    mixed: list[int | bytes] = [*signed[:50], *(f"http://h/{i}".encode() for i in range(50))]
    c = BloomFilter(5000, 0.01)
    assert c.add_many(mixed) == _one_by_one(BloomFilter(5000, 0.01), mixed)
    assert all(c.contains_many(mixed))
    assert a.add_many(np.array([], dtype=np.int64)) == [] == a.contains_many(np.array([], dtype=np.int64))
    with pytest.raises(TypeError):
        a.contains_many(np.array([1.5, 2.5] * 20))


def test_batch_rejects_bad_items_without_partial_insert() -> None:
    bf = BloomFilter(1000, 0.01)
    with pytest.raises(ValueError):
        bf.add_many([*range(100), 1 << 64])
    with pytest.raises(ValueError):
        bf.add_many([*range(100), -1, -(1 << 63) - 1])
    with pytest.raises(TypeError):
        bf.add_many([*range(100), True])
    with pytest.raises(TypeError):
        bf.contains_many([*range(100), "x"])  # type: ignore[list-item]
    assert len(bf) == 0
    assert bf.add_many([-1, *range(100), (1 << 64) - 1])[-1] is False  # mixed spellings, one item


def test_one_shot_iterators_small_and_large() -> None:
    for n in (3, 500):
        a, b = BloomFilter(1000, 0.01), BloomFilter(1000, 0.01)
        assert a.add_many(x for x in range(n)) == b.add_many(list(range(n))) == [True] * n
        assert a.contains_many(iter(range(n))) == [True] * n
        assert a.contains_many(x for x in range(10**6, 10**6 + n)) == b.contains_many(list(range(10**6, 10**6 + n)))
