"""The near-duplicate index's layout: which index rows a 64-bit SimHash is filed under, and which keys a
query reads. Shared by the Cassandra adapter and the in-memory one, so both read what the other writes.

Permuted tables after Manku, Jain and Das Sarma (WWW 2007), for Hamming distance <= 3: the 64 bits are cut
into 6 blocks of 11, 11, 11, 11, 10 and 10 bits, and each of the C(6, 3) = 20 ways to pick 3 blocks is a
table whose key is those blocks' 31 to 33 bits. Two fingerprints within 3 bits differ in at most 3 blocks,
so they agree on at least 3 of them and share the key of that table (pigeonhole). A fingerprint is filed
under its 20 keys and a query reads the same 20: with N fingerprints spread over the key space a key holds
about N / 2^31..33 other rows, so a query reads ~0.005 rows beside its true matches at 10^6 fingerprints,
~0.05 at 10^7 and ~5 at 10^9 (docs/benchmarks-scale.md measures it; the old layout, 4 blocks of 16 bits,
read N / 2^16 per block: ~61 rows at 10^6, ~15k at 10^9).

A key is one bigint: the table's number above bit 40, the picked blocks' bits below, so each (table,
bits) pair is its own Cassandra partition and one ``key IN (...)`` read covers all 20.
"""

from __future__ import annotations

from itertools import combinations

BLOCK_BITS = (11, 11, 11, 11, 10, 10)
#: Each table: the blocks its key is made of (in order).
TABLES: tuple[tuple[int, ...], ...] = tuple(combinations(range(len(BLOCK_BITS)), 3))
MAX_DISTANCE = 3  # the distance the layout guarantees to find: blocks - blocks per key
_TABLE_SHIFT = 40
_OFFSETS = tuple(sum(BLOCK_BITS[:i]) for i in range(len(BLOCK_BITS)))
_MASKS = tuple((1 << b) - 1 for b in BLOCK_BITS)


def signed64(u: int) -> int:
    """An unsigned 64-bit value as Cassandra's signed bigint."""
    u &= 0xFFFFFFFFFFFFFFFF
    return u - (1 << 64) if u >= 1 << 63 else u


def _blocks(simhash: int) -> tuple[int, ...]:
    u = simhash & 0xFFFFFFFFFFFFFFFF
    return tuple((u >> off) & mask for off, mask in zip(_OFFSETS, _MASKS, strict=True))


def index_keys(simhash: int) -> list[int]:
    """The 20 keys a fingerprint is filed under, one per table (which are also the keys a query reads)."""
    blocks = _blocks(simhash)
    keys = []
    for t, picked in enumerate(TABLES):
        value = 0
        for b in picked:
            value = (value << BLOCK_BITS[b]) | blocks[b]
        keys.append((t << _TABLE_SHIFT) | value)
    return keys


def candidate_keys(simhash: int) -> list[int]:
    """The keys of the one near-duplicate read: the query's own 20 (every fingerprint within
    `MAX_DISTANCE` bits shares at least one of them; the caller's Hamming check drops the rest)."""
    return index_keys(simhash)
