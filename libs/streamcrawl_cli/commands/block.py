"""`streamcrawl block PATTERN...`: add blocklist patterns (PUT /v1/blocklist)."""

from __future__ import annotations

import argparse

from streamcrawl_cli import api

NAME = "block"
HELP = "add hosts or patterns to the blocklist (.example.com: the domain and its subdomains)"
DESCRIPTION = ("Add blocklist patterns: 'example.com' blocks that host, '.example.com' it and every subdomain, "
               "'*.ads.example.com' a glob. Dedup applies them within 10 s; seeds are checked at once.\n\n"
               + api.EXIT_CODES)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("patterns", nargs="+", metavar="HOST", help="hosts or patterns")
    parser.add_argument("--reason", default=None, help="why (stored with the pattern)")
    api.add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    def work(client: api.Client) -> int:
        out = client.call("PUT", "/blocklist", {"patterns": args.patterns, "reason": args.reason})
        if args.json:
            api.dump(out)
        else:
            print("blocked: " + ", ".join(p["pattern"] for p in out["patterns"]))
        return api.OK

    return api.run_call(args, work)
