"""Benchmark: the dedup seen-set's Bloom filter memory and false-positive rate, as sized from its settings.

For each expected crawl size (STREAMCRAWL_DEDUP_BLOOM_CRAWL_URLS) the partition's filter is built exactly as
dedup builds it (capacity = crawl URLs / partitions, at STREAMCRAWL_DEDUP_BLOOM_FP_RATE), its bytes are
counted from the real object, and the false-positive rate is both the formula's (the metric
streamcrawl_dedup_bloom_expected_fp_ratio) and measured: the filter is filled with its capacity of random
64-bit fingerprints (then twice that, a crawl that outgrew its setting) and probed with fresh ones.

Run: .venv/bin/python bench/bloom_sizing.py [--partitions 64] [--probes 200000]
"""

from __future__ import annotations

import argparse

import numpy as np
from streamcrawl_core.bloom import BloomFilter


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--partitions", type=int, default=64)
    ap.add_argument("--fp-rate", type=float, default=0.01)
    ap.add_argument("--crawl-urls", type=int, nargs="+", default=[16_000_000, 100_000_000, 1_000_000_000])
    ap.add_argument("--probes", type=int, default=200_000)
    ap.add_argument("--fill-limit", type=int, default=40_000_000, help="fill (measure) only filters this small")
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    print(f"{args.partitions} partitions, fp_rate {args.fp_rate}")
    print("| crawl URLs (setting) | per partition | bytes per partition | all partitions | bits per URL | "
          "expected FP at capacity | measured FP at capacity | expected FP at 2x | measured FP at 2x |")
    print("|---|---|---|---|---|---|---|---|---|")
    for crawl in args.crawl_urls:
        cap = max(1, crawl // args.partitions)
        bf = BloomFilter(cap, args.fp_rate)
        size = len(bf.to_bytes())
        measured: list[str] = []
        for fill in (cap, 2 * cap):
            if fill > args.fill_limit:
                measured.append("not run")
                continue
            bf = BloomFilter(cap, args.fp_rate)
            bf.add_many(rng.integers(0, 2**63, size=fill, dtype=np.int64).astype(np.uint64))
            probes = rng.integers(0, 2**63, size=args.probes, dtype=np.int64).astype(np.uint64)
            hits = int(np.count_nonzero(bf.contains_many(probes)))
            measured.append(f"{hits / args.probes:.4f}")
        print(f"| {crawl:,} | {cap:,} | {size / 2**20:.1f} MiB | {size * args.partitions / 2**20:,.0f} MiB | "
              f"{bf.bits_per_item:.2f} | {bf.expected_fp_rate(cap):.4f} | {measured[0]} | "
              f"{bf.expected_fp_rate(2 * cap):.4f} | {measured[1]} |")


if __name__ == "__main__":
    main()
