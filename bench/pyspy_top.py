"""Where a service's time goes, from a py-spy collapsed-stack file (``crawl_bench.py --pyspy``).

    .venv/bin/python bench/pyspy_top.py /tmp/streamcrawl-bench-crawl/streamcrawl-0/pyspy-*.txt

For each file: the functions with the most samples on the stack (inclusive) and on top (self), as % of
the file's samples. Idle samples are not recorded by py-spy (no ``--idle``), so 100% = the time the
process was running Python or native code under Python.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

_LINE = re.compile(r"^(.*) (\d+)$")


def load(path: Path) -> tuple[Counter[str], Counter[str], int]:
    """(inclusive, self, total samples) per frame "function (file)" of one collapsed-stack file."""
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        frames = [re.sub(r":\d+\)$", ")", f) for f in m.group(1).split(";") if f]
        n = int(m.group(2))
        total += n
        for f in set(frames):
            inclusive[f] += n
        if frames:
            own[frames[-1]] += n
    return inclusive, own, total


def short(frame: str) -> str:
    """``handle (services/streamcrawl_dedup/handler.py)`` → ``handle (streamcrawl_dedup/handler.py)``."""
    m = re.match(r"^(.*) \((.*)\)$", frame)
    if not m:
        return frame
    parts = m.group(2).split("/")
    return f"{m.group(1)} ({'/'.join(parts[-2:])})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("files", nargs="+", type=Path)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    for path in args.files:
        inclusive, own, total = load(path)
        print(f"\n## {path.name}: {total} samples\n")
        print("| inclusive % | function | | self % | function |\n|---|---|---|---|---|")
        inc, slf = inclusive.most_common(args.top), own.most_common(args.top)
        for i in range(max(len(inc), len(slf))):
            a = f"{100 * inc[i][1] / total:.1f} | {short(inc[i][0])}" if i < len(inc) else " | "
            b = f"{100 * slf[i][1] / total:.1f} | {short(slf[i][0])}" if i < len(slf) else " | "
            print(f"| {a} | | {b} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
