"""Before/after tables from two runs of ``bench/crawl_bench.py`` (their ``result.json`` files).

    .venv/bin/python bench/crawl_compare.py BEFORE_WORKDIR AFTER_WORKDIR [--scrapy SCRAPY_WORKDIR]

Each workdir is a ``--workdir`` of crawl_bench (its ``streamcrawl-0/result.json`` is read; Scrapy's from
``scrapy-0/``). Prints CPU-ms per page by process, Kafka records and CQL requests per page, coverage, and
the ratios to Scrapy's CPU-ms per page. Runs compared this way should come from the same day and machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ENGINES = ("kafka", "cassandra", "versitygw")


def load(workdir: Path, side: str = "streamcrawl") -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((workdir / f"{side}-0" / "result.json").read_text())
    return doc


def pages(r: dict[str, Any]) -> int:
    return int(r["counts"]["pages"]) or 1


def ms(r: dict[str, Any], cpu_s: float) -> float:
    return 1000.0 * cpu_s / pages(r)


def counter(r: dict[str, Any], kind: str) -> float:
    return sum(v for c in r.get("counters", {}).values() for k, v in c.items() if k.startswith(kind + "|"))


def cql(r: dict[str, Any]) -> tuple[float, float | None]:
    """(statements, requests) in the run; requests (single statements + batches) only where the services
    counted them (streamcrawl_cql_requests_total)."""
    statements = requests = 0.0
    counted = False
    for c in r.get("counters", {}).values():
        for k, v in c.items():
            if k.startswith("cqlreq|"):
                requests += v
                counted = True
            elif k.startswith("cql|") and k != "cql|batch batch":
                statements += v
    return statements, (requests if counted else None)


def rows(before: dict[str, Any], after: dict[str, Any], scrapy: dict[str, Any] | None) -> list[str]:
    sp = ms(scrapy, sum(scrapy["crawler_cpu"].values())) if scrapy else None

    def line(label: str, b: float, a: float, digits: int = 2, vs_scrapy: bool = False) -> str:
        ratio = f"{a / b:.2f}×" if b else "–"
        extra = f" | {a / sp:.2f}×" if vs_scrapy and sp else (" | " if sp else "")
        return f"| {label} | {b:,.{digits}f} | {a:,.{digits}f} | {ratio}{extra} |"

    head = "| per page | before | after | after ÷ before |" + (" after ÷ Scrapy |" if sp else "")
    out = [head, "|---|---|---|---|" + ("---|" if sp else "")]
    # One row per service process either run measured: the rows add up to the total below.
    for svc in dict.fromkeys([*before["crawler_cpu"], *after["crawler_cpu"]]):
        out.append(line(f"{svc} CPU-ms", ms(before, before["crawler_cpu"].get(svc, 0.0)),
                        ms(after, after["crawler_cpu"].get(svc, 0.0))))
    out.append(line("**all six services, CPU-ms**", ms(before, sum(before["crawler_cpu"].values())),
                    ms(after, sum(after["crawler_cpu"].values())), vs_scrapy=True))
    for eng in ENGINES:
        out.append(line(f"{eng} CPU-ms", ms(before, before["infra_cpu"].get(eng, 0.0)),
                        ms(after, after["infra_cpu"].get(eng, 0.0))))
    out.append(line("**all three engines, CPU-ms**", ms(before, sum(before["infra_cpu"].values())),
                    ms(after, sum(after["infra_cpu"].values())), vs_scrapy=True))
    out.append(line("Kafka records produced", counter(before, "produced") / pages(before),
                    counter(after, "produced") / pages(after)))
    out.append(line("Kafka records consumed", counter(before, "consumed") / pages(before),
                    counter(after, "consumed") / pages(after)))
    (bs, breq), (as_, areq) = cql(before), cql(after)
    out.append(line("CQL statements", bs / pages(before), as_ / pages(after)))
    if breq is not None and areq is not None:
        out.append(line("CQL requests (single statements + batches)", breq / pages(before), areq / pages(after)))
    elif areq is not None:
        out.append(f"| CQL requests (single statements + batches) | (not counted) | {areq / pages(after):.2f} | |"
                   + (" |" if sp else ""))
    out.append(line("pages in the window", float(pages(before)), float(pages(after)), 0))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--scrapy", type=Path, help="workdir holding scrapy-0/result.json (default: AFTER's)")
    args = p.parse_args(argv)
    before, after = load(args.before), load(args.after)
    scrapy_dir = args.scrapy or args.after
    scrapy = load(scrapy_dir, "scrapy") if (scrapy_dir / "scrapy-0" / "result.json").exists() else None
    print("\n".join(rows(before, after, scrapy)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
