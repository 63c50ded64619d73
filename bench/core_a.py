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
import importlib
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mmh3
import numpy as np
from streamcrawl_core import bloom as bloom_mod
from streamcrawl_core import simhash as simhash_mod
from streamcrawl_core._native import NATIVE
from streamcrawl_core.bloom import BloomFilter
from streamcrawl_core.fingerprint import registered_domain, url_fingerprint
from streamcrawl_core.simhash import SimHashIndex, simhash
from streamcrawl_core.urls import NormalizerConfig, UrlError, normalize

ROWS: list[tuple[str, str, str, str]] = []


def _opt(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def median_rate(fn: Callable[[], int], repeats: int) -> float:
    """Median items/second over ``repeats`` runs; ``fn`` returns how many items it processed."""
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        n = fn()
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def row(op: str, target: str, measured: str, met: str) -> None:
    ROWS.append((op, target, measured, met))
    print(f"{op:58s} {target:>14s} {measured:>22s} {met:>6s}", flush=True)


# --- workloads -------------------------------------------------------------------------------------


def make_urls(n: int, rnd: random.Random) -> tuple[list[str], list[tuple[str, str]]]:
    absolute, relative = [], []
    for _ in range(n):
        host = f"h{rnd.randrange(5000):04d}.synth.test"
        path = f"/section/{rnd.randrange(50)}/article-{rnd.randrange(10**6)}.html"
        query = rnd.choice(["", f"?page={rnd.randrange(9)}", f"?b=2&a=1&utm_source=feed&id={rnd.randrange(99)}"])
        scheme = rnd.choice(["http", "https", "HTTPS"])
        absolute.append(f"{scheme}://{host.upper() if rnd.random() < 0.1 else host}{path}{query}#top")
        relative.append((f"https://{host}/a/b/index.html", rnd.choice(["../c/d.html", "/x?y=1", "e.html#f"])))
    return absolute, relative


def words(rnd: random.Random, nbytes: int) -> str:
    vocab = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9))) for _ in range(8000)]
    out, size = [], 0
    while size < nbytes:
        w = rnd.choice(vocab)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


# --- cases -----------------------------------------------------------------------------------------


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


# --- the core targets: pure Python (before) vs the compiled extension (after), interleaved -----------


@contextlib.contextmanager
def _pure_modules() -> Any:
    """Switch the extension off for simhash and bloom (normalize takes a config without it instead)."""
    saved = simhash_mod._nat, bloom_mod._nat
    simhash_mod._nat = bloom_mod._nat = None
    try:
        yield
    finally:
        simhash_mod._nat, bloom_mod._nat = saved


def _pure(fn: Callable[[], int]) -> Callable[[], int]:
    def run() -> int:
        with _pure_modules():
            return fn()

    return run


def _pure_config() -> NormalizerConfig:
    config = NormalizerConfig()
    object.__setattr__(config, "_native", None)
    return config


TARGETS: list[tuple[str, float, float, float | None, str]] = []
HASHES: list[tuple[str, float]] = []


def _target(op: str, unit: str, target: float | None, before: float, after: float, scale: float) -> None:
    TARGETS.append((op, before / scale, after / scale, None if target is None else target / scale, unit))


def bench_targets(repeats: int, quick: bool) -> None:
    if NATIVE is None:
        print("\n## targets: streamcrawl_native is not installed (run `make venv` with cargo): skipped")
        return
    print(f"\n## targets: pure Python (before) vs compiled (after), interleaved, median of {repeats}")
    rnd = random.Random(1)
    absolute, relative = make_urls(5_000 if quick else 30_000, rnd)
    pure_cfg = _pure_config()
    normalized = [normalize(u) for u in absolute]
    r = interleaved(
        {
            "before abs": lambda: sum(1 for u in absolute if url_fingerprint(normalize(u, None, pure_cfg)) or True),
            "after abs": lambda: sum(1 for u in absolute if url_fingerprint(normalize(u)) or True),
            "before rel": lambda: sum(1 for b, u in relative if url_fingerprint(normalize(u, b, pure_cfg)) or True),
            "after rel": lambda: sum(1 for b, u in relative if url_fingerprint(normalize(u, b)) or True),
            "before norm": lambda: sum(1 for u in absolute if normalize(u, None, pure_cfg)),
            "after norm": lambda: sum(1 for u in absolute if normalize(u)),
            "fingerprint": lambda: sum(1 for u in normalized if url_fingerprint(u) or True),
        },
        repeats,
    )
    _target("normalize+fingerprint, absolute URLs", "k URLs/s", 200e3, r["before abs"], r["after abs"], 1e3)
    _target("normalize+fingerprint, relative href + base", "k URLs/s", 200e3, r["before rel"], r["after rel"], 1e3)
    _target("  of which normalize alone (absolute)", "k URLs/s", None, r["before norm"], r["after norm"], 1e3)
    HASHES.append(("url_fingerprint (mmh3, with its type checks)", r["fingerprint"] / 1e3))
    _hash_alternatives(normalized, repeats)

    docs = [words(random.Random(3), 20_000) for _ in range(5 if quick else 20)]
    accented = [d.replace("e", "\u00e9") for d in docs]
    with _pure_modules():
        expected = [simhash(d) for d in docs + accented]
    assert [simhash(d) for d in docs + accented] == expected, "simhash values differ"
    r = interleaved(
        {
            "before": _pure(lambda: sum(1 for d in docs if simhash(d) >= 0)),
            "after": lambda: sum(1 for d in docs if simhash(d) >= 0),
            "before accented": _pure(lambda: sum(1 for d in accented if simhash(d) >= 0)),
            "after accented": lambda: sum(1 for d in accented if simhash(d) >= 0),
        },
        repeats,
    )
    _target("SimHash of a 20 KB ASCII page", "pages/s", 5e3, r["before"], r["after"], 1)
    _target(
        "SimHash of a 20 KB non-ASCII page (e -> e-acute)", "pages/s", 5e3, r["before accented"], r["after accented"], 1
    )

    n = 100_000 if quick else 1_000_000
    rnd = random.Random(2)
    inserted = [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]
    bf = BloomFilter(n, 0.01)
    bf.add_many(inserted)
    probes = inserted[:50_000] + [rnd.getrandbits(64) - (1 << 63) for _ in range(50_000)]
    rnd.shuffle(probes)
    absent = [rnd.getrandbits(64) - (1 << 63) for _ in range(100_000)]
    as_array = np.array(probes, dtype=np.int64)
    batches = [[rnd.getrandbits(64) - (1 << 63) for _ in range(100)] for _ in range(1_000)]  # links of a page
    fresh: dict[str, BloomFilter] = {}

    def add_batches(side: str) -> int:
        fresh[side] = target = BloomFilter(200_000, 0.01)
        for batch in batches:
            target.add_many(batch)
        return 100 * len(batches)

    with _pure_modules():
        expected_hits = bf.contains_many(probes)
    assert bf.contains_many(probes) == expected_hits, "Bloom answers differ"
    r = interleaved(
        {
            "before hits": _pure(lambda: len(bf.contains_many(probes))),
            "after hits": lambda: len(bf.contains_many(probes)),
            "before absent": _pure(lambda: len(bf.contains_many(absent))),
            "after absent": lambda: len(bf.contains_many(absent)),
            "before array": _pure(lambda: len(bf.contains_many(as_array))),
            "after array": lambda: len(bf.contains_many(as_array)),
            "before add": _pure(lambda: add_batches("before")),
            "after add": lambda: add_batches("after"),
        },
        repeats,
    )
    assert fresh["before"].to_bytes() == fresh["after"].to_bytes(), "Bloom bit layouts differ"
    _target(
        f"Bloom contains_many, 50% hits, {n:,} items, Python list",
        "M checks/s",
        2e6,
        r["before hits"],
        r["after hits"],
        1e6,
    )
    _target("Bloom contains_many, all new, Python list", "M checks/s", 2e6, r["before absent"], r["after absent"], 1e6)
    _target(
        "Bloom contains_many, 50% hits, int64 numpy array", "M checks/s", None, r["before array"], r["after array"], 1e6
    )
    _target("Bloom add_many, batches of 100 (one page's links)", "M adds/s", None, r["before add"], r["after add"], 1e6)

    print("\n| target | before (pure Python) | after (compiled) | speed-up | target | met? |")
    print("|---|---|---|---|---|---|")
    for op, before, after, target, unit in TARGETS:
        met = "-" if target is None else _met(after >= target)
        goal = "info" if target is None else f">= {target:g}"
        print(f"| {op} | {before:,.2f} | {after:,.2f} | {after / before:.2f}x | {goal} {unit} | {met} |")
    print("\n| the fingerprint's hash call alone, same normalized URLs | k URLs/s |\n|---|---|")
    for name, rate in HASHES:
        print(f"| {name} | {rate:,.0f} |")


def _hash_alternatives(normalized: list[str], repeats: int) -> None:
    """mmh3 (the fingerprint's hash) vs xxhash on the same normalized URLs, hash call only."""
    xx = _opt("xxhash")
    raw = [u.encode() for u in normalized]
    cases: dict[str, Callable[[], int]] = {
        "mmh3.hash64(str)": lambda: sum(1 for u in normalized if mmh3.hash64(u, 0, True, True)[0] or True),
        "mmh3.hash64(bytes)": lambda: sum(1 for u in raw if mmh3.hash64(u, 0, True, True)[0] or True),
    }
    if xx is not None:  # xxhash takes bytes only: a str must be encoded first
        xxh3 = xx.xxh3_64_intdigest
        cases["xxhash.xxh3_64_intdigest(str.encode())"] = lambda: sum(1 for u in normalized if xxh3(u.encode()) or True)
        cases["xxhash.xxh3_64_intdigest(bytes)"] = lambda: sum(1 for u in raw if xxh3(u) or True)
    for name, rate in interleaved(cases, repeats).items():
        HASHES.append((name, rate / 1e3))


# --- old vs new, interleaved in one process (the shared machine's load hits both sides alike) -------


# Part-A modules in import order; the ones split from urls.py (and the extension loader) exist only in
# newer revisions and are loaded when present, so a baseline's urls.py imports its own helpers.
_PART_A = ("_native", "url_policy", "rfc3986", "url_host", "urls", "fingerprint", "bloom", "simhash")


def load_baseline(rev: str) -> dict[str, types.ModuleType]:
    """The part-A modules as of git ``rev``, loaded under private names next to the current ones."""
    root = Path(__file__).resolve().parent.parent
    mods: dict[str, types.ModuleType] = {}
    saved = {name: sys.modules.get(f"streamcrawl_core.{name}") for name in _PART_A}
    try:
        for name in _PART_A:
            shown = subprocess.run(
                ["git", "show", f"{rev}:libs/streamcrawl_core/{name}.py"], cwd=root, capture_output=True, text=True
            )
            if shown.returncode != 0:
                continue  # not in that revision
            mod = types.ModuleType(f"baseline_{name}")
            mod.__file__ = str(root / "libs" / "streamcrawl_core" / f"{name}.py")  # for its data files
            sys.modules[mod.__name__] = mod  # dataclasses look their module up
            sys.modules[f"streamcrawl_core.{name}"] = mod  # the baseline's own imports get the baseline
            exec(compile(shown.stdout, f"{rev}:{name}.py", "exec"), mod.__dict__)
            mods[name] = mod
    finally:
        for name, current in saved.items():
            if current is not None:
                sys.modules[f"streamcrawl_core.{name}"] = current
    return mods


def interleaved(cases: dict[str, Callable[[], int]], repeats: int) -> dict[str, float]:
    rates: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            n = fn()
            rates[name].append(n / (time.perf_counter() - t0))
    return {k: statistics.median(v) for k, v in rates.items()}


def compare(rev: str, repeats: int, quick: bool) -> None:
    old = load_baseline(rev)
    print(f"\n## baseline {rev} vs current, interleaved, median of {repeats} (load avg {_load()})")
    out: list[tuple[str, float, float, str]] = []
    absolute, relative = make_urls(5_000 if quick else 30_000, random.Random(1))
    on, of = old["urls"].normalize, old["fingerprint"].url_fingerprint
    r = interleaved(
        {
            "old abs": lambda: sum(1 for u in absolute if of(on(u)) or True),
            "new abs": lambda: sum(1 for u in absolute if url_fingerprint(normalize(u)) or True),
            "old rel": lambda: sum(1 for b, u in relative if of(on(u, b)) or True),
            "new rel": lambda: sum(1 for b, u in relative if url_fingerprint(normalize(u, b)) or True),
        },
        repeats,
    )
    out.append(("normalize+fingerprint, absolute", r["old abs"] / 1e3, r["new abs"] / 1e3, "k URLs/s"))
    out.append(("normalize+fingerprint, relative + base", r["old rel"] / 1e3, r["new rel"] / 1e3, "k URLs/s"))

    n = 100_000 if quick else 1_000_000
    rnd = random.Random(2)
    inserted = [rnd.getrandbits(64) - (1 << 63) for _ in range(n)]
    filters = {}
    for side, cls in (("old", old["bloom"].BloomFilter), ("new", BloomFilter)):
        bf = cls(n, 0.01)
        t0 = time.perf_counter()
        bf.add_many(inserted)
        filters[side] = (bf, n / (time.perf_counter() - t0))
    assert bytes(filters["old"][0]._bits) == bytes(filters["new"][0]._bits), "bit layouts differ"
    probes = inserted[:50_000] + [rnd.getrandbits(64) - (1 << 63) for _ in range(50_000)]
    rnd.shuffle(probes)
    absent = [rnd.getrandbits(64) - (1 << 63) for _ in range(100_000)]
    ob, nb = filters["old"][0], filters["new"][0]
    r = interleaved(
        {
            "old hits": lambda: len(ob.contains_many(probes)),
            "new hits": lambda: len(nb.contains_many(probes)),
            "old absent": lambda: len(ob.contains_many(absent)),
            "new absent": lambda: len(nb.contains_many(absent)),
        },
        repeats,
    )
    out.append((f"Bloom contains_many, 50% hits, {n:,} items", r["old hits"] / 1e6, r["new hits"] / 1e6, "M/s"))
    out.append(("Bloom contains_many, all new", r["old absent"] / 1e6, r["new absent"] / 1e6, "M/s"))
    out.append(("Bloom add_many (one run each)", filters["old"][1] / 1e6, filters["new"][1] / 1e6, "M/s"))

    docs = [words(random.Random(3), 20_000) for _ in range(5 if quick else 20)]
    osh = old["simhash"].simhash
    assert all(osh(d) == simhash(d) for d in docs), "simhash values differ"
    r = interleaved(
        {"old": lambda: sum(1 for d in docs if osh(d) >= 0), "new": lambda: sum(1 for d in docs if simhash(d) >= 0)},
        repeats,
    )
    out.append(("SimHash of a 20 KB page", r["old"], r["new"], "pages/s"))

    size = 50_000 if quick else 1_000_000
    rnd = random.Random(4)
    stored = [rnd.getrandbits(64) for _ in range(size)]
    indexes = {"old": old["simhash"].SimHashIndex(3), "new": SimHashIndex(3)}
    for idx in indexes.values():
        for i, fp in enumerate(stored):
            idx.add(fp, f"u{i}")
    lat: dict[str, list[int]] = {"old": [], "new": []}
    for _ in range(2_000 if quick else 20_000):
        q = rnd.choice(stored) ^ (1 << rnd.randrange(64)) if rnd.random() < 0.5 else rnd.getrandbits(64)
        for side, idx in indexes.items():
            t = time.perf_counter_ns()
            idx.query(q)
            lat[side].append(time.perf_counter_ns() - t)
    med = {k: statistics.median(v) / 1e3 for k, v in lat.items()}
    out.append((f"near-dup query at {size:,} stored, median latency", med["old"], med["new"], "us (lower is better)"))

    print("\n| operation | baseline | current | ratio | unit |\n|---|---|---|---|---|")
    for op, a, b, unit in out:
        ratio = a / b if unit.startswith("us") else b / a
        print(f"| {op} | {a:,.2f} | {b:,.2f} | {ratio:.2f}x | {unit} |")


def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"


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
