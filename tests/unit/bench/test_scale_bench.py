"""bench/scale_bench.py, bench/frontier_memory.py and bench/neardup_rows.py without their full loads: the
report's arithmetic, and small runs of the memory and index benchmarks."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_the_scale_report_sums_instances_per_service_and_compares_to_one() -> None:
    sb = _load("scale_bench")
    cpu = {"frontier": 1.0, "fetcher": 3.0, "parser": 2.0, "dedup": 2.0, "recrawl": 0.5}
    one = sb.ScaleRun(1, 100.0, 1000, cpu, {"kafka": 4.0, "cassandra": 6.0}, 1.0, {"project_rule": 0})
    three = sb.ScaleRun(3, 100.0, 900, {k: v * 1.1 for k, v in cpu.items()}, {"kafka": 4.0}, 1.0, {"project_rule": 2})
    args = argparse.Namespace(hosts=2000, duration=100.0, repeats=1, profile="default", web_seed=7, warmup=0.0)
    text = sb.render({1: [one], 3: [three]}, args)
    rows = [ln for ln in text.splitlines() if ln.startswith("| 1 |") or ln.startswith("| 3 |")]
    assert rows[0].startswith("| 1 | 5 | 10.0 | 8.50 | 1.00 | 3.00 | 2.00 | 2.00 | 0.50 | 10.00 | 0 |")
    assert rows[1].startswith("| 3 | 15 | 9.0 | 10.39 |")
    assert rows[1].split("|")[11].strip() == "2"  # the violations column (busy cores and CPU pressure after it)
    assert "3: 1.22x" in text


def test_the_memory_benchmark_runs_small_and_reports_the_frontier_bounded(capsys) -> None:
    fm = _load("frontier_memory")
    sys.argv = ["frontier_memory", "--hosts", "3000", "--per-host", "4", "--fetches", "500", "--max-hosts", "200",
                "--window", "2"]
    fm.main()
    out = capsys.readouterr().out
    assert "| rebuild of all 64 partitions by a new handler |" in out
    rebuild = next(ln for ln in out.splitlines() if ln.startswith("| rebuild"))
    assert rebuild.split("|")[4].strip() == "200"  # hosts in memory: max_hosts, however many are queued


def test_the_neardup_benchmark_finds_every_planted_near_duplicate(capsys) -> None:
    nr = _load("neardup_rows")
    sys.argv = ["neardup_rows", "--sizes", "20000", "--queries", "200"]
    nr.main()
    out = capsys.readouterr().out
    for layout in ("permuted", "old"):
        row = next(ln for ln in out.splitlines() if layout in ln and ln.startswith("| 20,000"))
        near_min = int(row.split("|")[4].split("/")[1])
        assert near_min >= 1  # every planted near duplicate is among the rows its query reads
