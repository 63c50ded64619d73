"""64-bit SimHash (Charikar) over weighted word shingles, and a pigeonhole near-duplicate index.

Features are ``shingle``-word n-grams of the lowercased ``\\w+`` tokens; a feature's weight is its
occurrence count, which is the same as summing over every occurrence. Each occurrence contributes its
64-bit MurmurHash3 (x64-128, seed 0, first half): bit j of the result is 1 iff more than half of the
occurrences have bit j set (ties -> 0). Empty or token-less text hashes to 0.

Speed trick: instead of a 64-step Python loop per feature, the digests of all occurrences (made by
``mmh3.hash_bytes`` in C) are sliced into 8 byte planes, each read as one big integer; every bit column
count is then one big-integer ``AND`` + ``bit_count`` - 64 C-level operations per page in total.

``SimHashIndex`` finds every stored fingerprint within ``max_distance`` bits using the Manku et al.
pigeonhole argument: with 4 blocks of 16 bits and distance <= 3, at least one block matches exactly,
so a query only inspects 4 hash-table buckets (no linear scan).
Fingerprints are unsigned 64-bit internally; use ``to_signed64`` / ``from_signed64`` for bigint storage.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import mmh3

__all__ = ["SimHashIndex", "from_signed64", "hamming", "simhash", "to_signed64"]

_MASK64 = (1 << 64) - 1
_TOKEN_RE = re.compile(r"\w+")


def _check_u64(fp: int) -> int:
    if isinstance(fp, bool) or not isinstance(fp, int) or not -(1 << 63) <= fp <= _MASK64:
        raise ValueError(f"not a 64-bit fingerprint: {fp!r}")
    return fp & _MASK64


def to_signed64(fp: int) -> int:
    """Unsigned (or already signed) 64-bit value -> signed int64 (Cassandra ``bigint``)."""
    u = _check_u64(fp)
    return u - (1 << 64) if u >> 63 else u


def from_signed64(value: int) -> int:
    """Signed int64 (or already unsigned) -> unsigned 64-bit value."""
    return _check_u64(value)


def hamming(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit fingerprints (signed or unsigned spelling)."""
    return (_check_u64(a) ^ _check_u64(b)).bit_count()


def _features(tokens: list[str], shingle: int) -> Iterator[str]:
    if len(tokens) < shingle:
        return iter((" ".join(tokens),))  # a short text is one feature rather than none
    if shingle == 1:
        return iter(tokens)
    return map(" ".join, zip(*(tokens[i:] for i in range(shingle)), strict=False))


def _utf8_clean(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def simhash(text: str, shingle: int = 3, *, ignore_numbers: bool = True) -> int:
    """Unsigned 64-bit SimHash of ``text``. Raises ``TypeError``/``ValueError`` on bad arguments."""
    if not isinstance(text, str):
        raise TypeError(f"simhash() needs str, not {type(text).__name__}")
    if isinstance(shingle, bool) or not isinstance(shingle, int) or shingle < 1:
        raise ValueError(f"shingle must be a positive int, got {shingle!r}")
    tokens = _TOKEN_RE.findall(text.lower())
    if ignore_numbers:
        tokens = [t for t in tokens if not t.isdigit()]
    if not tokens:
        return 0
    features = list(_features(tokens, shingle))
    if text.isascii() or _utf8_clean(text):
        digests = b"".join(map(mmh3.hash_bytes, features))
    else:
        # mmh3 5.3.1 crashes the interpreter (segfault) on a str with lone surrogates, so such
        # text (e.g. decoded with errors="surrogateescape") is hashed as explicit bytes instead.
        digests = b"".join(mmh3.hash_bytes(f.encode("utf-8", "surrogatepass")) for f in features)
    n = len(features)
    # Byte plane b = byte b of every feature's 64-bit hash (digests are 16 bytes; we use the first 8).
    # masks[i] selects bit i of every byte, so one AND + bit_count counts a whole bit column.
    masks = [int.from_bytes(bytes((1 << i,)) * n, "little") for i in range(8)]
    fp = 0
    for b in range(8):
        plane = int.from_bytes(digests[b::16], "little")
        for i in range(8):
            if 2 * (plane & masks[i]).bit_count() > n:
                fp |= 1 << (8 * b + i)
    return fp


class SimHashIndex:
    """Near-duplicate lookup over 64-bit fingerprints (4 exact-match tables of 16-bit blocks)."""

    _BLOCKS = 4
    _BLOCK_BITS = 16

    def __init__(self, max_distance: int = 3) -> None:
        if isinstance(max_distance, bool) or not isinstance(max_distance, int):
            raise ValueError("max_distance must be an int")
        if not 0 <= max_distance < self._BLOCKS:
            # The pigeonhole guarantee needs more blocks than allowed differing bits.
            raise ValueError(f"max_distance must be in 0..{self._BLOCKS - 1}, got {max_distance}")
        self.max_distance = max_distance
        # tables[b][block value] -> list of unsigned fingerprints with that block
        self._tables: list[dict[int, list[int]]] = [{} for _ in range(self._BLOCKS)]
        self._keys: dict[int, list[str]] = {}  # fingerprint -> keys (exact duplicates share one)
        self._size = 0

    def _blocks(self, fp: int) -> Iterator[tuple[dict[int, list[int]], int]]:
        for b, table in enumerate(self._tables):
            yield table, (fp >> (b * self._BLOCK_BITS)) & 0xFFFF

    def add(self, fp: int, key: str) -> None:
        """Store ``key`` under fingerprint ``fp``. Adding the same (fp, key) twice is a no-op."""
        u = _check_u64(fp)
        if not isinstance(key, str):
            raise TypeError("key must be str")
        keys = self._keys.get(u)
        if keys is None:
            self._keys[u] = [key]
            for table, block in self._blocks(u):
                table.setdefault(block, []).append(u)
        elif key in keys:
            return
        else:
            keys.append(key)
        self._size += 1

    def remove(self, fp: int, key: str) -> bool:
        """Remove one (fp, key) pair; False if it was not stored."""
        u = _check_u64(fp)
        keys = self._keys.get(u)
        if keys is None or key not in keys:
            return False
        keys.remove(key)
        self._size -= 1
        if not keys:
            del self._keys[u]
            for table, block in self._blocks(u):
                bucket = table[block]
                bucket.remove(u)
                if not bucket:
                    del table[block]
        return True

    def query(self, fp: int) -> list[tuple[str, int, int]]:
        """Every stored (key, fingerprint, distance) with distance <= max_distance, nearest first."""
        u = _check_u64(fp)
        maxd = self.max_distance
        found: dict[int, int] = {}
        for b, table in enumerate(self._tables):
            bucket = table.get((u >> (b * 16)) & 0xFFFF)
            if bucket:
                for cand in bucket:
                    d = (cand ^ u).bit_count()
                    if d <= maxd:
                        found[cand] = d
        hits = [(key, cand, d) for cand, d in found.items() for key in self._keys[cand]]
        hits.sort(key=lambda h: (h[2], h[0]))
        return hits

    def __len__(self) -> int:
        return self._size

    def __contains__(self, fp: object) -> bool:
        return isinstance(fp, int) and not isinstance(fp, bool) and (fp & _MASK64) in self._keys
