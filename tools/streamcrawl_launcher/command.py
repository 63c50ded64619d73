"""`streamcrawl run` (what `make run` calls): start every service and the control plane on the local stack
and crawl, with a live view, until Ctrl-C or (with --exit-when-idle) until the crawl is idle; then print
a summary of what was crawled and where it is.

With no seeds it serves the bundled synthetic web on loopback (its own DNS server) and crawls it, offline.
With seeds (URLs or files of URLs) it crawls those, resolving names with the system resolver.

Exit codes: 0 stopped by Ctrl-C or idle, 1 a service exited or could not start, 2 usage error.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from streamcrawl_launcher.crawl import Crawl, CrawlOptions
from streamcrawl_launcher.live import Display, Observer, View, summary

NAME = "run"
HELP = "crawl on the local stack: every service, the control plane, a live view and a summary"
DESCRIPTION = __doc__ or ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("seeds", nargs="*", metavar="FILE|URL",
                        help="seed URLs or files of them, one a line (default: the bundled synthetic web)")
    parser.add_argument("--seeds", dest="seed_file", type=Path, default=None, help="a file of seed URLs (make SEEDS=)")
    parser.add_argument("--instances", type=int, default=1, help="processes per service (default 1)")
    parser.add_argument("--exit-when-idle", type=float, default=0.0, metavar="SECONDS",
                        help="stop once the crawl has been idle this long (default 0: run until Ctrl-C)")
    parser.add_argument("--resolver", choices=("system", "synthetic"), default=None,
                        help="DNS: the OS resolver (default with seeds) or the synthetic web's server")
    parser.add_argument("--hosts", type=int, default=200, help="hosts in the bundled synthetic web")
    parser.add_argument("--workdir", type=Path, default=Path("run"), help="logs, token and request log (run/)")
    parser.add_argument("--keep-state", action="store_true", help="do not reset topics and tables first")
    parser.add_argument("--control-port", type=int, default=8080, help="the control plane's port (default 8080)")
    parser.add_argument("--no-control", action="store_true", help="do not start the control plane")
    parser.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")


def seed_urls(args: argparse.Namespace) -> list[str]:
    sources = list(args.seeds) + ([str(args.seed_file)] if args.seed_file else [])
    urls: list[str] = []
    for src in sources:
        if "://" in src:
            urls.append(src)
            continue
        text = Path(src).read_text(encoding="utf-8")
        urls.extend(ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#"))
    return urls


def run(args: argparse.Namespace) -> int:
    if args.instances < 1:
        print("streamcrawl run: --instances must be at least 1", file=sys.stderr)
        return 2
    try:
        urls = seed_urls(args)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"streamcrawl run: cannot read seeds: {exc}", file=sys.stderr)
        return 2
    if (args.seeds or args.seed_file) and not urls:
        print("streamcrawl run: the seeds given hold no URLs", file=sys.stderr)
        return 2
    synthetic = not urls
    crawl = Crawl(CrawlOptions(workdir=args.workdir, hosts=args.hosts, synthweb=synthetic, fresh=not args.keep_state,
                               with_control=not args.no_control, instances=args.instances,
                               control_port=args.control_port, resolver=args.resolver,
                               # robots_timeout hosts must outlast the fetcher's 30 s read timeout
                               synthweb_args=["--robots-timeout", "45"]))
    stopping = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"streamcrawl: starting {args.instances} instance(s) of each service (logs in {crawl.logs})", flush=True)
    last: View | None = None
    code = 0
    try:
        crawl.start()
        if synthetic:
            urls = list(crawl.manifest.get("seeds", []))
            print(f"streamcrawl: synthetic web of {len(crawl.manifest.get('hosts', {}))} hosts on loopback, "
                  f"request log {crawl.workdir / 'requests.jsonl'}", flush=True)
        if not args.no_control:
            print(f"streamcrawl: control plane {crawl.control_url} (dashboard {crawl.control_url}/ui/#token=..., "
                  f"API token in {crawl.token_file}; try `streamcrawl stats`)", flush=True)
        print(f"streamcrawl: {crawl.seed(urls)} seeds produced; Ctrl-C to stop", flush=True)
        observer = Observer(crawl)
        idle_since = time.time()
        prev = None
        title = "streamcrawl" + (" (synthetic web)" if synthetic else "")
        with Display(title, plain=True if args.plain else None) as display:
            while not stopping:
                time.sleep(2)
                dead = crawl.dead_services()
                if dead:
                    print(f"streamcrawl: service(s) exited: {dead}; see {crawl.logs}", file=sys.stderr)
                    code = 1
                    break
                last = observer.observe()
                display.show(last)
                cur = last.progress
                if prev is None or cur.fetch_results != prev.fetch_results or cur.backlog:
                    idle_since = time.time()
                prev = cur
                if args.exit_when_idle and time.time() - idle_since >= args.exit_when_idle and crawl.queued() == 0:
                    print("streamcrawl: crawl is idle", flush=True)
                    break
        observer.close()
    except RuntimeError as exc:
        print(f"streamcrawl: {exc}", file=sys.stderr)
        code = 1
    finally:
        print("streamcrawl: stopping services", flush=True)
        crawl.stop()
        crawl.close()
    if last is not None:
        print(summary(last, crawl), flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamcrawl run", description=DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))
