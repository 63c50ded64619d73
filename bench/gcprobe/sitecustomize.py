"""GC probe: put this directory first on PYTHONPATH and every Python process started with it times its
garbage collections (CPU time of each collection, per generation) and writes the totals to
$GCPROBE_DIR/<pid>.json every 5 s. `bench/gc_report.py $GCPROBE_DIR` prints the table.

    GCPROBE_DIR=/tmp/gcprobe PYTHONPATH=bench/gcprobe:libs:services \\
        .venv/bin/python bench/crawl_bench.py --hosts 2000 --duration 240 --only streamcrawl
"""

from __future__ import annotations

import gc
import json
import os
import sys
import threading
import time

_OUT = os.environ.get("GCPROBE_DIR")
_cpu = [0.0, 0.0, 0.0]
_count = [0, 0, 0]
_started = 0.0


def _callback(phase: str, info: dict[str, int]) -> None:
    global _started
    if phase == "start":
        _started = time.thread_time()  # collections run on the allocating thread, one at a time (GIL)
    else:
        gen = info["generation"]
        _cpu[gen] += time.thread_time() - _started
        _count[gen] += 1


def _dump(path: str) -> None:
    while True:
        time.sleep(5)
        doc = {"argv": " ".join(getattr(sys, "orig_argv", sys.argv)), "gc_cpu_s": _cpu, "collections": _count,
               "process_cpu_s": time.process_time()}
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(doc, f)
        os.replace(tmp, path)


if _OUT:
    os.makedirs(_OUT, exist_ok=True)
    gc.callbacks.append(_callback)
    threading.Thread(target=_dump, args=(os.path.join(_OUT, f"{os.getpid()}.json"),), daemon=True).start()
