"""Records as on the wire (issue 14): the response record holds the entity body as transferred
(Content-Encoding kept, transfer coding removed), WARC-Payload-Digest is over those bytes, `warcio check`
accepts the file, a revisit names the earlier capture's wire digest, and dedup asks for a revisit only when
the wire bytes match (the same decoded body served with another coding is a payload of its own)."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import io
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import brotli
from streamcrawl_contracts.messages import ArchiveRecord, FetchResult, HttpExchange, ParsedPage, RevisitOf
from streamcrawl_contracts.topics import ARCHIVE
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.partition import partition_for
from streamcrawl_core.traps import TrapConfig
from streamcrawl_core.warc_layout import received_head, sha256_digest
from streamcrawl_dedup.handler import DedupHandler
from streamcrawl_dedup.seen import SeenSet
from streamcrawl_fetcher.archive import archive_result
from streamcrawl_runtime.memory import MemoryBlobStore, MemoryCrawlState
from streamcrawl_runtime.ports.loop import Record
from streamcrawl_warc.handler import WarcHandler, WarcPolicy
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from tests.warcio_check import decode_payload, warcio_check

REQ = "GET /a HTTP/1.1\r\nHost: h.test\r\nAccept-Encoding: gzip, br\r\n\r\n"
BODY = b"<html><body>" + b"<p>words on the page</p>" * 200 + b"</body></html>"
T0 = 1_700_000_000.0


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _head(*fields: str) -> str:
    return "\r\n".join(["HTTP/1.1 200 OK", "Content-Type: text/html", *fields]) + "\r\n\r\n"


def _wire_rec(store: MemoryBlobStore, ex_id: str, wire: bytes, head: str, url: str = "http://h.test/a",
              revisit: RevisitOf | None = None, wire_hash: str | None = None) -> ArchiveRecord:
    """An archive record as the pipeline now builds it: the decoded page and, when it came content-coded,
    the wire bytes as a blob of their own."""
    page = store.store_page(BODY)
    wire_key = None
    if wire != BODY:
        wire_key = store.store_page(wire).key
    return ArchiveRecord(url=url, host="h.test", url_fp=1, fetched_at=T0, outcome="fetched", status=200,
                         exchange=HttpExchange(id=ex_id, ip="127.0.0.9", request_head=REQ, response_head=head),
                         content_hash=page.content_hash, storage_key=None if revisit else page.key,
                         revisit_of=revisit, wire_hash=wire_hash or _sha(wire),
                         wire_key=None if revisit else wire_key)


STORE = MemoryBlobStore()  # the blobs the records name (copied into each writer's store)


def _write(tmp_path: Path, recs: list[ArchiveRecord]) -> tuple[bytes, Path]:
    async def run() -> bytes:
        store = MemoryBlobStore()
        store.objects.update(STORE.objects)
        h = WarcHandler(store, WarcPolicy(spool_dir=tmp_path / "spool", max_file_age_s=0.2))
        await h.on_assign([0])
        await asyncio.gather(*(h.handle(Record("a", 0, i, "k", b""), r) for i, r in enumerate(recs)))
        await h.close()
        (data,) = [v for k, v in store.objects.items() if k.endswith(".warc.gz")]
        return data

    data = asyncio.run(run())
    path = tmp_path / "out.warc.gz"
    path.write_bytes(data)
    return data, path


def _responses(data: bytes) -> list[tuple[Any, bytes, bytes]]:
    """(record, raw payload, payload decoded per its Content-Encoding) of each response or revisit."""
    out = []
    for r in ArchiveIterator(io.BytesIO(data)):
        if r.rec_type in ("response", "revisit"):
            raw = r.raw_stream.read()
            out.append((r, raw, decode_payload(raw, r.http_headers.get_header("Content-Encoding"))))
    return out


def _warcio_check(path: Path) -> subprocess.CompletedProcess[str]:
    return warcio_check([path], verbose=True)


def test_a_content_coded_body_is_recorded_as_transferred_with_its_digest(tmp_path: Path) -> None:
    gz, br = gzip.compress(BODY, mtime=0), brotli.compress(BODY)
    recs = [
        _wire_rec(STORE, "g", gz, _head("Content-Encoding: gzip", f"Content-Length: {len(gz)}")),
        # chunked on the wire: the transport removed the framing, the header no longer describes the bytes
        _wire_rec(STORE, "c", gz, _head("Content-Encoding: gzip", "Transfer-Encoding: chunked")),
        _wire_rec(STORE, "b", br, _head("Content-Encoding: br", f"Content-Length: {len(br)}")),
        _wire_rec(STORE, "i", BODY, _head(f"Content-Length: {len(BODY)}")),
    ]
    data, path = _write(tmp_path, recs)
    by_coding = {}
    for rec, raw, decoded in _responses(data):
        http = rec.http_headers
        coding = http.get_header("Content-Encoding") or "identity"
        by_coding[(coding, http.get_header("X-Crawler-Transfer-Encoding"))] = raw
        assert rec.rec_headers.get_header("WARC-Payload-Digest") == sha256_digest(_sha(raw))
        assert http.get_header("Content-Length") == str(len(raw))
        assert http.get_header("Transfer-Encoding") is None and http.get_header("X-Crawler-Content-Encoding") is None
        assert decoded == BODY  # a reader decodes per Content-Encoding and gets what was parsed
    assert by_coding == {("gzip", None): gz, ("gzip", "chunked"): gz, ("br", None): br, ("identity", None): BODY}
    check = _warcio_check(path)
    assert check.returncode == 0, check.stdout + check.stderr


def test_warcio_check_catches_a_digest_over_the_decoded_body(tmp_path: Path) -> None:
    """The check the writer's output passes can fail: a gzip payload whose digest names the decoded body
    (what the writer recorded before wire bodies were kept, had it kept the coding)."""
    gz = gzip.compress(BODY, mtime=0)
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    http = StatusAndHeaders("200 OK", [("Content-Encoding", "gzip"), ("Content-Length", str(len(gz)))],
                            protocol="HTTP/1.1")
    rec = writer.create_warc_record("http://h.test/a", "response", payload=io.BytesIO(gz), length=len(gz),
                                    http_headers=http,
                                    warc_headers_dict={"WARC-Payload-Digest": sha256_digest(_sha(BODY))})
    writer.write_record(rec)
    path = tmp_path / "bad.warc.gz"
    path.write_bytes(out.getvalue())
    check = _warcio_check(path)
    assert check.returncode != 0, check.stdout


def test_a_revisit_names_the_wire_digest_of_the_capture(tmp_path: Path) -> None:
    gz = gzip.compress(BODY, mtime=0)
    rev = _wire_rec(STORE, "r", gz, "HTTP/1.1 304 Not Modified\r\nETag: \"e-gzip\"\r\n\r\n",
                    revisit=RevisitOf(url="http://h.test/a", fetched_at=T0 - 60))
    data, path = _write(tmp_path, [rev])
    ((rec, raw, _),) = _responses(data)
    assert rec.rec_type == "revisit" and raw == b""
    assert rec.rec_headers.get_header("WARC-Payload-Digest") == sha256_digest(_sha(gz)) != sha256_digest(_sha(BODY))
    assert _warcio_check(path).returncode == 0


def test_received_head_renames_only_the_transfer_coding() -> None:
    head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
    assert received_head(head, 12) == ("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                                       "X-Crawler-Transfer-Encoding: chunked\r\nContent-Length: 12\r\n\r\n")
    same = "HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 12\r\n\r\n"
    assert received_head(same, 12) == same
    assert received_head(same, 5).endswith("X-Crawler-Content-Length: 12\r\nContent-Length: 5\r\n\r\n")
    assert received_head(head, None) == ("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\n"
                                         "X-Crawler-Transfer-Encoding: chunked\r\n\r\n")


# ------------------------------------------------------------------ who asks for a revisit


def _parsed(url: str, wire: bytes, at: float, ex_id: str) -> ParsedPage:
    host = url.split("/")[2]
    content_hash = _sha(BODY)
    return ParsedPage(url=url, host=host, url_fp=url_fingerprint(url), depth=1,
                      fetched_at=datetime.fromtimestamp(at, UTC), http_status=200, content_type="text/html",
                      content_hash=content_hash, storage_key=f"pages/{content_hash[:2]}/{content_hash}.gz",
                      simhash=None, title="t",
                      exchange=HttpExchange(id=ex_id, ip="127.0.0.2", request_head=REQ, response_head=_head()),
                      wire_hash=_sha(wire), wire_key=None if wire == BODY else f"pages/w/{_sha(wire)}.gz")


def _archived(h: DedupHandler, page: ParsedPage) -> ArchiveRecord:
    outs = asyncio.run(h.handle(Record("t", partition_for(page.host, 8), 0, page.host, b""), page))
    (rec,) = [o.value for o in outs if o.topic == ARCHIVE]
    assert isinstance(rec, ArchiveRecord)
    return rec


def _dedup() -> tuple[DedupHandler, MemoryCrawlState]:
    state = MemoryCrawlState()
    h = DedupHandler(state, SeenSet(state, MemoryBlobStore(), capacity=1000, fp_rate=0.01), TrapConfig(),
                     partitions=8)
    asyncio.run(h.on_assign(list(range(8))))
    return h, state


def test_an_unchanged_body_is_a_revisit_only_when_its_wire_bytes_match() -> None:
    h, state = _dedup()
    gz = gzip.compress(BODY, mtime=0)
    url = "http://w.test/a"
    first = _archived(h, _parsed(url, gz, T0, "x1"))
    assert first.revisit_of is None and first.wire_hash == _sha(gz) and first.wire_key is not None
    assert state.urls[("w.test", url_fingerprint(url))].wire_hash == _sha(gz)
    same = _archived(h, _parsed(url, gz, T0 + 60, "x2"))  # same body, same gzip bytes
    assert same.revisit_of is not None and same.wire_hash == _sha(gz) and same.page is None
    plain = _archived(h, _parsed(url, BODY, T0 + 120, "x3"))  # same body, sent without a coding this time
    assert plain.revisit_of is None and plain.page is None and plain.wire_hash == _sha(BODY)
    assert state.urls[("w.test", url_fingerprint(url))].wire_hash == _sha(BODY)  # the last capture's now


def test_an_exact_duplicate_is_a_revisit_only_when_the_canonical_capture_has_its_wire_bytes() -> None:
    h, _state = _dedup()
    gz = gzip.compress(BODY, mtime=0)
    _archived(h, _parsed("http://w.test/a", gz, T0, "y1"))
    same = _archived(h, _parsed("http://w.test/b", gz, T0 + 1, "y2"))
    assert same.revisit_of is not None and same.revisit_of.url == "http://w.test/a"
    other = _archived(h, _parsed("http://w.test/c", brotli.compress(BODY), T0 + 2, "y3"))
    assert other.revisit_of is None  # the same decoded body, other bytes on the wire: a response of its own


def test_a_304_revisit_names_the_last_captures_wire_digest() -> None:
    res = FetchResult(url="http://w.test/a", host="w.test", url_fp=1, lease_id="l", outcome="not_modified",
                      status=304, started_at=T0,
                      exchange=HttpExchange(id="z", ip="127.0.0.2", request_head=REQ,
                                            response_head="HTTP/1.1 304 Not Modified\r\n\r\n"))
    coded = archive_result(res, "c" * 64, T0 - 60, "d" * 64)
    assert coded is not None and isinstance(coded.value, ArchiveRecord)
    assert (coded.value.content_hash, coded.value.wire_hash) == ("c" * 64, "d" * 64)
    older = archive_result(res, "c" * 64, T0 - 60, None)  # a row from before url_state.wire_hash
    assert older is not None and isinstance(older.value, ArchiveRecord) and older.value.wire_hash == "c" * 64
