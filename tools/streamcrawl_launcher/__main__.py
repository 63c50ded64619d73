"""`python -m streamcrawl_launcher` (make run): start every service and crawl.

With no seeds it serves the bundled synthetic web on loopback and crawls it, offline; with --seeds FILE
(one URL a line) it crawls those URLs instead. Live progress is printed; Ctrl-C stops cleanly.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from streamcrawl_launcher.crawl import Crawl, CrawlOptions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="streamcrawl-run", description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=Path, help="file of seed URLs, one per line (default: the bundled web)")
    ap.add_argument("--hosts", type=int, default=200, help="hosts in the bundled synthetic web")
    ap.add_argument("--workdir", type=Path, default=Path("run"))
    ap.add_argument("--keep-state", action="store_true", help="do not reset topics and tables first")
    ap.add_argument("--exit-when-idle", type=float, default=0.0,
                    help="stop once the crawl has been idle this many seconds (0 = run until Ctrl-C)")
    ap.add_argument("--control", action="store_true", help="also start the control plane on 127.0.0.1:8088")
    args = ap.parse_args(argv)

    synthetic = args.seeds is None
    crawl = Crawl(CrawlOptions(workdir=args.workdir, hosts=args.hosts, synthweb=synthetic,
                               fresh=not args.keep_state, with_control=args.control,
                               # robots_timeout hosts must outlast the fetcher's 30 s read timeout
                               synthweb_args=["--robots-timeout", "45"]))
    stopping = False

    def on_signal(_sig: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    print(f"streamcrawl: starting services (logs in {crawl.logs})", flush=True)
    crawl.start()
    try:
        if synthetic:
            seeds = list(crawl.manifest.get("seeds", []))
            print(f"streamcrawl: synthetic web of {len(crawl.manifest.get('hosts', {}))} hosts on loopback, "
                  f"request log {crawl.workdir / 'requests.jsonl'}", flush=True)
        else:
            seeds = [ln.strip() for ln in args.seeds.read_text().splitlines()
                     if ln.strip() and not ln.startswith("#")]
        print(f"streamcrawl: {crawl.seed(seeds)} seeds produced; Ctrl-C to stop", flush=True)
        start = time.time()
        first = crawl.progress()
        idle_since = time.time()
        last = first
        while not stopping:
            time.sleep(3)
            dead = crawl.dead_services()
            if dead:
                print(f"streamcrawl: service(s) exited: {dead}; see {crawl.logs}", file=sys.stderr)
                return 1
            cur = crawl.progress()
            rate = (cur.fetch_results - first.fetch_results) / max(cur.t - first.t, 1e-9)
            print(f"[{cur.t - start:6.0f}s] fetched={cur.fetch_results} published={cur.pages_published} "
                  f"pages/s={rate:5.1f} queues={cur.lag} dead_letters={cur.dead_letters}", flush=True)
            if cur.fetch_results != last.fetch_results or cur.backlog:
                idle_since = time.time()
            last = cur
            if args.exit_when_idle and time.time() - idle_since >= args.exit_when_idle and crawl.queued() == 0:
                print("streamcrawl: crawl is idle", flush=True)
                break
    finally:
        print("streamcrawl: stopping services", flush=True)
        crawl.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
