"""64-bit SimHash (Charikar) over weighted word shingles, and a pigeonhole near-duplicate index.

Features are ``shingle``-word n-grams of the lowercased ``\\w+`` tokens; a feature's weight is its
occurrence count, which is the same as summing over every occurrence. Each occurrence contributes its
64-bit MurmurHash3 (x64-128, seed 0, first half): bit j of the result is 1 iff more than half of the
occurrences have bit j set (ties -> 0). Empty or token-less text hashes to 0.

Speed trick: instead of a 64-step Python loop per feature, the digests of all occurrences (made by
``mmh3.hash_bytes`` in C) are sliced into 8 byte planes, each read as one big integer; every bit column
count is then one big-integer ``AND`` + ``bit_count`` - 64 C-level operations per page in total.
ASCII pages of >= 3,000 characters take a fully numpy path (bytes tokenizer + column-wise MurmurHash3,
see ``_simhash_ascii``) that returns the identical value about 2-3x faster. With the compiled
extension (``streamcrawl_native``, see ``_native``) every text takes its single-pass tokenizer and
hasher instead, again with the identical value.

``SimHashIndex`` finds every stored fingerprint within ``max_distance`` bits using the Manku et al.
pigeonhole argument: with 4 blocks of 16 bits and distance <= 3, at least one block matches exactly,
so a query only inspects 4 buckets (no linear scan); buckets are ``array('Q')`` for cache locality.
Fingerprints are unsigned 64-bit internally; use ``to_signed64`` / ``from_signed64`` for bigint storage.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Iterator

import mmh3
import numpy as np
import numpy.typing as npt

from streamcrawl_core._native import NATIVE

__all__ = ["SimHashIndex", "from_signed64", "hamming", "simhash", "to_signed64"]

_MASK64 = (1 << 64) - 1
_nat = NATIVE  # the compiled path, or None (tests switch it off to check both paths)
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
    if _nat is not None and shingle <= _MASK64:
        # The extension lowercases ASCII itself and asks Python's str.isalnum/isdigit about any other
        # character, so it gets the lowered text only when there is one; None = lone surrogates.
        fp = _nat.simhash(text if text.isascii() else text.lower(), shingle, bool(ignore_numbers))
        if fp is not None:
            return fp
    return _simhash_pure(text, shingle, ignore_numbers)


def _simhash_pure(text: str, shingle: int, ignore_numbers: bool) -> int:
    """``simhash`` without the extension: the numpy path for long ASCII text, else the generic one."""
    if len(text) >= _VECTOR_MIN_CHARS and text.isascii():
        fp = _simhash_ascii(text, shingle, ignore_numbers)
        if fp is not None:
            return fp
    return _simhash_generic(text, shingle, ignore_numbers)


def _simhash_generic(text: str, shingle: int, ignore_numbers: bool) -> int:
    """Reference-speed path for any text (regex tokenizer, one ``mmh3`` call per feature)."""
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


# --- vectorized path for ASCII text (pages are mostly ASCII after extraction) ------------------------
#
# For ASCII input ``\w`` is exactly [A-Za-z0-9_] and ``str.isdigit`` is exactly [0-9], so tokenizing
# can be done on bytes: one ``bytes.translate`` lowercases and turns every separator into a space, numpy
# finds token boundaries, drops all-digit tokens and packs the survivors into one buffer with single
# spaces - the exact UTF-8 bytes of every shingle ``" ".join(tokens[i:i+s])`` are then a slice of it.
# MurmurHash3 x64-128 of all those variable-length slices is computed column-wise in numpy (16-byte
# block rounds with a mask for shorter features, zero-padded tail, fmix64), and the 64 bit columns are
# counted with ``unpackbits``. Same value as ``_simhash_generic`` (tested on random and real-ish text).

_VECTOR_MIN_CHARS = 3000  # below this (measured), numpy's per-call overhead loses to the generic path
_ASCII_FOLD = bytes(
    (ord(chr(c).lower()) if chr(c).isalnum() or c == 0x5F else 0x20) if c < 128 else 0x20 for c in range(256)
)
_U = np.uint64
_C1, _C2 = _U(0x87C37B91114253D5), _U(0x4CF5AD432745937F)
_F1, _F2 = _U(0xFF51AFD7ED558CCD), _U(0xC4CEB9FE1A85EC53)
_R = {r: (_U(r), _U(64 - r)) for r in (27, 31, 33)}
_N1, _N2 = _U(0x52DCE729), _U(0x38495AB5)
_FIVE = _U(5)
# byte masks for a tail of t bytes (0..15): low word keeps min(t, 8) bytes, high word max(t - 8, 0)
_TAIL_LO = np.array([(1 << (8 * min(t, 8))) - 1 for t in range(16)], dtype=np.uint64)
_TAIL_HI = np.array([(1 << (8 * max(t - 8, 0))) - 1 for t in range(16)], dtype=np.uint64)

U64 = npt.NDArray[np.uint64]


def _rotl(x: U64, r: int) -> U64:
    left, right = _R[r]
    out: U64 = (x << left) | (x >> right)
    return out


def _fmix64(k: U64) -> U64:
    k ^= k >> _R[33][0]
    k *= _F1
    k ^= k >> _R[33][0]
    k *= _F2
    k ^= k >> _R[33][0]
    return k


def _murmur3_h1(buf: npt.NDArray[np.uint8], start: npt.NDArray[np.int64], length: npt.NDArray[np.int64]) -> U64:
    """First 64-bit half of MurmurHash3 x64-128 (seed 0) of ``buf[start:start+length]``, per element.

    ``buf`` must be C-contiguous with at least 16 readable bytes past the end of every slice.
    """
    n = len(start)
    # words[i] = the 8 bytes buf[i:i+8] as a little-endian uint64 (an overlapping, unaligned view),
    # so every block or tail load is a 1-D gather instead of a (n, 16) byte gather.
    words: U64 = np.ndarray((len(buf) - 7,), dtype="<u8", buffer=buf, strides=(1,))
    h1 = np.zeros(n, dtype=np.uint64)
    h2 = np.zeros(n, dtype=np.uint64)
    nblocks = length >> 4
    for r in range(int(nblocks.max()) if n else 0):
        sel = np.flatnonzero(nblocks > r)
        at = start[sel] + 16 * r
        k1, k2 = words[at], words[at + 8]
        a1, a2 = h1[sel], h2[sel]
        k1 *= _C1
        k1 = _rotl(k1, 31)
        k1 *= _C2
        a1 ^= k1
        a1 = _rotl(a1, 27)
        a1 += a2
        a1 *= _FIVE
        a1 += _N1
        k2 *= _C2
        k2 = _rotl(k2, 33)
        k2 *= _C1
        a2 ^= k2
        a2 = _rotl(a2, 31)
        a2 += a1
        a2 *= _FIVE
        a2 += _N2
        h1[sel] = a1
        h2[sel] = a2
    # Tail: up to 15 bytes, zero-padded; a zero k1/k2 mixes to zero, so no per-length branches needed.
    tail_len = length & 15
    at = start + (nblocks << 4)
    k1 = words[at] & _TAIL_LO[tail_len]
    k2 = words[at + 8] & _TAIL_HI[tail_len]
    k2 *= _C2
    k2 = _rotl(k2, 33)
    k2 *= _C1
    h2 ^= k2
    k1 *= _C1
    k1 = _rotl(k1, 31)
    k1 *= _C2
    h1 ^= k1
    ln = length.astype(np.uint64)
    h1 ^= ln
    h2 ^= ln
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    return h1


def _simhash_ascii(text: str, shingle: int, ignore_numbers: bool) -> int | None:
    """SimHash of ASCII ``text`` fully in numpy; None if it has fewer tokens than one shingle."""
    folded = text.encode("ascii").translate(_ASCII_FOLD) + b" "
    a = np.frombuffer(folded, dtype=np.uint8)
    word = np.empty(len(a) + 1, dtype=np.int8)
    word[0] = 0
    np.not_equal(a, 0x20, out=word[1:].view(np.bool_))
    edge = np.diff(word)
    starts = np.flatnonzero(edge == 1)
    ends = np.flatnonzero(edge == -1)  # the folded text ends with a space, so every token ends
    if ignore_numbers:
        # keep tokens with at least one non-digit character
        nondigit = np.zeros(len(a) + 1, dtype=np.int32)
        np.cumsum((a > 0x39) & (a != 0x20), out=nondigit[1:])  # letters and "_" are all above "9"
        keep = nondigit[ends] > nondigit[starts]
        starts, ends = starts[keep], ends[keep]
    ntok = len(starts)
    if ntok < shingle or ntok > 1 << 24:  # no tokens / one feature, or (absurdly) too many for float32
        return None
    lens = ends - starts
    width = lens + 1  # each token plus the one space that follows it in the packed buffer
    packed_start = np.cumsum(width) - width
    total = int(packed_start[-1] + width[-1])
    src = np.repeat(starts - packed_start, width) + np.arange(total)
    buf = np.zeros(total + 16, dtype=np.uint8)
    buf[:total] = a[src]  # a[end] is always a space, so every token keeps its single separator
    nfeat = ntok - shingle + 1
    fstart = packed_start[:nfeat]
    flen = packed_start[shingle - 1 :] + lens[shingle - 1 :] - fstart
    h1 = _murmur3_h1(buf, fstart, flen)
    # (nfeat, 64) matrix of hash bits; its column sums via a float32 matrix-vector product (BLAS) are
    # exact, since every count is <= nfeat < 2^24 (enforced above).
    bits = np.unpackbits(h1.view(np.uint8), bitorder="little").reshape(nfeat, 64)
    counts = np.ones(nfeat, dtype=np.float32) @ bits.astype(np.float32)
    return int.from_bytes(np.packbits(2 * counts > nfeat, bitorder="little").tobytes(), "little")


class SimHashIndex:
    """Near-duplicate lookup over 64-bit fingerprints (4 exact-match tables of 16-bit blocks).

    Each table is a flat list of 65,536 buckets indexed by the block value; a bucket is an
    ``array('Q')`` of the unsigned fingerprints with that block (contiguous machine words, so scanning
    the ~15 candidates of a bucket at 1M stored costs one cache miss, not one per boxed int).
    """

    _BLOCKS = 4
    _BLOCK_BITS = 16

    def __init__(self, max_distance: int = 3) -> None:
        if isinstance(max_distance, bool) or not isinstance(max_distance, int):
            raise ValueError("max_distance must be an int")
        if not 0 <= max_distance < self._BLOCKS:
            # The pigeonhole guarantee needs more blocks than allowed differing bits.
            raise ValueError(f"max_distance must be in 0..{self._BLOCKS - 1}, got {max_distance}")
        self.max_distance = max_distance
        # tables[b][block value] -> array of unsigned fingerprints with that block (None if empty)
        self._tables: list[list[array[int] | None]] = [[None] * 65536 for _ in range(self._BLOCKS)]
        self._keys: dict[int, list[str]] = {}  # fingerprint -> keys (exact duplicates share one)
        self._size = 0

    def add(self, fp: int, key: str) -> None:
        """Store ``key`` under fingerprint ``fp``. Adding the same (fp, key) twice is a no-op."""
        u = _check_u64(fp)
        if not isinstance(key, str):
            raise TypeError("key must be str")
        keys = self._keys.get(u)
        if keys is None:
            self._keys[u] = [key]
            for b, table in enumerate(self._tables):
                block = (u >> (16 * b)) & 0xFFFF
                bucket = table[block]
                if bucket is None:
                    table[block] = array("Q", (u,))
                else:
                    bucket.append(u)
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
            for b, table in enumerate(self._tables):
                block = (u >> (16 * b)) & 0xFFFF
                bucket = table[block]
                assert bucket is not None  # every stored fingerprint is in all four tables
                bucket.remove(u)
                if not bucket:
                    table[block] = None
        return True

    def query(self, fp: int) -> list[tuple[str, int, int]]:
        """Every stored (key, fingerprint, distance) with distance <= max_distance, nearest first."""
        u = _check_u64(fp)
        maxd = self.max_distance
        t0, t1, t2, t3 = self._tables
        found: dict[int, int] = {}
        for bucket in (t0[u & 0xFFFF], t1[(u >> 16) & 0xFFFF], t2[(u >> 32) & 0xFFFF], t3[u >> 48]):
            if bucket is not None:
                for cand in bucket:
                    d = (cand ^ u).bit_count()
                    if d <= maxd:
                        found[cand] = d
        if not found:
            return []
        hits = [(key, cand, d) for cand, d in found.items() for key in self._keys[cand]]
        hits.sort(key=lambda h: (h[2], h[0]))
        return hits

    def __len__(self) -> int:
        return self._size

    def __contains__(self, fp: object) -> bool:
        return isinstance(fp, int) and not isinstance(fp, bool) and (fp & _MASK64) in self._keys
