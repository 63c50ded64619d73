"""How long one full garbage collection takes in the synthetic web server's process, with the generated
web tracked (Python's default) and frozen (what `streamcrawl-synthweb` does at start-up, freeze_heap).
A pause this long between a response's last write and its logged end shows up in the request log.

    .venv/bin/python bench/synthweb_gc.py --hosts 200 2000 --repeats 7
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.main import freeze_heap
from streamcrawl_synthweb.model import PROFILES


def _full_collection_ms(repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        gc.collect()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--hosts", type=int, nargs="+", default=[200, 2000])
    p.add_argument("--profile", default="default")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args()
    print("| hosts | tracked objects | full collection, web tracked (median ms) | web frozen (median ms) |")
    print("|---|---|---|---|")
    for hosts in args.hosts:
        web = generate(hosts, 7, PROFILES[args.profile])
        tracked = len(gc.get_objects())
        before = _full_collection_ms(args.repeats)
        freeze_heap()
        after = _full_collection_ms(args.repeats)
        gc.unfreeze()
        print(f"| {hosts:,} | {tracked:,} | {before:.1f} | {after:.3f} |")
        del web
        gc.collect()


if __name__ == "__main__":
    main()
