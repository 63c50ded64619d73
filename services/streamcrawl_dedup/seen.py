"""The URL seen-set of one dedup instance: a Bloom filter per owned partition, backed by the exact record
in Cassandra url_state, snapshotted to S3 and restored on assignment.

A Bloom "no" is definitive (no read); a "maybe" is settled by the exact store. Snapshots are written
every snapshot_interval_s, on revoke and on shutdown, so a clean restart or rebalance is exact; after a
kill -9, URLs first seen since the last snapshot can be admitted once more (then caught by content
dedup as an unchanged body): a bounded, stated duplicate budget.
"""

from __future__ import annotations

import asyncio
import logging

from streamcrawl_core.bloom import BloomFilter
from streamcrawl_runtime.blobstore import BlobStore
from streamcrawl_runtime.crawl_state import CrawlState

log = logging.getLogger("streamcrawl.dedup.seen")


def snapshot_key(part: int) -> str:
    return f"bloom/urls-part-{part:04d}.bin"


class SeenSet:
    def __init__(self, state: CrawlState, blobs: BlobStore, capacity: int, fp_rate: float) -> None:
        self.state = state
        self.blobs = blobs
        self.capacity = capacity
        self.fp_rate = fp_rate
        self.blooms: dict[int, BloomFilter] = {}
        self.dirty: set[int] = set()
        self.exact_reads = 0

    async def restore(self, part: int) -> None:
        data = await asyncio.to_thread(self.blobs.get_bytes, snapshot_key(part))
        bloom: BloomFilter | None = None
        if data is not None:
            try:
                bloom = BloomFilter.from_bytes(data)
            except ValueError:
                log.warning("corrupt bloom snapshot ignored", extra={"partition": part})
        self.blooms[part] = bloom or BloomFilter(self.capacity, self.fp_rate)
        log.info("bloom restored", extra={"partition": part, "items": len(self.blooms[part]),
                                          "from_snapshot": bloom is not None})

    async def snapshot(self, part: int) -> None:
        bloom = self.blooms.get(part)
        if bloom is None:
            return
        await asyncio.to_thread(self.blobs.put_bytes, snapshot_key(part), bloom.to_bytes())
        self.dirty.discard(part)

    async def snapshot_dirty(self) -> None:
        for part in list(self.dirty):
            await self.snapshot(part)

    async def drop(self, part: int) -> None:
        await self.snapshot(part)
        self.blooms.pop(part, None)

    async def check_and_add(self, part: int, host: str, url_fp: int) -> bool:
        """True if the URL is new (and now recorded as seen in the Bloom filter)."""
        bloom = self.blooms.get(part)
        if bloom is None:
            raise KeyError(f"partition {part} is not owned")
        if url_fp in bloom:
            self.exact_reads += 1
            if await self.state.url_get(host, url_fp) is not None:
                return False
        bloom.add(url_fp)
        self.dirty.add(part)
        return True
