"""Benchmark: the resident memory of one frontier instance with 10M queued URLs over 1M hosts.

The load goes straight into the frontier's handler (no crawl): UrlMessages for every URL, then ticks that
lease requests and results that finish them, then a rebuild of every partition by a new handler (as after
a restart). The durable state is a synthetic stand-in for Cassandra (`SyntheticQueues`): it generates each
host's queued URLs on demand and keeps only a few bits per host (which URLs are queued, which are done,
which hosts are in the index), so that the process's resident set is the frontier's own memory plus a few
MB that the table reports apart. The frontier's code paths are the real ones: windows, spilled tails,
cold hosts, refills, evictions, the paged index scan.

Run: .venv/bin/python bench/frontier_memory.py [--hosts 1000000] [--per-host 10] [--fetches 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import time
from typing import Any

import numpy as np
from streamcrawl_contracts.messages import FetchRequest, FetchResult, UrlMessage
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.lease import NO_MARKS, LeaseMarks
from streamcrawl_core.partition import HOST_BUCKETS, host_bucket, partition_for
from streamcrawl_core.politeness import HostOverride, PolitenessConfig
from streamcrawl_frontier.handler import FrontierHandler
from streamcrawl_runtime.ports.loop import Record
from streamcrawl_runtime.ports.state import HostState, QueuedUrl, QueueKey, UrlState

PARTITIONS = 64


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * resource.getpagesize() / 2**20


def peak_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def host_name(h: int) -> str:
    return f"h{h:07d}.bench.test"


def url_of(h: int, j: int) -> str:
    return f"http://{host_name(h)}/section/page-{j}.html"


class SyntheticQueues:
    """The frontier's durable state, generated: host h's URL j is `url_of(h, j)`, all at priority 5. Per
    host it keeps a bit per URL queued and per URL done, and whether the host is in its partition's index."""

    def __init__(self, hosts: int, per_host: int) -> None:
        self.per_host = per_host
        self.queued = np.zeros(hosts, dtype=np.uint16)  # bit j: URL j has a queue row
        self.index = np.zeros(hosts, dtype=bool)
        parts = np.array([partition_for(host_name(h), PARTITIONS) for h in range(hosts)], dtype=np.int16)
        buckets = np.array([host_bucket(host_name(h)) for h in range(hosts)], dtype=np.int16)
        order = np.lexsort((np.arange(hosts), buckets, parts))  # by (part, bucket, host name)
        self.order = order.astype(np.int32)
        slots = parts[order].astype(np.int32) * HOST_BUCKETS + buckets[order]
        self.starts = np.searchsorted(slots, np.arange(PARTITIONS * HOST_BUCKETS + 1)).astype(np.int32)
        self.reads = self.writes = 0

    @staticmethod
    def host_id(host: str) -> int:
        return int(host[1:8])

    # the FrontierState port -----------------------------------------------------------------------
    async def queue_put(self, item: QueuedUrl, index_host: bool = True) -> None:
        h = self.host_id(item.host)
        self.queued[h] |= np.uint16(1 << int(item.url.rsplit("-", 1)[1].split(".")[0]))
        if index_host:
            self.index[h] = True
        self.writes += 1

    def _drop(self, host: str, url_fp: int) -> None:
        h = self.host_id(host)
        for j in range(self.per_host):
            if url_fingerprint(url_of(h, j)) == url_fp:
                self.queued[h] &= np.uint16(~(1 << j) & 0xFFFF)
        self.writes += 1

    async def queue_delete(self, part: int, host: str, priority: int | None, url_fp: int) -> None:
        self._drop(host, url_fp)

    async def queue_finish(self, part: int, host: str, priority: int | None, url_fp: int, now: float) -> None:
        self._drop(host, url_fp)

    async def host_politeness_and_finish(self, host: str, next_allowed_at: float, backoff_level: int,
                                         last_fetch_ms: float | None, crawl_delay_s: float | None,
                                         part: int, priority: int | None, url_fp: int, now: float) -> None:
        self._drop(host, url_fp)

    async def queue_head(self, host: str, after: QueueKey | None, limit: int) -> list[QueuedUrl]:
        self.reads += 1
        h = self.host_id(host)
        bits = int(self.queued[h])
        rows = [QueuedUrl(-1, host, url_fingerprint(u), u, 5, "discovery", 0.0, 1, 0.0)
                for j in range(self.per_host) if bits >> j & 1 for u in (url_of(h, j),)]
        rows.sort(key=lambda q: q.key)
        return [q for q in rows if after is None or q.key > after][:limit]

    async def queue_hosts(self, part: int, bucket: int, after: str | None, limit: int) -> list[str]:
        self.reads += 1
        slot = part * HOST_BUCKETS + bucket
        ids = self.order[self.starts[slot]:self.starts[slot + 1]]
        ids = ids[self.index[ids]]
        if after is not None:
            ids = ids[ids > self.host_id(after)]
        return [host_name(int(h)) for h in ids[:limit]]

    async def queue_unindex(self, part: int, host: str) -> None:
        self.index[self.host_id(host)] = False
        self.writes += 1

    async def queue_index_host(self, part: int, host: str) -> None:
        self.index[self.host_id(host)] = True
        self.writes += 1

    async def host_get(self, host: str) -> HostState | None:
        self.reads += 1
        return None

    async def host_lease(self, host: str) -> LeaseMarks:
        return NO_MARKS

    async def url_get(self, host: str, url_fp: int) -> UrlState | None:
        return None

    async def host_overrides(self) -> dict[str, HostOverride]:
        return {}

    async def host_put_politeness(self, *args: Any) -> None:
        self.writes += 1

    async def host_put_lease(self, *args: Any) -> None:
        self.writes += 1

    async def crawl_pauses(self) -> set[str]:
        return set()

    async def summary_put(self, summary: Any) -> None:
        self.writes += 1


def handler(state: SyntheticQueues, args: argparse.Namespace, clock: list[float]) -> FrontierHandler:
    return FrontierHandler(state, PolitenessConfig(jitter=0.0), partitions=PARTITIONS, max_hosts=args.max_hosts,
                           host_window=args.window, max_leases=args.max_leases, lookahead_s=0.0,
                           clock=lambda: clock[0])


async def enqueue(h: FrontierHandler, hosts: int, per_host: int) -> None:
    """Every URL, in rounds (URL j of every host, then j + 1), as discoveries arrive over a crawl."""
    for j in range(per_host):
        for i in range(hosts):
            host = host_name(i)
            url = url_of(i, j)
            msg = UrlMessage(url=url, host=host, url_fp=url_fingerprint(url), depth=1, priority=5)
            await h.handle(Record("urls", partition_for(host, PARTITIONS), 0, host, b""), msg)


async def crawl(h: FrontierHandler, clock: list[float], fetches: int) -> int:
    """Ticks every 50 ms (simulated); every request is answered at once. Returns the fetches made."""
    done = 0
    while done < fetches:
        out = await h.tick(clock[0])
        for o in out:
            req = o.value
            assert isinstance(req, FetchRequest)
            res = FetchResult(url=req.url, host=req.host, url_fp=req.url_fp, depth=req.depth, lease_id=req.lease_id,
                              outcome="fetched", status=200, started_at=clock[0], fetch_s=0.01, ended_at=clock[0])
            await h.handle(Record("results", partition_for(req.host, PARTITIONS), 0, req.host, b""), res)
            done += 1
        clock[0] += 0.05
    return done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1_000_000)
    ap.add_argument("--per-host", type=int, default=10)
    ap.add_argument("--fetches", type=int, default=200_000)
    ap.add_argument("--max-hosts", type=int, default=50_000, help="STREAMCRAWL_FRONTIER_MAX_HOSTS")
    ap.add_argument("--window", type=int, default=8, help="STREAMCRAWL_FRONTIER_HOST_WINDOW")
    ap.add_argument("--max-leases", type=int, default=1000)
    args = ap.parse_args()
    gc.freeze()
    base = rss_mb()
    rows: list[tuple[str, float, float, int, int]] = []  # phase, seconds, RSS MB, hosts and URLs in memory
    t = time.perf_counter()
    state = SyntheticQueues(args.hosts, args.per_host)
    store = rss_mb() - base
    clock = [1_700_000_000.0]
    h = handler(state, args, clock)
    asyncio.run(h.on_assign(list(range(PARTITIONS))))

    def phase(name: str, fr: FrontierHandler) -> None:
        nonlocal t
        gc.collect()
        now = time.perf_counter()
        rows.append((name, now - t, rss_mb(), len(fr.windows), fr.stats()["queued"]))
        t = now

    asyncio.run(enqueue(h, args.hosts, args.per_host))
    phase(f"enqueue {args.hosts * args.per_host:,} URLs", h)
    n = asyncio.run(crawl(h, clock, args.fetches))
    phase(f"{n:,} fetches (refills, evictions, index scans)", h)
    queued_hosts = int(state.index.sum())
    queued_urls = int(sum(bin(int(b)).count("1") for b in state.queued))
    del h
    gc.collect()
    h2 = handler(state, args, clock)
    asyncio.run(h2.on_assign(list(range(PARTITIONS))))
    while len(h2.windows) < min(args.max_hosts, queued_hosts) and any(not s.done for s in h2.scans.values()):
        asyncio.run(h2.load_hosts(clock[0]))
    phase(f"rebuild of all {PARTITIONS} partitions by a new handler", h2)
    print(f"{args.hosts:,} hosts, {args.hosts * args.per_host:,} URLs queued; max_hosts {args.max_hosts:,}, "
          f"host_window {args.window}; interpreter and imports {base:.0f} MB, the synthetic store +{store:.0f} MB")
    print("| phase | seconds | RSS MB | hosts in memory | URLs in memory |")
    print("|---|---|---|---|---|")
    for name, secs, rss, hosts, urls in rows:
        print(f"| {name} | {secs:.0f} | {rss:.0f} | {hosts:,} | {urls:,} |")
    print(f"peak RSS (VmHWM) {peak_mb():.0f} MB; still queued: {queued_urls:,} URLs over {queued_hosts:,} hosts; "
          f"store reads {state.reads:,}, writes {state.writes:,}")


if __name__ == "__main__":
    main()
