"""How much quiet the crawler left beyond the politeness rule, from a synthetic web request log.

    .venv/bin/python bench/politeness_slack.py /tmp/streamcrawl-bench-crawl/streamcrawl-0/requests.jsonl

For each host, with requests paired as the e2e judge pairs them (``judged_gaps``), the slack after a
request is (next start - its end) - max(1 s, 10 x its duration), its end read as the judge reads it
(``LogEntry.sent``): negative means a gap shorter than the rule (before the 50 ms tolerance of the e2e
check). Also prints the largest server holds (end stamp
minus last-write stamp), which the judge does not charge to the crawler.
Crawl-delay hosts are judged by the 1 s / 10x part only. Prints the smallest slacks and percentiles (ms).
`make bench-crawl` leaves each side's request log in its work directory (see crawl_bench.py --workdir).
"""

from __future__ import annotations

import argparse

from streamcrawl_synthweb.log import LogEntry, judged_gaps, load_log, server_holds


def slacks(entries: list[LogEntry], min_delay_s: float = 1.0, factor: float = 10.0) -> list[float]:
    """gap - required of every judged gap (no Crawl-delay: the 1 s / 10x part only), smallest first."""
    return sorted(gap - required for *_, gap, required in judged_gaps(entries, min_delay_s, factor))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("log")
    entries = load_log(p.parse_args().log)
    holds = server_holds(entries)
    if holds:
        print(f"server holds (ms), largest: {', '.join(f'{1000 * h:.1f}' for h in holds[:5])}; "
              f"median {1000 * holds[len(holds) // 2]:.3f} over {len(holds)} responses")
    xs = slacks(entries)
    if not xs:
        print("no consecutive requests to one host")
        return
    print(f"gaps: {len(xs)}; smallest slacks (ms): {', '.join(f'{1000 * x:.1f}' for x in xs[:5])}")
    print("| percentile | 0 | 1 | 5 | 50 |\n|---|---|---|---|---|")
    print("| slack, ms | " + " | ".join(f"{1000 * xs[min(len(xs) - 1, int(q * len(xs)))]:.1f}"
                                        for q in (0.0, 0.01, 0.05, 0.5)) + " |")


if __name__ == "__main__":
    main()
