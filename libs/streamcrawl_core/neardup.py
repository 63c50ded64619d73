"""The near-duplicate index's layout: which index rows a 64-bit SimHash is filed under, and which keys a
query reads. Shared by the Cassandra adapter and the in-memory one, so both read what the other writes.

Today: 4 blocks of 16 bits (pigeonhole: two fingerprints within 3 bits share at least one block exactly).
A row is (block number, block value); a query reads the rows of its own 4 (block, value) pairs.
"""

from __future__ import annotations

BLOCKS = 4
BLOCK_BITS = 16
_MASK = (1 << BLOCK_BITS) - 1


def signed64(u: int) -> int:
    """An unsigned 64-bit value as Cassandra's signed bigint."""
    u &= 0xFFFFFFFFFFFFFFFF
    return u - (1 << 64) if u >= 1 << 63 else u


def block_rows(simhash: int) -> list[tuple[int, int]]:
    """The (block number, block value) rows a fingerprint is filed under."""
    u = simhash & 0xFFFFFFFFFFFFFFFF
    return [(b, (u >> (BLOCK_BITS * b)) & _MASK) for b in range(BLOCKS)]


def candidate_keys(simhash: int) -> tuple[list[int], list[int]]:
    """The IN lists of the one near-duplicate read: every block number and the fingerprint's distinct
    block values. Their cartesian product holds the 4 partitions that matter, (b, value of block b), plus
    up to 12 that do not (block b with another block's value): CQL has no IN on (block, value) pairs of a
    partition key, so the read returns a superset and the caller's Hamming check decides."""
    rows = block_rows(simhash)
    return [b for b, _ in rows], sorted({v for _, v in rows})
