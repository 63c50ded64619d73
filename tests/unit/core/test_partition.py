"""Kafka murmur2 partitioner compatibility (vectors from Kafka's UtilsTest and librdkafka's rdmurmur2.c)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcrawl_core.partition import host_key, key_mismatch, murmur2, partition_for

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (signed Java ints)
JAVA_VECTORS = {
    "21": -973932308,
    "foobar": -790332482,
    "a-little-bit-long-string": -985981536,
    "a-little-bit-longer-string": -1486304829,
    "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    "abc": 479470107,
}

# librdkafka src/rdmurmur2.c unittest_murmur2 (java_murmur2_results, as uint32)
_UNALIGNED = "PreAmbleWillBeRemoved,ThePrePartThatIs"
LIBRDKAFKA_VECTORS = {
    "kafka": 0xD067CF64,
    "giberish123456789": 0x8F552B0C,
    "1234": 0x9FC97B14,
    "234": 0xE7C009CA,
    "34": 0x873930DA,
    "4": 0x5A4B5CA1,
    _UNALIGNED: 0x78424F1C,
    _UNALIGNED[1:]: 0x4A62B377,
    _UNALIGNED[2:]: 0xE0E4E09E,
    _UNALIGNED[3:]: 0x62B8B43F,
    "": 0x106E08D9,
}


@pytest.mark.parametrize(("key", "expected"), JAVA_VECTORS.items())
def test_java_utils_vectors(key: str, expected: int) -> None:
    assert murmur2(key.encode()) == expected


@pytest.mark.parametrize(("key", "expected"), LIBRDKAFKA_VECTORS.items())
def test_librdkafka_vectors(key: str, expected: int) -> None:
    assert murmur2(key.encode()) & 0xFFFFFFFF == expected


def _java_reference(data: bytes) -> int:
    """Independent transliteration of the Java loop using signed 32-bit wraparound, for cross-checks."""

    def i32(x: int) -> int:
        x &= 0xFFFFFFFF
        return x - (1 << 32) if x >= 1 << 31 else x

    def ushr(x: int, n: int) -> int:  # Java >>>
        return (x & 0xFFFFFFFF) >> n

    m, r = 0x5BD1E995, 24
    h = i32(0x9747B28C ^ len(data))
    for i in range(len(data) // 4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little", signed=True)
        k = i32(k * m)
        k = i32(k ^ ushr(k, r))
        k = i32(k * m)
        h = i32(i32(h * m) ^ k)
    rest, base = len(data) % 4, len(data) & ~3
    if rest == 3:
        h = i32(h ^ (data[base + 2] & 0xFF) << 16)
    if rest >= 2:
        h = i32(h ^ (data[base + 1] & 0xFF) << 8)
    if rest >= 1:
        h = i32(h ^ (data[base] & 0xFF))
        h = i32(h * m)
    h = i32(h ^ ushr(h, 13))
    h = i32(h * m)
    return i32(h ^ ushr(h, 15))


@given(st.binary(max_size=64))
def test_matches_independent_reference(data: bytes) -> None:
    assert murmur2(data) == _java_reference(data)


def test_accepts_bytes_like_and_rejects_str() -> None:
    assert murmur2(bytearray(b"kafka")) == murmur2(memoryview(b"kafka")) == murmur2(b"kafka")
    with pytest.raises(TypeError):
        murmur2("kafka")  # type: ignore[arg-type]


def test_partition_for_is_java_to_positive_mod_n() -> None:
    # Java: Utils.toPositive(murmur2(bytes)) % n ; toPositive clears the sign bit.
    for key, h in JAVA_VECTORS.items():
        for n in (1, 3, 12, 64):
            assert partition_for(key, n) == (h & 0x7FFFFFFF) % n
    # "kafka" hashes to 0xd067cf64 -> 0x5067cf64 = 1348980580 after clearing the sign bit.
    assert partition_for("kafka", 1000) == 0x5067CF64 % 1000 == 580


@given(st.text(), st.integers(min_value=1, max_value=10_000))
def test_partition_in_range(key: str, n: int) -> None:
    assert 0 <= partition_for(key, n) < n


@pytest.mark.parametrize("n", [0, -1, True, 2.0])
def test_partition_rejects_bad_n(n: object) -> None:
    with pytest.raises(ValueError):
        partition_for("k", n)  # type: ignore[arg-type]


def test_partition_rejects_non_str_key() -> None:
    with pytest.raises(TypeError):
        partition_for(b"k", 4)  # type: ignore[arg-type]


def test_host_key() -> None:
    assert host_key("WWW.Example.COM") == "www.example.com"
    assert host_key(" example.com. ") == "example.com"
    assert partition_for(host_key("Example.com"), 12) == partition_for("example.com", 12)
    with pytest.raises(ValueError):
        host_key("  ")
    with pytest.raises(TypeError):
        host_key(None)  # type: ignore[arg-type]


def test_host_buckets_spread_each_partition_evenly() -> None:
    from collections import Counter

    from streamcrawl_core.partition import HOST_BUCKETS, host_bucket

    hosts = [f"h{i}.example.com" for i in range(64 * 64 * 20)]
    in_part = [h for h in hosts if partition_for(h, 64) == 5]
    counts = Counter(host_bucket(h) for h in in_part)
    assert set(counts) == set(range(HOST_BUCKETS))  # bucket is independent of the partition
    assert max(counts.values()) < 3 * len(in_part) / HOST_BUCKETS
    assert host_bucket("a.test") == host_bucket("a.test") and 0 <= host_bucket("a.test", 7) < 7


def test_key_mismatch_names_what_is_wrong_with_a_host_keyed_record() -> None:
    host = "a.example"
    right = partition_for(host, 8)
    assert key_mismatch(host, right, host, 8) is None
    assert key_mismatch(host, right + 1, host, None) is None  # partition count unknown: the key alone
    assert "no key" in (key_mismatch(None, right, host, 8) or "")
    assert "is not the payload's host" in (key_mismatch("b.example", partition_for("b.example", 8), host, 8) or "")
    wrong = (right + 1) % 8
    assert f"is on partition {right} of 8" in (key_mismatch(host, wrong, host, 8) or "")
    assert len(key_mismatch("k" * 100_000, 0, "h" * 100_000, 8) or "") < 600  # a huge key is not echoed whole
