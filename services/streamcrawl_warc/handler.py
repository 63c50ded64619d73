"""The WARC writer's run-loop handler: archive records → WARC files in S3 → page_fetched.

Each assigned partition of the archive topic has at most one open file, spooled on local disk. A record
is written into it at once (request, response or revisit, metadata); its handler call then waits until
the file is durable in S3 and only then returns, with the page_fetched message (carrying the file's key,
the record's offset and length) when the record has one. So the run loop commits a record's offset only
after its WARC file is in S3 (at-least-once), and page_fetched never names a file that is not there.

A file is closed when it reaches `max_file_bytes`, when it is `max_file_age_s` old, or when
`max_file_records` records wait on it: the partition's checkpoint first lists it as pending, then its
CDXJ index and the file are uploaded, then the checkpoint lists it as done. The checkpoint
(warc/_state/pNNN.json) lists the exchange ids of the partition's files closed in the last
`checkpoint_window_s` (10 min) with their locations: a record delivered again (its offset was not
committed when the writer stopped, or dedup sent its fetch again) whose id is there is not written again,
only published again. A writer killed during an upload leaves a pending entry: its next owner keeps it if
S3 holds the file at its full size (the upload finished, only the last checkpoint write was lost) and
drops it, with any index uploaded before the file, if not. Without the pending entry a file uploaded
just before a kill -9 was written a second time, under another name, by the replay. Checkpoint writes
of one partition are serialized, so a later write always lists every file of an earlier one. Messages are
keyed by exchange id, so no two records of one host wait on each other (the loop serializes a key).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import zlib
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from prometheus_client import Counter, Histogram
from streamcrawl_contracts.messages import ArchiveRecord, Envelope
from streamcrawl_contracts.topics import PAGE_FETCHED
from streamcrawl_core.warc_layout import cdxj_key, file_stem, state_key, warc_key
from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.blobs import decode_page
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record

from streamcrawl_warc.records import FileWriter, Written, cdxj_lines

log = logging.getLogger("streamcrawl.warc")

RECORDS = Counter("streamcrawl_warc_fetches_total", "Fetches handled by the WARC writer", ["result"])
_RECORDS = Children(RECORDS)
FILES = Counter("streamcrawl_warc_files_total", "WARC files uploaded")
FILE_BYTES = Counter("streamcrawl_warc_file_bytes_total", "Bytes of WARC files uploaded")
UPLOAD_SECONDS = Histogram("streamcrawl_warc_upload_seconds", "Time to upload one WARC file and its index")
BODIES = Counter("streamcrawl_warc_bodies_total", "Response bodies written, by where they came from: inline "
                 "(in the archive record) or s3", ["source"])
_BODIES = Children(BODIES)
UPLOAD_FAILURES = Counter("streamcrawl_warc_upload_failures_total", "Failed WARC file uploads (retried)")


def _inline_body(gz: bytes) -> bytes | None:
    """An archive record's inline body, decoded; None if it does not decode (then the blob is read)."""
    try:
        return decode_page(gz)
    except (OSError, EOFError, zlib.error) as exc:
        log.warning("inline body does not decode, reading the blob", extra={"error": repr(exc)[:200]})
        return None


class WarcStore(Protocol):
    """What the writer needs from the blob store (S3BlobStore and MemoryBlobStore are both one)."""

    def get_page(self, key: str) -> bytes: ...

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def get_bytes(self, key: str) -> bytes | None: ...

    def put_file(self, key: str, path: str, content_type: str) -> None: ...

    def object_size(self, key: str) -> int | None: ...

    def delete(self, key: str) -> None: ...


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
    # On revoke, an upload of the partition's file that is under way gets this long to end before the
    # partition goes: its next owner then finds the file in S3, or none, never one that appears later.
    revoke_upload_wait_s: float = 30.0


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


@dataclass
class _Listed:
    """A file in the partition's checkpoint."""
    closed_at: float
    ids: dict[str, Location]
    size: int | None  # bytes (None: in a checkpoint written before sizes were kept, or not yet sealed)
    pending: bool = False  # listed before its upload ended: it counts once S3 holds it at this size
    file: _Open | None = None  # this process's file, from its close until its upload ends (ids: file.ids)


#: The roller's shortest sleep: a file found due is closed at once, but a clock that has not moved past its
#: deadline (monotonic granularity) must not make the roller spin.
_ROLL_MIN_SLEEP_S = 0.01


class WarcHandler:
    def __init__(self, store: WarcStore, policy: WarcPolicy) -> None:
        self.store = store
        self.policy = policy
        policy.spool_dir.mkdir(parents=True, exist_ok=True)
        self.owned: set[int] = set()
        self._open: dict[int, _Open] = {}
        # Per partition: the last files' keys, oldest first, each with when it closed and its ids → location.
        self._recent: dict[int, OrderedDict[str, _Listed]] = {}
        self._state_locks: dict[int, asyncio.Lock] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self._closing_of: dict[int, set[asyncio.Task[None]]] = {}
        self._roller: asyncio.Task[None] | None = None
        self._file_opened = asyncio.Event()  # wakes the roller when it has no open file to wait for

    # ------------------------------------------------------------------ lifecycle

    async def on_assign(self, partitions: list[int]) -> None:
        for part in partitions:
            self._recent[part] = await self._load_checkpoint(part)
            self.owned.add(part)
        if self._roller is None:
            self._roller = asyncio.create_task(self._roll_forever())

    async def _load_checkpoint(self, part: int) -> OrderedDict[str, _Listed]:
        raw = await asyncio.to_thread(self.store.get_bytes, state_key(part))
        recent: OrderedDict[str, _Listed] = OrderedDict()
        for entry in json.loads(raw).get("files", []) if raw else []:
            key = entry["key"]
            listed = _Listed(float(entry.get("closed_at", 0.0)),
                             {i: (key, o, n) for i, (o, n) in entry["ids"].items()},
                             entry.get("size"), bool(entry.get("pending", False)))
            if listed.pending:
                size = await asyncio.to_thread(self.store.object_size, key)
                if size is None or size != listed.size:
                    # Its upload did not finish: the replay writes its records again (an index uploaded
                    # ahead of it would name a file that is not there, or not this one).
                    log.warning("warc file of a stopped writer not in S3, its records are written again",
                                extra={"file": key, "fetches": len(listed.ids)})
                    await asyncio.to_thread(self.store.delete, key[: -len(".warc.gz")] + ".cdxj")
                    if size is not None:
                        await asyncio.to_thread(self.store.delete, key)
                    continue
                listed.pending = False
            recent[key] = listed
        return recent

    async def on_revoke(self, partitions: list[int]) -> None:
        for part in partitions:
            self.owned.discard(part)
        uploads = [t for part in partitions for t in self._closing_of.get(part, ())]
        if uploads:  # each ends after its current S3 call, seeing the partition is no longer owned
            await asyncio.wait(uploads, timeout=self.policy.revoke_upload_wait_s)
        for part in partitions:
            f = self._open.pop(part, None)
            if f is not None:  # its records go to the partition's new owner, which writes them again
                self._discard(f)
            self._recent.pop(part, None)

    async def tick(self, now: float) -> Sequence[Output]:
        return ()

    def tick_due(self, now: float) -> float:
        # No timed work in the run loop (files are closed by the roller task): without this the loop would
        # wake every tick_interval_s to call a tick that does nothing (measured idle: the writer's event
        # loop cost 5x the other services', docs/benchmarks-idle.md).
        return math.inf

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
        for key, listed in self._recent.get(part, {}).items():
            if listed.file is not None:  # closing: publish once its upload is done
                w = listed.file.ids.get(ex_id)
                if w is not None:
                    _RECORDS("repeat").inc()
                    return await self._after_upload(listed.file, message, (key, w.offset, w.length))
            elif ex_id in listed.ids:  # in a file in S3: publish again, write nothing
                _RECORDS("repeat").inc()
                return self._publish(message, listed.ids[ex_id])
        current = self._open.get(part)
        if current is not None and ex_id in current.ids:
            _RECORDS("repeat").inc()
            w = current.ids[ex_id]
            return await self._after_upload(current, message, (current.key, w.offset, w.length))
        body = None if message.revisit_of is not None else await self._body(message)
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
        return await self._after_upload(f, message, (f.key, written.offset, written.length))

    async def _body(self, message: ArchiveRecord) -> bytes | None:
        """The response's payload as received: carried in the record (the wire bytes, or a small uncoded
        page's stored form), else read from the blob store (the wire bytes' own blob when the page came
        content-coded, else the page itself); None when the fetcher stored no body."""
        coded = message.wire_hash is not None and message.wire_hash != message.content_hash
        if message.wire_body is not None:
            _BODIES("inline").inc()
            return message.wire_body
        if coded and message.wire_key is None:
            # A fetcher that carries small wire bodies inline, and the body was lost on the way (a parser
            # or dedup from before wire_body): reading storage_key would record the decoded page under
            # the received head. Dead-lettered, with the reason.
            raise PoisonMessage("content-coded response without its wire body (wire_body or wire_key)")
        source = (message.wire_key or message.storage_key) if message.wire_hash else message.storage_key
        if not source:
            return None
        if message.body_gz is not None and source == message.storage_key:
            body = _inline_body(message.body_gz)  # small (ARCHIVE_INLINE_MAX_BYTES): no S3 read, no thread
            if body is not None:
                _BODIES("inline").inc()
                return body
        try:
            body = await asyncio.to_thread(self.store.get_page, source)
        except KeyError as exc:
            raise PoisonMessage(f"body {source} not in the blob store") from exc
        _BODIES("s3").inc()
        return body

    async def _after_upload(self, f: _Open, message: ArchiveRecord, loc: Location) -> Sequence[Output]:
        if not await asyncio.shield(f.done):
            return ()  # the partition moved (or the writer stops): the next owner writes it
        return self._publish(message, loc)

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
        self._file_opened.set()
        return f

    # ------------------------------------------------------------------ closing files

    async def _roll_forever(self) -> None:
        """Close each open file once it is max_file_age_s old. Sleeps until the oldest open file is due (a
        file opened meanwhile is due later), or, with none open, until one is: an idle writer never wakes."""
        while True:
            if not self._open:
                self._file_opened.clear()
                await self._file_opened.wait()
                continue
            due = min(f.opened for f in self._open.values()) + self.policy.max_file_age_s
            await asyncio.sleep(max(_ROLL_MIN_SLEEP_S, due - time.monotonic()))
            now = time.monotonic()
            for f in list(self._open.values()):
                if now - f.opened >= self.policy.max_file_age_s:
                    self._start_close(f)

    def _start_close(self, f: _Open) -> None:
        if self._open.get(f.partition) is f:
            del self._open[f.partition]  # new records open the next file
        else:
            return  # already closing (or discarded)
        # Listed at once (its ids are the file's own, still growing until it is sealed): a copy of one of
        # its fetches delivered meanwhile waits for this upload instead of going into the next file.
        self._recent.setdefault(f.partition, OrderedDict())[f.key] = _Listed(time.time(), {}, None, True, f)
        task = asyncio.create_task(self._close(f))
        self._closing.add(task)
        of = self._closing_of.setdefault(f.partition, set())
        of.add(task)

        def done(t: asyncio.Task[None]) -> None:
            self._closing.discard(t)
            of.discard(t)

        task.add_done_callback(done)

    async def _close(self, f: _Open) -> None:
        async with f.lock:
            f.closing = True
            f.fh.close()
        index = cdxj_lines(f.written).encode()
        wkey, ckey = f.key, cdxj_key(f.partition, f.first_offset, self.policy.name)
        size = f.path.stat().st_size
        recent = self._recent.get(f.partition)
        listed = recent.get(wkey) if recent is not None else None
        if listed is None or f.partition not in self.owned:
            self._discard(f)
            return
        listed.ids = {i: (wkey, w.offset, w.length) for i, w in f.ids.items()}
        listed.size = size
        t0 = time.perf_counter()
        # Listed as pending first: a writer killed during the upload leaves its next owner a name to check.
        if not await self._retrying(f, "checkpoint", lambda: self._checkpoint(f.partition)):
            return
        # The index first: a file in the bucket always has its index.
        if not await self._retrying(f, "upload", lambda: self._upload(ckey, index, wkey, f.path)):
            return
        listed.pending = False
        if not await self._retrying(f, "checkpoint", lambda: self._checkpoint(f.partition)):
            return
        listed.file = None
        UPLOAD_SECONDS.observe(time.perf_counter() - t0)
        FILES.inc()
        FILE_BYTES.inc(size)
        f.path.unlink(missing_ok=True)
        log.info("warc file", extra={"file": wkey, "bytes": size, "fetches": len(f.written)})
        if not f.done.done():
            f.done.set_result(True)

    async def _upload(self, ckey: str, index: bytes, wkey: str, path: Path) -> None:
        await asyncio.to_thread(self.store.put_bytes, ckey, index)
        await asyncio.to_thread(self.store.put_file, wkey, str(path), "application/warc")

    async def _retrying(self, f: _Open, what: str, step: Callable[[], Awaitable[None]]) -> bool:
        """Run ``step`` until it succeeds (S3 down: the records wait); False, with the file discarded, once
        the partition is no longer this writer's (its next owner writes the records again, or finds them
        in the file the pending entry names)."""
        while True:
            if f.partition not in self.owned:
                self._discard(f)
                return False
            try:
                await step()
                if f.partition in self.owned:
                    return True
                continue  # revoked during the step: discarded above
            except Exception as exc:
                UPLOAD_FAILURES.inc()
                log.warning(f"warc {what} failed, retrying", extra={"file": f.key, "error": repr(exc)[:300]})
                await asyncio.sleep(self.policy.upload_retry_s)

    async def _checkpoint(self, part: int) -> None:
        lock = self._state_locks.setdefault(part, asyncio.Lock())
        async with lock:  # one write at a time per partition: the last one lists every file
            if part not in self.owned:
                return  # revoked meanwhile: the checkpoint is the next owner's now
            recent = self._recent.setdefault(part, OrderedDict())
            now = time.time()
            while len(recent) > 1:
                oldest = next(iter(recent.values()))
                if oldest.pending or oldest.closed_at >= now - self.policy.checkpoint_window_s:
                    break
                recent.popitem(last=False)
            state = {"files": [{"key": k, "closed_at": e.closed_at, "size": e.size, "pending": e.pending,
                                "ids": {i: [o, n] for i, (_k, o, n) in e.ids.items()}}
                               for k, e in recent.items() if e.size is not None or not e.pending]}
            await asyncio.to_thread(self.store.put_bytes, state_key(part), json.dumps(state).encode())
