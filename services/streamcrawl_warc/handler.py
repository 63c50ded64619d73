"""The WARC writer's run-loop handler: archive records → WARC files in S3 → page_fetched.

Each assigned partition of the archive topic has at most one open file, spooled on local disk. A record
is written into it at once (request, response or revisit, metadata); its handler call then waits until
the file is durable in S3 and only then returns, with the page_fetched message (carrying the file's key,
the record's offset and length) when the record has one. So the run loop commits a record's offset only
after its WARC file is in S3 (at-least-once), and page_fetched never names a file that is not there.

A file is closed (its CDXJ index, then the file, then the partition's checkpoint uploaded) when it
reaches `max_file_bytes`, when it is `max_file_age_s` old, or when `max_file_records` records wait on it.
The checkpoint (warc/_state/pNNN.json) lists the exchange ids of the partition's files closed in the
last `checkpoint_window_s` (10 min) with their locations: a record delivered again (its offset was not
committed when the writer stopped, or dedup sent its fetch again) whose id is there is not written again,
only published again. Messages are keyed
by exchange id, so no two records of one host wait on each other (the loop serializes a key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from prometheus_client import Counter, Histogram
from streamcrawl_contracts.messages import ArchiveRecord, Envelope
from streamcrawl_contracts.topics import PAGE_FETCHED
from streamcrawl_core.warc_layout import cdxj_key, file_stem, state_key, warc_key
from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record

from streamcrawl_warc.records import FileWriter, Written, cdxj_lines

log = logging.getLogger("streamcrawl.warc")

RECORDS = Counter("streamcrawl_warc_fetches_total", "Fetches handled by the WARC writer", ["result"])
_RECORDS = Children(RECORDS)
FILES = Counter("streamcrawl_warc_files_total", "WARC files uploaded")
FILE_BYTES = Counter("streamcrawl_warc_file_bytes_total", "Bytes of WARC files uploaded")
UPLOAD_SECONDS = Histogram("streamcrawl_warc_upload_seconds", "Time to upload one WARC file and its index")
UPLOAD_FAILURES = Counter("streamcrawl_warc_upload_failures_total", "Failed WARC file uploads (retried)")


class WarcStore(Protocol):
    """What the writer needs from the blob store (S3BlobStore and MemoryBlobStore are both one)."""

    def get_page(self, key: str) -> bytes: ...

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def get_bytes(self, key: str) -> bytes | None: ...

    def put_file(self, key: str, path: str, content_type: str) -> None: ...


@dataclass(frozen=True)
class WarcPolicy:
    spool_dir: Path
    max_file_bytes: int = 1 << 30
    max_file_age_s: float = 30.0
    max_file_records: int = 20_000
    name: str = "streamcrawl"
    # The checkpoint keeps the ids of the files closed in this window (and always the last one): a fetch
    # delivered again within it, even after a restart, is not written twice.
    checkpoint_window_s: float = 600.0
    upload_retry_s: float = 2.0


@dataclass
class _Open:
    partition: int
    first_offset: int
    stem: str
    path: Path
    fh: BinaryIO
    writer: FileWriter
    opened: float
    written: list[Written] = field(default_factory=list)
    ids: dict[str, Written] = field(default_factory=dict)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    done: asyncio.Future[bool] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    closing: bool = False

    @property
    def key(self) -> str:
        return self.stem + ".warc.gz"


Location = tuple[str, int, int]  # file key, offset, length


class WarcHandler:
    def __init__(self, store: WarcStore, policy: WarcPolicy) -> None:
        self.store = store
        self.policy = policy
        policy.spool_dir.mkdir(parents=True, exist_ok=True)
        self.owned: set[int] = set()
        self._open: dict[int, _Open] = {}
        # Per partition: the last files' keys, oldest first, each with when it closed and its ids → location.
        self._recent: dict[int, OrderedDict[str, tuple[float, dict[str, Location]]]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._roller: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def on_assign(self, partitions: list[int]) -> None:
        for part in partitions:
            raw = await asyncio.to_thread(self.store.get_bytes, state_key(part))
            recent: OrderedDict[str, tuple[float, dict[str, Location]]] = OrderedDict()
            if raw:
                for entry in json.loads(raw).get("files", []):
                    recent[entry["key"]] = (float(entry.get("closed_at", 0.0)),
                                            {i: (entry["key"], o, n) for i, (o, n) in entry["ids"].items()})
            self._recent[part] = recent
            self.owned.add(part)
        if self._roller is None:
            self._roller = asyncio.create_task(self._roll_forever())

    async def on_revoke(self, partitions: list[int]) -> None:
        for part in partitions:
            self.owned.discard(part)
            f = self._open.pop(part, None)
            if f is not None:  # its records go to the partition's new owner, which writes them again
                self._discard(f)
            self._recent.pop(part, None)

    async def tick(self, now: float) -> Sequence[Output]:
        return ()

    async def close(self) -> None:
        if self._roller is not None:
            self._roller.cancel()
        if self._closing:
            await asyncio.wait(self._closing, timeout=60)
        for part in list(self._open):
            self._discard(self._open.pop(part))

    def _discard(self, f: _Open) -> None:
        f.closing = True
        f.fh.close()
        f.path.unlink(missing_ok=True)
        if not f.done.done():
            f.done.set_result(False)

    # ------------------------------------------------------------------ records

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if not isinstance(message, ArchiveRecord):
            raise PoisonMessage(f"unexpected message type {type(message).__name__}")
        part = record.partition
        if part not in self.owned:
            return ()
        ex_id = message.exchange.id
        for _closed, ids in self._recent.get(part, {}).values():
            if ex_id in ids:  # already in a file in S3: publish again, write nothing
                _RECORDS("repeat").inc()
                return self._publish(message, ids[ex_id])
        current = self._open.get(part)
        if current is not None and ex_id in current.ids:
            _RECORDS("repeat").inc()
            return await self._after_upload(current, message, current.ids[ex_id])
        body = None
        if message.revisit_of is None and message.storage_key:
            try:
                body = await asyncio.to_thread(self.store.get_page, message.storage_key)
            except KeyError as exc:
                raise PoisonMessage(f"body {message.storage_key} not in the blob store") from exc
        while True:
            f = self._open.get(part) or self._new_file(part, record.offset, message.fetched_at)
            async with f.lock:
                if f.closing:
                    continue  # closed while we waited for the lock: the next file takes the record
                written = await asyncio.to_thread(f.writer.fetch, message, body)
                f.written.append(written)
                f.ids[ex_id] = written
                full = (f.fh.tell() >= self.policy.max_file_bytes
                        or len(f.written) >= self.policy.max_file_records)
            break
        if full:
            self._start_close(f)
        _RECORDS("revisit" if message.revisit_of else "response").inc()
        return await self._after_upload(f, message, written)

    async def _after_upload(self, f: _Open, message: ArchiveRecord, written: Written) -> Sequence[Output]:
        if not await asyncio.shield(f.done):
            return ()  # the partition moved (or the writer stops): the next owner writes it
        return self._publish(message, (f.key, written.offset, written.length))

    @staticmethod
    def _publish(message: ArchiveRecord, loc: Location) -> Sequence[Output]:
        if message.page is None:
            return ()
        page = message.page.model_copy(update={"warc_filename": loc[0], "warc_offset": loc[1],
                                                "warc_length": loc[2]})
        return (Output(PAGE_FETCHED, message.host, page),)

    def _new_file(self, part: int, offset: int, first_fetch: float) -> _Open:
        stem = file_stem(part, offset, self.policy.name)
        path = self.policy.spool_dir / (stem.replace("/", "_") + ".warc.gz")
        fh = path.open("wb")
        writer = FileWriter(fh, Path(warc_key(part, offset, self.policy.name)).name)
        writer.warcinfo(first_fetch, stem)
        f = _Open(part, offset, stem, path, fh, writer, time.monotonic())
        self._open[part] = f
        return f

    # ------------------------------------------------------------------ closing files

    async def _roll_forever(self) -> None:
        while True:
            await asyncio.sleep(min(1.0, self.policy.max_file_age_s / 4))
            now = time.monotonic()
            for f in list(self._open.values()):
                if now - f.opened >= self.policy.max_file_age_s:
                    self._start_close(f)

    def _start_close(self, f: _Open) -> None:
        if self._open.get(f.partition) is f:
            del self._open[f.partition]  # new records open the next file
        else:
            return  # already closing (or discarded)
        task = asyncio.create_task(self._close(f))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _close(self, f: _Open) -> None:
        async with f.lock:
            f.closing = True
            f.fh.close()
        index = cdxj_lines(f.written).encode()
        wkey, ckey = f.key, cdxj_key(f.partition, f.first_offset, self.policy.name)
        while True:
            if f.partition not in self.owned:
                self._discard(f)
                return
            t0 = time.perf_counter()
            try:
                # The index first: a file in the bucket always has its index.
                await asyncio.to_thread(self.store.put_bytes, ckey, index)
                await asyncio.to_thread(self.store.put_file, wkey, str(f.path), "application/warc")
                await self._checkpoint(f)
                break
            except Exception as exc:  # S3 down: keep the records waiting and try again
                UPLOAD_FAILURES.inc()
                log.warning("warc upload failed, retrying", extra={"file": wkey, "error": repr(exc)[:300]})
                await asyncio.sleep(self.policy.upload_retry_s)
        size = f.path.stat().st_size
        UPLOAD_SECONDS.observe(time.perf_counter() - t0)
        FILES.inc()
        FILE_BYTES.inc(size)
        f.path.unlink(missing_ok=True)
        log.info("warc file", extra={"file": wkey, "bytes": size, "fetches": len(f.written)})
        if not f.done.done():
            f.done.set_result(True)

    async def _checkpoint(self, f: _Open) -> None:
        recent = self._recent.setdefault(f.partition, OrderedDict())
        now = time.time()
        recent[f.key] = (now, {i: (f.key, w.offset, w.length) for i, w in f.ids.items()})
        while len(recent) > 1 and next(iter(recent.values()))[0] < now - self.policy.checkpoint_window_s:
            recent.popitem(last=False)
        state = {"files": [{"key": key, "closed_at": closed, "ids": {i: [o, n] for i, (_k, o, n) in ids.items()}}
                           for key, (closed, ids) in recent.items()]}
        await asyncio.to_thread(self.store.put_bytes, state_key(f.partition), json.dumps(state).encode())
