"""The core benchmarks' side-by-side tables: each speed target before (pure Python) and after (the compiled
extension), interleaved in one process, and the current code against an older git revision
(``core_a.py --baseline REV``)."""

from __future__ import annotations

import contextlib
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
from core_common import _load, _met, _opt, make_urls, words
from streamcrawl_core import bloom as bloom_mod
from streamcrawl_core import simhash as simhash_mod
from streamcrawl_core._native import NATIVE
from streamcrawl_core.bloom import BloomFilter
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.simhash import SimHashIndex, simhash
from streamcrawl_core.urls import NormalizerConfig, normalize

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
