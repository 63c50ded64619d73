"""Benchmarks for streamcrawl_core part A (urls, fingerprint, bloom, simhash) and compiled alternatives.

Plain script, no pytest: each case runs ``--repeats`` times and the MEDIAN is reported (the machine is
shared, so medians are the honest number). Optional alternatives (ada-url, rbloom, xxhash, tldextract)
are measured side by side when importable and skipped otherwise.

The first table ("targets") runs each core speed target twice, interleaved in one process: "before" is
the pure-Python code (what runs without the compiled extension ``streamcrawl_native``; it is also the
code of every release before it), "after" is the same call with the extension.

    .venv/bin/python bench/core_a.py                 # full run (~1 min on 2 shared cores)
    .venv/bin/python bench/core_a.py --quick         # smaller inputs, for a smoke test
    .venv/bin/python bench/core_a.py --targets-only  # just the before/after table of the targets
    .venv/bin/python bench/core_a.py --baseline REV  # also old (git REV) vs current, interleaved, same run
"""

from __future__ import annotations

import argparse
import contextlib
import math
import platform
import random
import statistics
import sys
import time
from typing import Any

import numpy as np
from core_common import (  # bench/ is on sys.path: this is a script
    ROWS,
    _load,
    _met,
    _opt,
    make_urls,
    median_rate,
    row,
    words,
)
from core_compare import bench_targets, compare
from streamcrawl_core._native import NATIVE
from streamcrawl_core.bloom import BloomFilter
from streamcrawl_core.fingerprint import registered_domain, url_fingerprint
from streamcrawl_core.simhash import SimHashIndex, simhash
from streamcrawl_core.urls import UrlError, normalize


def bench_urls(n: int, repeats: int) -> None:
    rnd = random.Random(1)
    absolute, relative = make_urls(n, rnd)

    def ours_abs() -> int:
        for u in absolute:
            url_fingerprint(normalize(u))
        return len(absolute)

    def ours_rel() -> int:
        for base, ref in relative:
            url_fingerprint(normalize(ref, base))
        return len(relative)

    r = median_rate(ours_abs, repeats)
    row("normalize+fingerprint, absolute URLs (ours)", ">= 200k/s", f"{r / 1e3:,.0f}k URLs/s", _met(r >= 200e3))
    r = median_rate(ours_rel, repeats)
    row("normalize+fingerprint, relative href + base (ours)", ">= 200k/s", f"{r / 1e3:,.0f}k URLs/s", _met(r >= 200e3))

    ada = _opt("ada_url")
    if ada is None:
        row("ada-url normalize_url (WHATWG only, no policy)", "-", "skipped (not installed)", "-")
        return

    def ada_abs() -> int:
        for u in absolute:
            url_fingerprint(ada.normalize_url(u))
        return len(absolute)

    def ada_rel() -> int:
        for base, ref in relative:
            url_fingerprint(ada.join_url(base, ref))
        return len(relative)

    r = median_rate(ada_abs, repeats)
    row("ada-url normalize_url + fingerprint (no policy steps)", "info", f"{r / 1e3:,.0f}k URLs/s", "-")
    r = median_rate(ada_rel, repeats)
    row("ada-url join_url + fingerprint (no policy steps)", "info", f"{r / 1e3:,.0f}k URLs/s", "-")
    rfc = _ada_rfc_vectors(ada)
    row("ada-url join_url on RFC 3986 5.4 vectors (ours: 42/42)", "info", f"{rfc}/42 pass", "-")


def _ada_rfc_vectors(ada: Any) -> int:
    sys.path.insert(0, ".")
    from tests.unit.core.test_urls import ABNORMAL, BASE, NORMAL

    ok = 0
    for ref, expected in NORMAL + ABNORMAL:
        with contextlib.suppress(ValueError):
            ok += ada.join_url(BASE, ref) == expected
    return ok


def bench_bloom(n: int, repeats: int) -> None:
    rnd = random.Random(2)
    p = 0.01
    bf = BloomFilter(n, p)
    inserted = [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]
    t0 = time.perf_counter()
    bf.add_many(inserted)
    add_rate = n / (time.perf_counter() - t0)
    probes = inserted[:50_000] + [rnd.getrandbits(64) - (1 << 63) for _ in range(50_000)]
    rnd.shuffle(probes)
    absent = probes[:0] + [rnd.getrandbits(64) - (1 << 63) for _ in range(100_000)]

    r = median_rate(lambda: len(bf.contains_many(probes)), repeats)
    row(f"Bloom contains_many, 50% hits, {n:,} items (ours)", ">= 2M/s", f"{r / 1e6:.2f}M/s", _met(r >= 2e6))
    r = median_rate(lambda: len(bf.contains_many(absent)), repeats)
    row("Bloom contains_many, all new URLs (ours)", ">= 2M/s", f"{r / 1e6:.2f}M/s", _met(r >= 2e6))
    as_array = np.array(probes, dtype=np.int64)
    r = median_rate(lambda: len(bf.contains_many(as_array)), repeats)
    row("Bloom contains_many on an int64 numpy array, 50% hits (ours)", ">= 2M/s", f"{r / 1e6:.2f}M/s", _met(r >= 2e6))
    row("Bloom add_many (ours, one run)", "info", f"{add_rate / 1e6:.2f}M/s", "-")
    ideal = -math.log(p) / math.log(2) ** 2
    err = abs(bf.bits_per_item - ideal) / ideal
    row(
        f"Bloom bits/URL at p={p} vs -ln p/(ln 2)^2 = {ideal:.3f}",
        "within 1%",
        f"{bf.bits_per_item:.3f} ({err:.4%})",
        _met(err <= 0.01),
    )
    rb = _opt("rbloom")
    if rb is None:
        row("rbloom (compiled) contains", "-", "skipped (not installed)", "-")
        return
    other = rb.Bloom(n, p)
    other.update(inserted)
    contains = other.__contains__
    r = median_rate(lambda: len(list(map(contains, probes))), repeats)
    row("rbloom 1.5.4 `in` via map(), 50% hits (compiled)", "info", f"{r / 1e6:.2f}M/s", "-")
    row("rbloom bits/URL", "info", f"{other.size_in_bits / n:.3f}", "-")


def bench_simhash(repeats: int, pages: int) -> None:
    rnd = random.Random(3)
    docs = [words(rnd, 20_000) for _ in range(pages)]
    r = median_rate(lambda: sum(1 for d in docs if simhash(d) >= 0), repeats)
    row("SimHash of a 20 KB page (ours)", ">= 5k pages/s", f"{r:,.0f} pages/s", _met(r >= 5e3))
    accented = [d.replace("e", "\u00e9") for d in docs]  # not ASCII: the generic (per-feature mmh3) path
    r = median_rate(lambda: sum(1 for d in accented if simhash(d) >= 0), repeats)
    row("SimHash of a 20 KB non-ASCII page (ours, generic path)", "info", f"{r:,.0f} pages/s", "-")


def bench_index(size: int, queries: int) -> None:
    rnd = random.Random(4)
    idx = SimHashIndex(3)
    stored = [rnd.getrandbits(64) for _ in range(size)]
    t0 = time.perf_counter()
    for i, fp in enumerate(stored):
        idx.add(fp, f"u{i}")
    build = time.perf_counter() - t0
    lat = []
    for _ in range(queries):
        q = rnd.choice(stored) ^ (1 << rnd.randrange(64)) if rnd.random() < 0.5 else rnd.getrandbits(64)
        t = time.perf_counter_ns()
        idx.query(q)
        lat.append(time.perf_counter_ns() - t)
    lat.sort()
    med = statistics.median(lat) / 1e3
    row(f"SimHash near-dup query, {size:,} stored (median)", "<= 20 us", f"{med:.1f} us", _met(med <= 20))
    row("  same, p99 / index build", "info", f"{lat[int(0.99 * len(lat))] / 1e3:.1f} us / {build:.1f} s", "-")


def bench_domains(n: int, repeats: int) -> None:
    rnd = random.Random(5)
    suffixes = ["com", "co.uk", "synth.test", "github.io", "com.au", "de", "kawasaki.jp"]
    hosts = [f"w{rnd.randrange(10**4)}.x{rnd.randrange(10**3)}.{rnd.choice(suffixes)}" for _ in range(n)]
    r = median_rate(lambda: sum(1 for h in hosts if registered_domain(h)), repeats)
    row("registered_domain (ours, vendored PSL)", "info", f"{r / 1e3:,.0f}k hosts/s", "-")
    r = median_rate(lambda: sum(1 for h in hosts if ".".join(h.rsplit(".", 2)[-2:])), repeats)
    row("plain split: last two labels (wrong for co.uk etc.)", "info", f"{r / 1e3:,.0f}k hosts/s", "-")
    tld = _opt("tldextract")
    if tld is None:
        row("tldextract", "-", "skipped (not installed)", "-")
        return
    ext = tld.TLDExtract(suffix_list_urls=(), cache_dir=None)
    r = median_rate(lambda: sum(1 for h in hosts if ext(h).domain), repeats)
    row("tldextract 5.4 offline snapshot", "info", f"{r / 1e3:,.0f}k hosts/s", "-")



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small inputs (smoke test)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline", metavar="REV", help="also compare with the part-A modules of git REV")
    ap.add_argument("--compare-only", action="store_true", help="with --baseline: skip the main table")
    ap.add_argument("--targets-only", action="store_true", help="only the before/after table of the targets")
    args = ap.parse_args()
    q = args.quick
    print(f"python {platform.python_version()} on {platform.machine()}, {platform.system()}, load avg {_load()}")
    print(f"streamcrawl_native: {'loaded' if NATIVE is not None else 'not installed (pure Python)'}")
    if args.targets_only:
        bench_targets(args.repeats, q)
        return
    if args.baseline and args.compare_only:
        compare(args.baseline, args.repeats, q)
        return
    print(f"{'operation':58s} {'target':>14s} {'measured (median)':>22s} {'met':>6s}")
    bench_targets(args.repeats, q)
    print(
        f"\n{'operation (current code, extension loaded if built)':58s} {'target':>14s} {'measured':>22s} {'met':>6s}"
    )
    bench_urls(5_000 if q else 30_000, args.repeats)
    bench_bloom(100_000 if q else 1_000_000, args.repeats)
    bench_simhash(args.repeats, 5 if q else 20)
    bench_index(50_000 if q else 1_000_000, 2_000 if q else 20_000)
    bench_domains(5_000 if q else 30_000, args.repeats)
    print("\n| operation | target | measured (median) | met? |\n|---|---|---|---|")
    for op, target, measured, met in ROWS:
        print(f"| {op} | {target} | {measured} | {met} |")
    if args.baseline:
        compare(args.baseline, args.repeats, q)


if __name__ == "__main__":
    try:
        main()
    except UrlError as exc:  # a workload bug, not a benchmark result
        sys.exit(f"benchmark input rejected: {exc}")
