"""`streamcrawl pause [HOST]`: pause the whole crawl or one host (POST /v1/pause)."""

from __future__ import annotations

import argparse

from streamcrawl_cli import api

NAME = "pause"
HELP = "pause the crawl, or one host"
DESCRIPTION = ("Pause the whole crawl (no HOST) or one host. The owning frontiers lease nothing more for it "
               "within a few seconds (requests already leased complete); the pause survives restarts, until "
               "`streamcrawl resume`.\n\n" + api.EXIT_CODES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("host", nargs="?", default=None, help="a host (default: the whole crawl)")
    parser.add_argument("--reason", default=None, help="why (stored with the pause)")
    api.add_connection_arguments(parser)


def describe(p: dict[str, object]) -> str:
    hosts = [h["scope"] for h in p["hosts"]]  # type: ignore[attr-defined,index]
    state = "paused" if p["all"] else "running"
    return (f"crawl {state}; hosts paused: {', '.join(hosts) if hosts else 'none'} "
            f"(applied within {p['applied_within_s']} s)")


def run(args: argparse.Namespace) -> int:
    def work(client: api.Client) -> int:
        out = client.call("POST", "/pause", {"host": args.host, "reason": args.reason})
        api.dump(out) if args.json else print(describe(out))
        return api.OK

    return api.run_call(args, work)
