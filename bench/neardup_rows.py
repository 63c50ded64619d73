"""Benchmark: index rows a near-duplicate query reads, at 10^6 and 10^7 fingerprints, for the permuted-table
layout (streamcrawl_core.neardup: 20 tables, 31-33-bit keys) against the old one (4 blocks of 16 bits).

The index is simulated in memory with numpy (the rows a Cassandra read would return are exactly the rows
under the query's keys): N uniformly random 64-bit fingerprints; queries are fresh random fingerprints
(a page that is no near duplicate: every row read is a false candidate) and planted near duplicates (a
stored fingerprint with 1-3 bits flipped: the match must be among the rows read). The layout's keys come
from the real `index_keys`, checked against the vectorized ones on a sample.

Run: .venv/bin/python bench/neardup_rows.py [--sizes 1000000 10000000] [--queries 2000]
"""

from __future__ import annotations

import argparse
import random
import time

import numpy as np
from streamcrawl_core.neardup import BLOCK_BITS, TABLES, index_keys

_OFFSETS = [sum(BLOCK_BITS[:i]) for i in range(len(BLOCK_BITS))]


def permuted_keys(fps: np.ndarray) -> list[np.ndarray]:
    """Each table's key of every fingerprint (vectorized `index_keys`)."""
    blocks = [(fps >> np.uint64(off)) & np.uint64((1 << bits) - 1)
              for off, bits in zip(_OFFSETS, BLOCK_BITS, strict=True)]
    out = []
    for t, picked in enumerate(TABLES):
        key = np.zeros_like(fps)
        for b in picked:
            key = (key << np.uint64(BLOCK_BITS[b])) | blocks[b]
        out.append(key | np.uint64(t << 40))
    return out


def old_keys(fps: np.ndarray) -> list[np.ndarray]:
    return [(fps >> np.uint64(16 * b)) & np.uint64(0xFFFF) for b in range(4)]


def rows_read(tables: list[np.ndarray], queries: list[np.ndarray]) -> np.ndarray:
    """Per query: the rows stored under its keys, summed over the tables (sorted key arrays)."""
    total = np.zeros(len(queries[0]), dtype=np.int64)
    for stored, asked in zip(tables, queries, strict=True):
        total += np.searchsorted(stored, asked, side="right") - np.searchsorted(stored, asked, side="left")
    return total


def measure(n: int, nq: int, rng: np.random.Generator) -> dict[str, dict[str, float]]:
    fps = rng.integers(0, 2**63, size=n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, size=n, dtype=np.uint64)
    rnd = random.Random(n)
    picks = rng.integers(0, n, size=nq)
    near = fps[picks].copy()
    for i in range(nq):
        for b in rnd.sample(range(64), rnd.randint(1, 3)):
            near[i] ^= np.uint64(1 << b)
    fresh = rng.integers(0, 2**63, size=nq, dtype=np.uint64) * np.uint64(2)
    sample = [int(x) for x in fps[:50]]
    assert [list(map(int, col)) for col in zip(*[k[:50] for k in permuted_keys(fps[:50])], strict=True)] == \
        [index_keys(x) for x in sample]
    out: dict[str, dict[str, float]] = {}
    for name, layout in (("permuted 20 x 31-33 bits", permuted_keys), ("old 4 x 16 bits", old_keys)):
        t0 = time.perf_counter()
        tables = [np.sort(k) for k in layout(fps)]
        fresh_rows = rows_read(tables, layout(fresh))
        near_rows = rows_read(tables, layout(near))
        out[name] = {"fresh_mean": float(fresh_rows.mean()), "fresh_p99": float(np.percentile(fresh_rows, 99)),
                     "near_mean": float(near_rows.mean()), "near_min": float(near_rows.min()),
                     "seconds": time.perf_counter() - t0}
        del tables
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--queries", type=int, default=2000)
    args = ap.parse_args()
    rng = np.random.default_rng(42)
    print("| fingerprints | layout | rows read per query, not a near dup (mean / p99) | per planted near dup "
          "(mean / min; >= 1 = found) |")
    print("|---|---|---|---|")
    for n in args.sizes:
        for name, r in measure(n, args.queries, rng).items():
            print(f"| {n:,} | {name} | {r['fresh_mean']:.3f} / {r['fresh_p99']:.0f} | "
                  f"{r['near_mean']:.2f} / {r['near_min']:.0f} |")
    per_key = sum(2.0 ** -sum(BLOCK_BITS[b] for b in t) for t in TABLES)
    print(f"expected false candidates per query (permuted): {per_key:.3g} x N "
          f"(10^6: {per_key * 1e6:.3f}, 10^7: {per_key * 1e7:.3f}, 10^9: {per_key * 1e9:.2f}); old: 4/65536 x N "
          f"(10^9: {4e9 / 65536:,.0f})")


if __name__ == "__main__":
    main()
