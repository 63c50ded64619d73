"""The near-duplicate index layout (permuted tables): everything within 3 bits shares a key, keys are long
enough that unrelated fingerprints rarely do, and the keys fit a Cassandra bigint."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st
from streamcrawl_core.neardup import BLOCK_BITS, MAX_DISTANCE, TABLES, candidate_keys, index_keys, signed64

U64 = st.integers(min_value=0, max_value=(1 << 64) - 1)


def test_the_layout_is_six_blocks_and_twenty_tables_of_three() -> None:
    assert sum(BLOCK_BITS) == 64 and len(BLOCK_BITS) == 6
    assert len(TABLES) == 20 and all(len(t) == 3 for t in TABLES) and MAX_DISTANCE == 3
    key_bits = sorted(sum(BLOCK_BITS[b] for b in t) for t in TABLES)
    assert key_bits[0] == 31 and key_bits[-1] == 33


@given(U64, st.lists(st.integers(min_value=0, max_value=63), min_size=0, max_size=3, unique=True))
def test_every_fingerprint_within_three_bits_shares_a_key(fp: int, bits: list[int]) -> None:
    other = fp
    for b in bits:
        other ^= 1 << b
    assert set(index_keys(fp)) & set(candidate_keys(other))


@given(U64)
def test_keys_are_distinct_per_table_and_fit_a_bigint(fp: int) -> None:
    keys = index_keys(fp)
    assert len(keys) == 20 and len(set(k >> 40 for k in keys)) == 20
    assert all(0 <= k < (1 << 63) for k in keys)
    assert signed64(fp) == (fp - (1 << 64) if fp >= 1 << 63 else fp)


def test_unrelated_fingerprints_almost_never_share_a_key() -> None:
    rnd = random.Random(7)
    index: set[int] = set()
    for _ in range(20_000):
        index.update(index_keys(rnd.getrandbits(64)))
    hits = sum(bool(index & set(candidate_keys(rnd.getrandbits(64)))) for _ in range(2_000))
    # 20 keys of 31-33 bits against 20k fingerprints: ~0.0001 expected hits per query
    assert hits <= 2


def test_four_bits_apart_in_four_blocks_shares_no_key() -> None:
    fp = 0x0123_4567_89AB_CDEF
    other = fp ^ (1 << 0) ^ (1 << 11) ^ (1 << 22) ^ (1 << 33)  # one bit in each of blocks 0-3
    assert not set(index_keys(fp)) & set(candidate_keys(other))
