"""Print the GC probe's totals (see bench/gcprobe/sitecustomize.py) as a Markdown table, one row per
streamcrawl service process: CPU-s in collections per generation, and their share of the process's CPU."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("dir", type=Path)
    args = p.parse_args()
    rows = []
    for f in sorted(args.dir.glob("*.json")):
        doc = json.loads(f.read_text())
        m = re.search(r"streamcrawl_(\w+)\.main", doc["argv"])
        if not m:
            continue
        gc_s = doc["gc_cpu_s"]
        rows.append((m.group(1), gc_s, doc["collections"], doc["process_cpu_s"]))
    print("| process | GC CPU-s gen 0 / 1 / 2 | collections gen 0 / 1 / 2 | process CPU-s | GC share |")
    print("|---|---|---|---|---|")
    for name, gc_s, n, cpu in sorted(rows):
        share = sum(gc_s) / cpu if cpu else 0.0
        print(f"| {name} | {' / '.join(f'{x:.2f}' for x in gc_s)} | {' / '.join(map(str, n))} | {cpu:.1f} | "
              f"{100 * share:.1f}% |")
    total_gc = sum(sum(r[1]) for r in rows if r[0] != "synthweb")
    total_cpu = sum(r[3] for r in rows if r[0] != "synthweb")
    if total_cpu:
        print(f"\ncrawler services: {total_gc:.1f} of {total_cpu:.1f} CPU-s in GC ({100 * total_gc / total_cpu:.1f}%)")


if __name__ == "__main__":
    main()
