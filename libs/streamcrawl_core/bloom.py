"""Bloom filter for the URL seen-set (pure Python + mmh3, serializable).

Sizing for ``capacity`` n and target false-positive rate p: ``m = ceil(-n ln p / (ln 2)^2)`` bits and
``k = round((m / n) ln 2)`` probes (at least 1). Probe positions use Kirsch-Mitzenmacher double hashing
``g_i = (h1 + i*h2) mod m`` where (h1, h2) are the two 64-bit halves of one MurmurHash3 x64-128 hash,
so each item costs exactly one hash call.

Items are 64-bit ints (URL fingerprints; a signed and an unsigned int with the same 64-bit pattern are
the same item, so Cassandra's signed bigint round-trips) or bytes-like values.

Serialized layout (little-endian): magic ``b"SCBF"``, u8 version (1), 3 zero bytes, u64 m, u32 k,
u64 capacity, u64 count, then ``ceil(m/8)`` bytes of bits (bit ``i`` is ``byte[i>>3] >> (i&7) & 1``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable

import mmh3

__all__ = ["BloomFilter", "Item"]

Item = int | bytes | bytearray | memoryview

_MAGIC = b"SCBF"
_VERSION = 1
_HEADER = struct.Struct("<4sB3xQIQQ")
_MASK64 = (1 << 64) - 1
_MIN_INT = -(1 << 63)


def _item_bytes(item: Item) -> bytes:
    if isinstance(item, int) and not isinstance(item, bool):
        if not _MIN_INT <= item <= _MASK64:
            raise ValueError(f"int item out of 64-bit range: {item}")
        # Two's-complement view: signed and unsigned spellings of one fingerprint hash the same.
        return (item & _MASK64).to_bytes(8, "little")
    if isinstance(item, bytes):
        return item
    if isinstance(item, bytearray | memoryview):
        return bytes(item)
    raise TypeError(f"Bloom items must be int or bytes, not {type(item).__name__}")


class BloomFilter:
    """A fixed-size Bloom filter. Not thread-safe; one writer per instance."""

    __slots__ = ("_bits", "_count", "capacity", "k", "m")

    def __init__(self, capacity: int, fp_rate: float) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity must be a positive int, got {capacity!r}")
        if not isinstance(fp_rate, float | int) or not 0.0 < fp_rate < 1.0:
            raise ValueError(f"fp_rate must be in (0, 1), got {fp_rate!r}")
        m = math.ceil(-capacity * math.log(fp_rate) / (math.log(2) ** 2))
        k = max(1, round(m / capacity * math.log(2)))
        self._init(m, k, capacity, 0, bytearray((m + 7) // 8))

    def _init(self, m: int, k: int, capacity: int, count: int, bits: bytearray) -> None:
        self.m = m
        self.k = k
        self.capacity = capacity
        self._count = count
        self._bits = bits

    # --- single-item API --------------------------------------------------------------------------

    def add(self, item: Item) -> bool:
        """Insert ``item``; True if it was (definitely) not present before."""
        return self.add_many((item,))[0]

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, int | bytes | bytearray | memoryview):
            return False  # membership of a foreign type is simply "no", like a set
        return self.contains_many((item,))[0]

    # --- batched API (the hot path: everything bound to locals, one hash call per item) -----------

    def add_many(self, items: Iterable[Item]) -> list[bool]:
        """Insert every item; element i is True if item i was new (not present before it)."""
        bits, m, k = self._bits, self.m, self.k
        hash64, to_bytes = mmh3.hash64, _item_bytes
        out: list[bool] = []
        append = out.append
        added = 0
        for item in items:
            h1, h2 = hash64(to_bytes(item), 0, True, False)
            pos, step = h1 % m, h2 % m
            new = False
            for _ in range(k):
                byte, mask = pos >> 3, 1 << (pos & 7)
                if not bits[byte] & mask:
                    bits[byte] |= mask
                    new = True
                pos += step
                if pos >= m:
                    pos -= m
            added += new
            append(new)
        self._count += added
        return out

    def contains_many(self, items: Iterable[Item]) -> list[bool]:
        """Membership for each item (False = definitely absent, True = probably present)."""
        bits, m, k = self._bits, self.m, self.k
        hash64, to_bytes = mmh3.hash64, _item_bytes
        out: list[bool] = []
        append = out.append
        for item in items:
            h1, h2 = hash64(to_bytes(item), 0, True, False)
            pos, step = h1 % m, h2 % m
            for _ in range(k):
                if not bits[pos >> 3] >> (pos & 7) & 1:
                    append(False)
                    break  # most absent items exit on the first or second probe
                pos += step
                if pos >= m:
                    pos -= m
            else:
                append(True)
        return out

    # --- stats ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        """Number of insertions that reported "new" (an estimate of distinct items added)."""
        return self._count

    @property
    def bits_per_item(self) -> float:
        """Bits of filter per item of design capacity (``m / capacity``)."""
        return self.m / self.capacity

    def expected_fp_rate(self, n: int | None = None) -> float:
        """(1 - e^(-k n / m))^k for ``n`` items (default: the number inserted so far)."""
        items = self._count if n is None else n
        if items < 0:
            raise ValueError("n must be >= 0")
        return float((1.0 - math.exp(-self.k * items / self.m)) ** self.k)

    # --- serialization ----------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        return _HEADER.pack(_MAGIC, _VERSION, self.m, self.k, self.capacity, self._count) + bytes(self._bits)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview) -> BloomFilter:
        """Inverse of ``to_bytes``. Raises ``ValueError`` on any corrupt or truncated input."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise ValueError(f"expected bytes, got {type(data).__name__}")
        raw = bytes(data)
        if len(raw) < _HEADER.size:
            raise ValueError("truncated Bloom filter header")
        magic, version, m, k, capacity, count = _HEADER.unpack_from(raw)
        if magic != _MAGIC:
            raise ValueError("not a streamcrawl Bloom filter (bad magic)")
        if version != _VERSION:
            raise ValueError(f"unsupported Bloom filter version {version}")
        if m < 1 or k < 1 or capacity < 1 or k > 1024:
            raise ValueError(f"corrupt Bloom filter header (m={m}, k={k}, capacity={capacity})")
        body = raw[_HEADER.size :]
        if len(body) != (m + 7) // 8:
            raise ValueError(f"Bloom filter body is {len(body)} bytes, header says {(m + 7) // 8}")
        bf = cls.__new__(cls)
        bf._init(m, k, capacity, count, bytearray(body))
        return bf

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BloomFilter):
            return NotImplemented
        return (self.m, self.k, self.capacity, self._count, self._bits) == (
            other.m,
            other.k,
            other.capacity,
            other._count,
            other._bits,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"BloomFilter(m={self.m}, k={self.k}, capacity={self.capacity}, count={self._count})"
