"""`streamcrawl seed FILE|URL...`: add seed URLs through the control plane (POST /v1/seeds), in batches of
at most 10,000, and report each URL accepted or rejected with the reason."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from streamcrawl_cli import api

NAME = "seed"
HELP = "add seed URLs (files of one URL a line, or URLs)"
DESCRIPTION = ("Add seed URLs over the control plane. Each argument is a URL or a file of URLs (one a line; "
               "'#' starts a comment; '-' reads standard input). Prints each rejected URL with its reason.\n\n"
               + api.EXIT_CODES)
BATCH = 10_000


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("sources", nargs="+", metavar="FILE|URL", help="seed URLs or files of them")
    parser.add_argument("--priority", type=int, default=0, choices=range(10), metavar="0-9",
                        help="0 (default) is the highest")
    api.add_connection_arguments(parser)


def read_sources(sources: list[str]) -> list[str]:
    """URLs from the arguments: a source with "://" is a URL, '-' is standard input, anything else a file."""
    urls: list[str] = []
    for src in sources:
        if "://" in src:
            urls.append(src)
            continue
        text = sys.stdin.read() if src == "-" else Path(src).read_text(encoding="utf-8")
        urls.extend(ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    return urls


def run(args: argparse.Namespace) -> int:
    try:
        urls = read_sources(args.sources)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"streamcrawl seed: {exc}", file=sys.stderr)
        return api.USAGE
    if not urls:
        print("streamcrawl seed: no URLs given", file=sys.stderr)
        return api.USAGE

    def work(client: api.Client) -> int:
        results: list[dict[str, Any]] = []
        for i in range(0, len(urls), BATCH):
            answer = client.call("POST", "/seeds", {"urls": urls[i:i + BATCH], "priority": args.priority},
                                 ok_statuses=(422,))
            if not isinstance(answer, dict) or "results" not in answer:
                raise api.ApiError(api.USAGE, f"422: {answer.get('detail') if isinstance(answer, dict) else answer}")
            results.extend(answer["results"])
        accepted = [r for r in results if r["status"] == "accepted"]
        rejected = [r for r in results if r["status"] != "accepted"]
        if args.json:
            api.dump({"accepted": len(accepted), "rejected": len(rejected), "results": results})
        else:
            for r in rejected:
                print(f"rejected {r['url']}: {r['reason']} ({r.get('error') or ''})")
            hosts = len({r["host"] for r in accepted})
            print(f"{len(accepted)} seeds accepted ({hosts} hosts), {len(rejected)} rejected")
        if not rejected:
            return api.OK
        return api.PARTIAL if accepted else api.USAGE

    return api.run_call(args, work)
