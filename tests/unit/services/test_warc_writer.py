"""The WARC writer on the in-memory blob store: records and their order, digests, revisits, the CDXJ index
(checked against cdxj-indexer's own output for the same file), file rolling, page_fetched locations, and
replays (a fetch delivered again is published again, never written twice)."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from streamcrawl_contracts.messages import ArchiveRecord, HttpExchange, PageFetched, RevisitOf
from streamcrawl_core.warc_layout import sha256_digest, state_key
from streamcrawl_runtime.memory import MemoryBlobStore
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Record
from streamcrawl_warc.handler import WarcHandler, WarcPolicy
from warcio.archiveiterator import ArchiveIterator

REQ = "GET /a HTTP/1.1\r\nHost: h.test\r\nUser-Agent: t\r\nAccept-Encoding: gzip, br\r\n\r\n"
RESP = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\nContent-Length: 40\r\n\r\n"


def _page(url: str, body: bytes) -> PageFetched:
    return PageFetched(url=url, canonical_url=url, fetched_at=datetime.now(UTC), http_status=200,
                       content_type="text/html", content_hash=hashlib.sha256(body).hexdigest(), simhash=None,
                       storage_key="k", out_links=[], title=None, changed=False)


def _rec(store: MemoryBlobStore, ex_id: str, url: str, body: bytes | None, *, revisit: RevisitOf | None = None,
         publish: bool = True, resp: str = RESP, at: float = 1.7e9) -> ArchiveRecord:
    key = store.put_page(body)[1] if body is not None and revisit is None else None
    digest = hashlib.sha256(body).hexdigest() if body is not None else None
    return ArchiveRecord(url=url, host="h.test", url_fp=1, fetched_at=at, fetch_s=0.012, outcome="fetched",
                         status=200, exchange=HttpExchange(id=ex_id, ip="127.0.0.9", request_head=REQ,
                                                           response_head=resp),
                         content_hash=digest, storage_key=key, out_links=["http://h.test/b"],
                         revisit_of=revisit, page=_page(url, body or b"") if publish else None)


def _handler(tmp_path: Path, **kw: object) -> tuple[WarcHandler, MemoryBlobStore]:
    store = MemoryBlobStore()
    return WarcHandler(store, WarcPolicy(spool_dir=tmp_path / "spool", **kw)), store  # type: ignore[arg-type]


def _record(offset: int, part: int = 0) -> Record:
    return Record("streamcrawl.archive", part, offset, "k", b"")


def _read(data: bytes) -> list[tuple[object, bytes]]:
    """(record, its content) of each record: ArchiveIterator streams, so content is read while iterating."""
    return [(r, r.content_stream().read()) for r in ArchiveIterator(io.BytesIO(data))]


def _raw(data: bytes) -> list[tuple[object, bytes]]:
    """(record, its payload as written: no content decoding) of each record."""
    return [(r, r.raw_stream.read()) for r in ArchiveIterator(io.BytesIO(data))]


def _files(store: MemoryBlobStore, ext: str) -> dict[str, bytes]:
    return {k: v for k, v in store.objects.items() if k.startswith("warc/p") and k.endswith(ext)}


async def _write(h: WarcHandler, recs: list[ArchiveRecord], part: int = 0, first: int = 0) -> list[list]:
    return list(await asyncio.gather(*(h.handle(_record(first + i, part), r) for i, r in enumerate(recs))))


def test_one_fetch_is_request_response_metadata_and_page_fetched_points_at_the_response(tmp_path: Path) -> None:
    async def run() -> None:
        h, store = _handler(tmp_path, max_file_age_s=0.2)
        await h.on_assign([0])
        body = b"<html>hello</html>"
        (out,) = await _write(h, [_rec(store, "e1", "http://h.test/a", body)])
        await h.close()
        (key, data), = _files(store, ".warc.gz").items()
        assert key == "warc/p000/streamcrawl-p000-000000000000.warc.gz"
        records = _read(data)
        assert [r.rec_type for r, _ in records] == ["warcinfo", "request", "response", "metadata"]
        (req, _), (resp, payload), (_meta, meta_body) = records[1:]
        assert resp.rec_headers.get_header("WARC-IP-Address") == "127.0.0.9"
        assert req.rec_headers.get_header("WARC-Concurrent-To") == resp.rec_headers.get_header("WARC-Record-ID")
        assert resp.rec_headers.get_header("WARC-Payload-Digest") == sha256_digest(hashlib.sha256(body).hexdigest())
        # the decoded payload is recorded; the codings it arrived with are kept under X-Crawler-
        assert resp.http_headers.get_header("X-Crawler-Content-Encoding") == "gzip"
        assert resp.http_headers.get_header("Content-Length") == str(len(body))
        assert payload == body
        assert b"outlink: http://h.test/b" in meta_body
        (msg,) = out
        page = msg.value
        assert page.warc_filename == key
        raw = data[page.warc_offset:page.warc_offset + page.warc_length]
        ((only, content),) = _read(raw)
        assert only.rec_type == "response" and content == body

    asyncio.run(run())


def test_revisits_name_the_earlier_capture_and_carry_no_payload(tmp_path: Path) -> None:
    async def run() -> None:
        h, store = _handler(tmp_path, max_file_age_s=0.2)
        await h.on_assign([0])
        body = b"<p>same</p>"
        r304 = _rec(store, "e2", "http://h.test/a", body, publish=False, resp="HTTP/1.1 304 Not Modified\r\n\r\n",
                    revisit=RevisitOf(url="http://h.test/a", fetched_at=1.6e9))
        (out,) = await _write(h, [r304])
        assert out == ()
        await h.close()
        (data,) = _files(store, ".warc.gz").values()
        rev, rev_body = next((r, c) for r, c in _read(data) if r.rec_type == "revisit")
        assert rev.rec_headers.get_header("WARC-Profile").endswith("/revisit/identical-payload-digest")
        assert rev.rec_headers.get_header("WARC-Refers-To-Target-URI") == "http://h.test/a"
        assert rev.rec_headers.get_header("WARC-Refers-To-Date").startswith("2020-09-13T12:26:40")
        assert rev.rec_headers.get_header("WARC-Payload-Digest") == sha256_digest(hashlib.sha256(body).hexdigest())
        assert rev_body == b""
        (cdxj,) = _files(store, ".cdxj").values()
        assert json.loads(cdxj.decode().split(" ", 2)[2])["mime"] == "warc/revisit"

    asyncio.run(run())


def test_cdxj_is_what_cdxj_indexer_writes_for_the_same_file(tmp_path: Path) -> None:
    async def run() -> tuple[str, bytes, bytes]:
        h, store = _handler(tmp_path, max_file_age_s=0.2)
        await h.on_assign([0])
        recs = [_rec(store, f"e{i}", f"http://h.test/p{i}?b=2&a=1", f"body {i}".encode(), at=1.7e9 + i)
                for i in range(5)]
        # an unchanged brotli page: its revisit must not tell readers to decode the (empty) payload
        br = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: br\r\nContent-Length: 9\r\n\r\n"
        recs.append(_rec(store, "r", "http://h.test/p1?b=2&a=1", b"body 1", publish=False, at=1.7e9 + 9, resp=br,
                         revisit=RevisitOf(url="http://h.test/p1?b=2&a=1", fetched_at=1.7e9 + 1)))
        await _write(h, recs)
        await h.close()
        ((key, data),) = _files(store, ".warc.gz").items()
        (cdxj,) = _files(store, ".cdxj").values()
        return key, data, cdxj

    key, data, cdxj = asyncio.run(run())
    path = tmp_path / Path(key).name
    path.write_bytes(data)
    ref = subprocess.run([sys.executable, "-m", "cdxj_indexer.main", "--sort", str(path)], capture_output=True,
                         check=True, text=True).stdout
    assert cdxj.decode() == ref
    assert len(ref.splitlines()) == 6
    check = subprocess.run([sys.executable, "-c", "from warcio.cli import main; main()", "check", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


def test_files_roll_by_size_and_each_has_its_index_and_a_checkpoint(tmp_path: Path) -> None:
    async def run() -> MemoryBlobStore:
        h, store = _handler(tmp_path, max_file_bytes=2048, max_file_age_s=0.3, checkpoint_window_s=0.0)
        await h.on_assign([2])
        recs = [_rec(store, f"e{i}", f"http://h.test/{i}", bytes(range(256)) * 4 + bytes([i])) for i in range(6)]
        for i, r in enumerate(recs):  # one after another: each fills a file of its own
            await h.handle(_record(10 + i, 2), r)
        await h.close()
        return store

    store = asyncio.run(run())
    warcs, cdxjs = _files(store, ".warc.gz"), _files(store, ".cdxj")
    assert len(warcs) == 6 and {k[:-8] for k in warcs} == {k[:-5] for k in cdxjs}
    assert "warc/p002/streamcrawl-p002-000000000013.warc.gz" in warcs
    state = json.loads(store.objects[state_key(2)])
    assert [f["key"] for f in state["files"]][-1].endswith("000000000015.warc.gz") and len(state["files"]) == 1


def test_a_fetch_delivered_again_is_published_again_not_written_twice(tmp_path: Path) -> None:
    async def run() -> None:
        h, store = _handler(tmp_path, max_file_age_s=0.2)
        await h.on_assign([0])
        rec = _rec(store, "same", "http://h.test/a", b"x")
        task = asyncio.create_task(h.handle(_record(0), rec))
        await asyncio.sleep(0.05)  # written, its file still open: the second copy waits for the same upload
        again_open = await h.handle(_record(1), rec)
        first = await task
        assert first[0].value == again_open[0].value
        # after a restart (new process: the checkpoint tells which fetches the last files hold)
        await h.close()
        h2 = WarcHandler(store, h.policy)
        await h2.on_assign([0])
        (again,) = await h2.handle(_record(7), rec)
        assert again.value.warc_filename == first[0].value.warc_filename
        assert again.value.warc_offset == first[0].value.warc_offset
        await h2.close()
        (data,) = _files(store, ".warc.gz").values()
        assert [r.rec_type for r in ArchiveIterator(io.BytesIO(data))].count("response") == 1

    asyncio.run(run())


def test_revoked_partition_drops_its_open_file_and_publishes_nothing(tmp_path: Path) -> None:
    async def run() -> None:
        h, store = _handler(tmp_path, max_file_age_s=30)
        await h.on_assign([1])
        task = asyncio.create_task(h.handle(_record(0, 1), _rec(store, "e", "http://h.test/a", b"x")))
        await asyncio.sleep(0.05)
        await h.on_revoke([1])
        assert await task == ()
        await h.close()
        assert not _files(store, ".warc.gz")
        assert not list((tmp_path / "spool").iterdir())

    asyncio.run(run())


def test_a_missing_body_is_a_poison_message(tmp_path: Path) -> None:
    async def run() -> None:
        h, store = _handler(tmp_path)
        await h.on_assign([0])
        rec = _rec(store, "e", "http://h.test/a", b"x").model_copy(update={"storage_key": "pages/no/such.gz"})
        with pytest.raises(PoisonMessage):
            await h.handle(_record(0), rec)
        await h.close()

    asyncio.run(run())


class _CountingStore(MemoryBlobStore):
    def __init__(self) -> None:
        super().__init__()
        self.page_reads: list[str] = []

    def get_page(self, key: str) -> bytes:
        self.page_reads.append(key)
        return super().get_page(key)


@pytest.mark.parametrize("corrupt", [False, True])
def test_an_inline_body_is_written_without_reading_the_blob_and_a_corrupt_one_falls_back_to_it(
        tmp_path: Path, corrupt: bool) -> None:
    async def run() -> None:
        store = _CountingStore()
        h = WarcHandler(store, WarcPolicy(spool_dir=tmp_path / "spool", max_file_age_s=0.2))
        await h.on_assign([0])
        body = b"<html>inline</html>"
        rec = _rec(store, "e1", "http://h.test/a", body)
        gz = b"not gzip at all" if corrupt else store.objects[rec.storage_key or ""]
        # The record's own copy differs from the blob only when corrupt: the blob is then the one written.
        (out,) = await _write(h, [ArchiveRecord.model_validate_json(
            rec.model_copy(update={"body_gz": gz}).model_dump_json())])
        await h.close()
        assert store.page_reads == ([rec.storage_key] if corrupt else [])
        (data,) = _files(store, ".warc.gz").values()
        resp, payload = next((r, c) for r, c in _read(data) if r.rec_type == "response")
        assert payload == body
        assert resp.rec_headers.get_header("WARC-Payload-Digest") == sha256_digest(hashlib.sha256(body).hexdigest())
        (msg,) = out
        assert msg.value.warc_filename is not None

    asyncio.run(run())


def test_an_inline_body_is_not_used_for_a_content_coded_response(tmp_path: Path) -> None:
    """With wire_key set the record holds the bytes as transferred (their own blob), not the page: an
    inline copy of the page must not stand in for them."""
    async def run() -> None:
        store = _CountingStore()
        h = WarcHandler(store, WarcPolicy(spool_dir=tmp_path / "spool", max_file_age_s=0.2))
        await h.on_assign([0])
        body = b"<html>page</html>"
        wire = b"wire bytes"
        rec = _rec(store, "e1", "http://h.test/a", body)
        _digest, wkey, _new = store.put_page(wire)
        rec = rec.model_copy(update={"body_gz": store.objects[rec.storage_key or ""], "wire_key": wkey,
                                     "wire_hash": hashlib.sha256(wire).hexdigest()})
        await _write(h, [rec])
        await h.close()
        assert store.page_reads == [wkey]

    asyncio.run(run())


def test_inline_wire_bytes_are_the_payload_and_a_coded_record_without_them_is_a_poison_message(
        tmp_path: Path) -> None:
    """A small content-coded response's bytes as transferred travel in the record (wire_body, no blob):
    they are written as received, with no read; a coded record with neither wire_body nor wire_key is
    dead-lettered rather than recorded with the decoded page under the received head."""
    async def run() -> None:
        store = _CountingStore()
        h = WarcHandler(store, WarcPolicy(spool_dir=tmp_path / "spool", max_file_age_s=0.2))
        await h.on_assign([0])
        body = b"<html>page</html>"
        wire = gzip.compress(body, mtime=0)
        rec = _rec(store, "e1", "http://h.test/a", body).model_copy(
            update={"wire_hash": hashlib.sha256(wire).hexdigest(), "wire_key": None, "wire_body": wire})
        (out,) = await _write(h, [ArchiveRecord.model_validate_json(rec.model_dump_json())])
        lost = rec.model_copy(update={"wire_body": None, "exchange": rec.exchange.model_copy(
            update={"id": "e2"})})
        with pytest.raises(PoisonMessage, match="without its wire body"):
            await _write(h, [lost])
        await h.close()
        assert store.page_reads == []
        (data,) = _files(store, ".warc.gz").values()
        resp, payload = next((r, c) for r, c in _raw(data) if r.rec_type == "response")
        assert payload == wire
        assert resp.rec_headers.get_header("WARC-Payload-Digest") == sha256_digest(hashlib.sha256(wire).hexdigest())
        (msg,) = out
        assert msg.value.warc_filename is not None

    asyncio.run(run())


class _DyingStore(MemoryBlobStore):
    """A store whose writer "dies" at one step of a file's close: every later put of that kind fails (the
    abandoned handler keeps retrying it, as a killed process would never get it done)."""

    def __init__(self, die_at: str) -> None:
        super().__init__()
        self.die_at = die_at  # "file": the WARC upload fails; "checkpoint": the checkpoint after it does
        self.uploaded = False

    def put_file(self, key: str, path: str, content_type: str = "application/octet-stream") -> None:
        if self.die_at == "file":
            raise OSError("killed")
        super().put_file(key, path, content_type)
        self.uploaded = True

    def put_bytes(self, key: str, data: bytes) -> None:
        if self.die_at == "checkpoint" and self.uploaded and key.startswith("warc/_state/"):
            raise OSError("killed")
        super().put_bytes(key, data)


def _restarted(dying: _DyingStore) -> MemoryBlobStore:
    """The same bucket, seen by the writer's next process."""
    store = MemoryBlobStore()
    store.objects = dying.objects
    return store


async def _kill_during_close(tmp_path: Path, dying: _DyingStore) -> tuple[WarcHandler, ArchiveRecord, asyncio.Task]:
    h = WarcHandler(dying, WarcPolicy(spool_dir=tmp_path / "spool1", max_file_age_s=0.2, upload_retry_s=0.05))
    await h.on_assign([0])
    rec = _rec(dying, "ex", "http://h.test/a", b"body")
    task = asyncio.create_task(h.handle(_record(5), rec))
    for _ in range(100):
        await asyncio.sleep(0.05)
        if state_key(0) in dying.objects and (dying.die_at == "file" or dying.uploaded):
            break
    state = json.loads(dying.objects[state_key(0)])
    assert [f["pending"] for f in state["files"]] == [True]  # listed before its upload
    assert not task.done()  # never published: the offset is not committed, the record comes again
    # the kill: nothing of this writer runs any more
    for t in [task, *h._closing]:
        t.cancel()
    await asyncio.gather(task, *h._closing, return_exceptions=True)
    return h, rec, task


def test_a_file_uploaded_just_before_a_kill_is_found_by_the_next_writer_not_written_again(tmp_path: Path) -> None:
    async def run() -> None:
        dying = _DyingStore("checkpoint")
        _h1, rec, _task = await _kill_during_close(tmp_path, dying)
        (first_key,) = _files(dying, ".warc.gz")
        store = _restarted(dying)
        h2 = WarcHandler(store, WarcPolicy(spool_dir=tmp_path / "spool2", max_file_age_s=0.2))
        await h2.on_assign([0])
        (again,) = await h2.handle(_record(5), rec)  # the replay
        assert again.value.warc_filename == first_key
        await h2.close()
        (data,) = _files(store, ".warc.gz").values()
        assert [r.rec_type for r in ArchiveIterator(io.BytesIO(data))].count("response") == 1

    asyncio.run(run())


def test_a_file_whose_upload_a_kill_cut_short_is_written_again_and_its_index_dropped(tmp_path: Path) -> None:
    async def run() -> None:
        dying = _DyingStore("file")
        _h1, rec, _task = await _kill_during_close(tmp_path, dying)
        assert not _files(dying, ".warc.gz") and len(_files(dying, ".cdxj")) == 1  # the index went first
        store = _restarted(dying)
        h2 = WarcHandler(store, WarcPolicy(spool_dir=tmp_path / "spool2", max_file_age_s=0.2))
        await h2.on_assign([0])
        assert not _files(store, ".cdxj")  # it named a file that is not there
        (again,) = await h2.handle(_record(5), rec)
        await h2.close()
        warcs = _files(store, ".warc.gz")
        assert list(warcs) == [again.value.warc_filename] and len(_files(store, ".cdxj")) == 1
        state = json.loads(store.objects[state_key(0)])
        assert [(f["key"], f["pending"]) for f in state["files"]] == [(again.value.warc_filename, False)]

    asyncio.run(run())


def test_an_idle_writer_has_no_timed_work_and_a_file_closes_when_it_is_due(tmp_path: Path) -> None:
    """The run loop is never woken for the writer (tick_due is inf); the roller sleeps while no file is open
    and then until the open file is max_file_age_s old, not on a fixed period."""
    async def run() -> None:
        h, store = _handler(tmp_path, max_file_age_s=0.3)
        assert h.tick_due(0.0) == float("inf")
        await h.on_assign([0])
        await asyncio.sleep(0.5)  # idle, longer than a file's age: nothing to close, nothing written
        assert not _files(store, ".warc.gz")
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        (out,) = await _write(h, [_rec(store, "e1", "http://h.test/a", b"<html>x</html>")])
        waited = loop.time() - t0
        # published once its file was closed and uploaded: at its age, not a roller period later
        assert 0.28 <= waited < 1.0, waited
        assert out and len(_files(store, ".warc.gz")) == 1
        await h.close()

    asyncio.run(run())
