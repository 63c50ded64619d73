"""`streamcrawl stats`: the crawl's figures from the control plane (GET /v1/stats)."""

from __future__ import annotations

import argparse
from typing import Any

from streamcrawl_cli import api

NAME = "stats"
HELP = "show crawl statistics (rates, outcomes, frontier, lag)"
DESCRIPTION = "Show the crawl's statistics from the control plane (GET /v1/stats).\n\n" + api.EXIT_CODES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    api.add_connection_arguments(parser)


def _n(v: Any, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}" if isinstance(v, float) else f"{v:,}"


def render(s: dict[str, Any]) -> str:
    f = s["frontier"]
    lines = [
        f"pages/s      {_n(s['pages_per_s']['m1'])} (1 min)  {_n(s['pages_per_s']['m5'])} (5 min)",
        f"bytes/s      {_n(s['bytes_per_s']['m1'], 0)} (1 min)",
        f"pages        {_n(s['pages_fetched'])} fetched, {_n(s['pages_published'])} published, "
        f"{_n(s['duplicates'])} duplicates, {_n(s['traps_stopped'])} stopped by trap rules",
        f"fetch time   p50 {_n(s['fetch_seconds_p50'], 3)} s, p99 {_n(s['fetch_seconds_p99'], 3)} s",
        f"dns          {_n(s['dns_lookups'])} lookups, hit rate "
        + ("-" if s["dns_cache_hit_rate"] is None else f"{100 * s['dns_cache_hit_rate']:.1f}%"),
        f"seen set     {_n(s['seen_set_size'])} URLs, est. FP rate {_n(s['seen_set_fp_rate'], 6)}",
        f"frontier     {_n(f['queued'])} queued, {_n(f['in_flight'])} in flight, {_n(f['hosts'])} hosts"
        + (", PAUSED" if f["paused_all"] else "")
        + (f", {f['paused_hosts']} hosts paused" if f["paused_hosts"] else ""),
        f"recrawl      {_n(s['recrawl_backlog'])} due",
        "lag          " + (", ".join(f"{k} {v:,}" for k, v in s["lag"].items()) or "-"),
        "outcomes     " + (", ".join(f"{k} {v:,}" for k, v in s["outcomes"].items()) or "-"),
        "errors       " + (", ".join(f"{k} {v:,}" for k, v in s["errors"].items()) or "none"),
        "busiest      " + (", ".join(f"{h['host']} ({h['queued']:,})" for h in s["top_hosts"][:10]) or "-"),
        f"dead letters {_n(s['dead_letters'])}",
    ]
    down = {**s["engine_errors"], **{k: v for k, v in s["metrics_targets"].items() if v != "ok"}}
    lines += [f"unavailable  {k}: {v}" for k, v in down.items()]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    def work(client: api.Client) -> int:
        s = client.call("GET", "/stats")
        if args.json:
            api.dump(s)
        else:
            print(render(s))
        return api.OK

    return api.run_call(args, work)
