"""The URL seen-set of one dedup instance: a Bloom filter per owned partition, backed by the exact record
in Cassandra url_state for "maybe" answers, snapshotted to S3 and restored on assignment.

A Bloom "no" is definitive (no read), so a restored filter must hold every URL admitted before the
crash. Each snapshot is stored with an offset S of the url_candidates partition such that every
candidate below S was in the filter when it was serialized; on restore the candidates from S to the
partition's end are replayed into the filter (a few seconds of traffic). Extra entries are harmless: a
"maybe" is settled by the exact store. So a kill -9 re-admits nothing that was already seen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from prometheus_client import Gauge
from streamcrawl_core.bloom import BloomFilter
from streamcrawl_runtime.ports.blobs import BlobStore
from streamcrawl_runtime.ports.state import UrlReader

log = logging.getLogger("streamcrawl.dedup.seen")

SEEN_URLS = Gauge("streamcrawl_dedup_seen_urls", "URLs in the seen-set's Bloom filters of owned partitions")
SEEN_FP = Gauge("streamcrawl_dedup_seen_fp_ratio",
                "Estimated false-positive rate of the seen-set (the fullest owned partition's filter)")

#: (partition, start offset) → (URL fingerprints of the candidates from start to the end, next offset)
Replay = Callable[[int, int], tuple[list[int], int]]
#: partition → every candidate below this offset has been handled (None: nothing handled yet)
Progress = Callable[[int], "int | None"]


_UNKNOWN = object()


def snapshot_key(part: int) -> str:
    return f"bloom/urls-part-{part:04d}.bin"


def offset_key(part: int) -> str:
    return f"bloom/urls-part-{part:04d}.offset"


class SeenSet:
    def __init__(self, state: UrlReader, blobs: BlobStore, capacity: int, fp_rate: float,
                 replay: Replay | None = None, recent_size: int = 200_000) -> None:
        self.state = state
        self.blobs = blobs
        self.capacity = capacity
        self.fp_rate = fp_rate
        self.replay = replay
        self.progress: Progress | None = None  # bound by main() to the run loop once it exists
        self.blooms: dict[int, BloomFilter] = {}
        self.upto: dict[int, int] = {}
        self.dirty: set[int] = set()
        self.exact_reads = 0
        # Fingerprints this process admitted (once their url_state rows were written) or confirmed by an
        # exact read, oldest first, with the event that admitted them. Popular links (home pages, nav
        # bars) come back constantly; each would otherwise cost a Cassandra read after the Bloom "maybe".
        # Keeping the admitting event id settles a replay of that very event from memory too.
        self.recent: dict[int, str | None] = {}
        self.recent_size = recent_size
        # Read at scrape time only: nothing is counted per URL.
        SEEN_URLS.set_function(lambda: float(sum(len(b) for b in list(self.blooms.values()))))
        SEEN_FP.set_function(lambda: max((b.expected_fp_rate() for b in list(self.blooms.values())), default=0.0))

    async def restore(self, part: int) -> None:
        data = await asyncio.to_thread(self.blobs.get_bytes, snapshot_key(part))
        raw_offset = await asyncio.to_thread(self.blobs.get_bytes, offset_key(part))
        bloom: BloomFilter | None = None
        if data is not None:
            try:
                bloom = BloomFilter.from_bytes(data)
            except ValueError:
                log.warning("corrupt bloom snapshot ignored", extra={"partition": part})
        start = 0
        if bloom is not None and raw_offset is not None:
            try:
                start = max(0, int(raw_offset.decode()))
            except ValueError:
                start = 0
        bloom = bloom or BloomFilter(self.capacity, self.fp_rate)
        replayed = 0
        if self.replay is not None:
            fps, end = await asyncio.to_thread(self.replay, part, start)
            bloom.add_many(fps)
            replayed, start = len(fps), end
        self.blooms[part] = bloom
        self.upto[part] = start
        log.info("bloom restored", extra={"partition": part, "items": len(bloom), "replayed": replayed,
                                          "from_snapshot": data is not None, "bytes": (bloom.m + 7) // 8,
                                          "capacity": bloom.capacity,
                                          "expected_fp_rate": round(bloom.expected_fp_rate(), 5)})

    async def snapshot(self, part: int) -> None:
        bloom = self.blooms.get(part)
        if bloom is None:
            return
        # The offset is read before the filter is serialized, so it never claims more than the bytes hold.
        handled = self.progress(part) if self.progress is not None else None
        upto = max(handled or 0, self.upto.get(part, 0))
        data = bloom.to_bytes()
        await asyncio.to_thread(self.blobs.put_bytes, snapshot_key(part), data)
        await asyncio.to_thread(self.blobs.put_bytes, offset_key(part), str(upto).encode())
        self.upto[part] = upto
        self.dirty.discard(part)

    def stats(self) -> tuple[int, int, float]:
        """(bytes of the owned partitions' filters, URLs in them, the largest expected false-positive rate
        among them at their fill): what the metrics and the logs report."""
        blooms = list(self.blooms.values())
        size = sum((b.m + 7) // 8 for b in blooms)
        return size, sum(len(b) for b in blooms), max((b.expected_fp_rate() for b in blooms), default=0.0)

    async def snapshot_dirty(self) -> None:
        for part in list(self.dirty):
            await self.snapshot(part)

    async def drop(self, part: int) -> None:
        await self.snapshot(part)
        self.blooms.pop(part, None)
        self.upto.pop(part, None)

    async def check_and_add(self, part: int, host: str, url_fp: int, event_id: str = "") -> str:
        """"new" (now recorded in the Bloom filter), "seen", or "replay": the exact record was written by
        this very candidate event, whose output may not have survived a crash, so it must go out again."""
        bloom = self.blooms.get(part)
        if bloom is None:
            raise KeyError(f"partition {part} is not owned")
        if url_fp in bloom:
            known = self.recent.get(url_fp, _UNKNOWN)
            if known is not _UNKNOWN:
                # Admitted or confirmed by this process: no read. Only the event that admitted it (here,
                # once its url_state row was written) is a replay.
                return "replay" if event_id and known == event_id else "seen"
            self.exact_reads += 1
            row = await self.state.url_get(host, url_fp)
            if row is not None:
                if event_id and row.discovered_by == event_id:
                    return "replay"
                self._remember(url_fp, row.discovered_by)
                return "seen"
        bloom.add(url_fp)
        self.dirty.add(part)
        return "new"

    def admitted(self, url_fps: Iterable[int], event_id: str) -> None:
        """These URLs' url_state rows (discovered_by = event_id) are written: later candidates for them
        are settled from memory, without the exact read a Bloom "maybe" would otherwise cost."""
        for fp in url_fps:
            self._remember(fp, event_id)

    def _remember(self, url_fp: int, discovered_by: str | None) -> None:
        self.recent[url_fp] = discovered_by
        if len(self.recent) > self.recent_size:
            del self.recent[next(iter(self.recent))]
