"""What the core benchmarks share: median rates, the result rows, and the synthetic URLs and text they run on."""

from __future__ import annotations

import importlib
import os
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

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

def _load() -> str:
    try:
        return ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _met(ok: bool) -> str:
    return "yes" if ok else "NO"
