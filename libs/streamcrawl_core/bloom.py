"""Bloom filter for the URL seen-set (mmh3 + numpy, serializable).

Sizing for ``capacity`` n and target false-positive rate p: ``m = ceil(-n ln p / (ln 2)^2)`` bits and
``k = round((m / n) ln 2)`` probes (at least 1). Probe positions use Kirsch-Mitzenmacher double hashing
``g_i = (h1 + i*h2) mod m`` where (h1, h2) are the two 64-bit halves of one MurmurHash3 x64-128 hash
(seed 0) of the item, read as **signed** int64 and reduced with floor modulo (so ``0 <= g_i < m``).
Each item costs exactly one hash.

Items are 64-bit ints (URL fingerprints; a signed and an unsigned int with the same 64-bit pattern are
the same item, so Cassandra's signed bigint round-trips) hashed as their 8 little-endian bytes, or
bytes-like values hashed as they are.

Batched calls (``add_many`` / ``contains_many``, also on a numpy integer array) compute MurmurHash3 of
the 8-byte int items vectorized in numpy (the algorithm's tail-only path for an 8-byte key) and gather
or scatter all probe bits at once. That computes exactly the same positions as ``mmh3`` does for
single items (tested), so the bit layout and serialized format are unchanged from version 1.
With the compiled extension (``streamcrawl_native``, see ``_native``), int items in a Python list or
tuple (and single int items) are hashed and probed in Rust over the same ``bytearray``, with the same
positions; numpy arrays, bytes and mixed batches keep the paths above.

Serialized layout (little-endian): magic ``b"SCBF"``, u8 version (1), 3 zero bytes, u64 m, u32 k,
u64 capacity, u64 count, then ``ceil(m/8)`` bytes of bits (bit ``i`` is ``byte[i>>3] >> (i&7) & 1``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import mmh3
import numpy as np
import numpy.typing as npt

from streamcrawl_core._native import NATIVE

__all__ = ["BloomFilter", "Item"]

Item = int | bytes | bytearray | memoryview

_MAGIC = b"SCBF"
_VERSION = 1
_HEADER = struct.Struct("<4sB3xQIQQ")
_MASK64 = (1 << 64) - 1
_MIN_INT = -(1 << 63)
_nat = NATIVE  # the compiled probes, or None (tests switch it off to check both paths)
# Below this batch size the per-item path is cheaper than numpy's fixed per-call overhead.
_VECTOR_MIN = 24

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)
_F1 = np.uint64(0xFF51AFD7ED558CCD)
_F2 = np.uint64(0xC4CEB9FE1A85EC53)
_S31, _S33 = np.uint64(31), np.uint64(33)
_EIGHT = np.uint64(8)


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


def _fmix64(k: U64) -> U64:
    k ^= k >> _S33
    k *= _F1
    k ^= k >> _S33
    k *= _F2
    k ^= k >> _S33
    return k


def murmur3_u64(keys: U64) -> tuple[I64, I64]:
    """MurmurHash3 x64-128 (seed 0) of each key's 8 little-endian bytes, as signed (h1, h2) arrays.

    Equals ``mmh3.hash64(key.to_bytes(8, "little"))`` element-wise; uint64 arithmetic wraps mod 2^64.
    """
    k1 = keys * _C1
    k1 = (k1 << _S31) | (k1 >> _S33)
    k1 *= _C2
    h1 = k1 ^ _EIGHT  # h1 = seed ^ k1, then ^= len; h2 = seed ^ len = 8
    h1 += _EIGHT
    h2 = h1 + _EIGHT
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    return h1.view(np.int64), h2.view(np.int64)


def _int_keys(items: Sequence[Any]) -> U64 | None:
    """All items as a uint64 array if every one is a plain int (bool excluded), else None."""
    if set(map(type, items)) != {int}:
        return None
    try:
        return np.array(items, dtype=np.int64).view(np.uint64)
    except OverflowError:
        pass
    try:
        return np.array(items, dtype=np.uint64)  # all unsigned, some >= 2^63
    except OverflowError:
        pass
    lo, hi = min(items), max(items)  # a mix of negative and >= 2^63 spellings, or out of range
    if lo < _MIN_INT or hi > _MASK64:
        bad = lo if lo < _MIN_INT else hi
        raise ValueError(f"int item out of 64-bit range: {bad}")
    return np.array([x & _MASK64 for x in items], dtype=np.uint64)


class BloomFilter:
    """A fixed-size Bloom filter. Not thread-safe; one writer per instance."""

    __slots__ = ("_arr", "_bits", "_count", "capacity", "k", "m")

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
        self._arr: npt.NDArray[np.uint8] = np.frombuffer(bits, dtype=np.uint8)  # shares memory

    # --- single-item API --------------------------------------------------------------------------

    def add(self, item: Item) -> bool:
        """Insert ``item``; True if it was (definitely) not present before."""
        if _nat is not None:
            done = _nat.bloom_add(self._bits, self.m, self.k, (item,))
            if done is not None:
                self._count += done[1]
                return done[0][0]
        return self._add_scalar((item,))[0]

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, int | bytes | bytearray | memoryview):
            return False  # membership of a foreign type is simply "no", like a set
        if _nat is not None:
            found = _nat.bloom_contains(self._bits, self.m, self.k, (item,))
            if found is not None:
                return found[0]
        return self._contains_scalar((item,))[0]

    # --- batched API ------------------------------------------------------------------------------

    def add_many(self, items: Iterable[Item] | npt.NDArray[np.integer[Any]]) -> list[bool]:
        """Insert every item; element i is True if item i was new (not present before it).

        "Before it" includes earlier items of the same batch, exactly as inserting one by one.
        A numpy integer array is taken as 64-bit fingerprints (signed or unsigned).
        """
        if not isinstance(items, np.ndarray | list | tuple):
            items = list(items)  # a one-shot iterator must be read once
        if _nat is not None and not isinstance(items, np.ndarray):
            done = _nat.bloom_add(self._bits, self.m, self.k, items)  # None: not all in-range ints
            if done is not None:
                self._count += done[1]
                return done[0]
        probes = self._batch_probes(items)
        if probes is None:
            return self._add_scalar(items)
        pos, step = probes
        n, k, m, arr = len(pos), self.k, self.m, self._arr
        grid = np.empty((n, k), dtype=np.int64)  # row i = the k probe positions of item i
        p = pos.copy()
        for i in range(k):
            grid[:, i] = p
            if i + 1 < k:
                p += step
                np.subtract(p, m, out=p, where=p >= m)
        flat = grid.ravel()
        unset = (arr[flat >> 3] >> (flat & 7).astype(np.uint8)) & 1 == 0
        cand = np.flatnonzero(unset)  # probes that hit a bit clear before this batch
        new = np.zeros(n, dtype=bool)
        if cand.size:
            # Each clear bit is set by the first item (in batch order) that probes it; an item is new
            # iff it set at least one bit - exactly what inserting the items one by one reports.
            cpos, citem = flat[cand], cand // k
            if cpos.size * 16 < m:  # small batch: sort the few clear probes
                fresh, first = np.unique(cpos, return_index=True)
                new[citem[first]] = True
                np.bitwise_or.at(arr, fresh >> 3, np.left_shift(1, fresh & 7).astype(np.uint8))
            else:  # large batch: O(m) scratch arrays beat sorting millions of probes
                owner = np.full(m, n, dtype=np.int64)
                np.minimum.at(owner, cpos, citem)
                new[citem[owner[cpos] == citem]] = True
                mark = np.zeros(len(arr) * 8, dtype=bool)
                mark[cpos] = True
                arr |= np.packbits(mark, bitorder="little")
        self._count += int(np.count_nonzero(new))
        out: list[bool] = new.tolist()
        return out

    def contains_many(self, items: Iterable[Item] | npt.NDArray[np.integer[Any]]) -> list[bool]:
        """Membership for each item (False = definitely absent, True = probably present)."""
        if not isinstance(items, np.ndarray | list | tuple):
            items = list(items)  # a one-shot iterator must be read once
        if _nat is not None and not isinstance(items, np.ndarray):
            found = _nat.bloom_contains(self._bits, self.m, self.k, items)  # None: not all in-range ints
            if found is not None:
                return found
        probes = self._batch_probes(items)
        if probes is None:
            return self._contains_scalar(items)
        pos, step = probes
        m, arr = self.m, self._arr
        idx = np.arange(len(pos))  # items still possibly present
        p = pos
        for i in range(self.k):
            hit = (arr[p >> 3] >> (p & 7).astype(np.uint8)) & 1 != 0
            if not hit.all():
                idx, p, step = idx[hit], p[hit], step[hit]  # most absent items drop out after 1-2 probes
            if i + 1 < self.k:
                p = p + step
                np.subtract(p, m, out=p, where=p >= m)
        out = np.zeros(len(pos), dtype=bool)
        out[idx] = True
        result: list[bool] = out.tolist()
        return result

    def _batch_probes(self, items: Iterable[Item] | npt.NDArray[np.integer[Any]]) -> tuple[I64, I64] | None:
        """(first position, step) int64 arrays for a batch, or None to take the per-item path."""
        m = np.int64(self.m)
        if isinstance(items, np.ndarray):
            if items.ndim != 1 or items.dtype.kind not in "iu":
                return None  # the per-item path raises the usual TypeError for foreign types
            keys = (
                items.astype(np.int64, copy=False).view(np.uint64)
                if items.dtype.kind == "i"
                else items.astype(np.uint64, copy=False)
            )
        else:
            seq = items if isinstance(items, list | tuple) else list(items)  # callers pass a list
            if len(seq) < _VECTOR_MIN:
                return None
            int_keys = _int_keys(seq)
            if int_keys is None:
                # Mixed or bytes items: hash each with mmh3 (same values the vectorized path computes).
                hash64, to_bytes = mmh3.hash64, _item_bytes
                pairs = [hash64(to_bytes(x), 0, True, True) for x in seq]
                both = np.array(pairs, dtype=np.int64).reshape(len(seq), 2)
                return both[:, 0] % m, both[:, 1] % m
            keys = int_keys
        h1, h2 = murmur3_u64(np.ascontiguousarray(keys))
        return h1 % m, h2 % m

    # --- per-item paths (small batches, bytes items); identical positions to the batch path ---------

    def _add_scalar(self, items: Iterable[Item]) -> list[bool]:
        bits, m, k = self._bits, self.m, self.k
        hash64, to_bytes = mmh3.hash64, _item_bytes
        out: list[bool] = []
        append = out.append
        added = 0
        for item in items:
            h1, h2 = hash64(to_bytes(item), 0, True, True)
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

    def _contains_scalar(self, items: Iterable[Item]) -> list[bool]:
        bits, m, k = self._bits, self.m, self.k
        hash64, to_bytes = mmh3.hash64, _item_bytes
        out: list[bool] = []
        append = out.append
        for item in items:
            h1, h2 = hash64(to_bytes(item), 0, True, True)
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
