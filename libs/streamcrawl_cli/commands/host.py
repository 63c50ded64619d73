"""`streamcrawl host HOST`: one host's state from the control plane (GET /v1/hosts/{host})."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from streamcrawl_cli import api

NAME = "host"
HELP = "show a host: queue, politeness timer, lease, robots.txt, DNS, last outcomes"
DESCRIPTION = "Show one host's state (GET /v1/hosts/HOST).\n\n" + api.EXIT_CODES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("host", help="a host name, e.g. example.com")
    api.add_connection_arguments(parser)


def render(h: dict[str, Any]) -> str:
    lease = h["lease"]
    robots, dns = h["robots"], h["dns"]
    last_ms = "-" if h["last_fetch_ms"] is None else f"{h['last_fetch_ms']:.1f} ms"
    lines = [
        f"host          {h['host']} (partition {h['partition']})"
        + (" PAUSED" if h["paused"] else "") + (f" BLOCKED by {h['blocked_by']}" if h["blocked_by"] else ""),
        f"queue         {h['queue']['length']:,} URLs",
        *[f"  next        {q['url']} (priority {q['priority']}, {q['kind']})" for q in h["queue"]["first"]],
        f"next allowed  {h['next_allowed_at'] or 'now'}   back-off level {h['backoff_level']}",
        f"lease         {lease['url'] + ' until ' + str(lease['expires_at']) if lease else 'none in flight'}",
        f"robots.txt    {'not fetched' if robots['status'] is None else robots['status']}"
        + (f" at {robots['fetched_at']}" if robots["fetched_at"] else "")
        + (f", crawl-delay {robots['crawl_delay_s']} s" if robots["crawl_delay_s"] is not None else ""),
        f"dns           {dns['ip'] or dns['error'] or 'not resolved'}"
        + (f" until {dns['expires_at']}" if dns["expires_at"] else ""),
        f"last fetch    {last_ms}"
        + (f", ended {h['last_fetch_end']}" if h["last_fetch_end"] else ""),
        "outcomes:" if h["recent_outcomes"] else "outcomes      none yet",
        *[f"  {o['at']}  {o['outcome']:<18} {o['status'] if o['status'] is not None else '-':>4}  {o['url']}"
          for o in h["recent_outcomes"]],
    ]
    if h["override"]:
        o = h["override"]
        lines.append(f"override      min_delay_s={o['min_delay_s']} delay_factor={o['delay_factor']} "
                     f"page_budget={o['page_budget']}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    def work(client: api.Client) -> int:
        h = client.call("GET", f"/hosts/{quote(args.host, safe='')}")
        if args.json:
            api.dump(h)
        else:
            print(render(h))
        return api.OK

    return api.run_call(args, work)
