"""One fetch as WARC/1.1 records, with warcio: request, response (or revisit) and metadata, each its own
gzip member, appended to an open file; and the CDXJ line of the response or revisit record.

Digests are SHA-256 (``sha256:`` + base32), so a revisit of a 304 can name the payload digest of the
earlier capture from the hash the crawler already keeps (url_state.wire_hash), without reading the body
again.

The response record holds the body as received (WARC 1.1): the entity body with its Content-Encoding, the
transfer coding removed (the transport de-chunks; Transfer-Encoding is kept as X-Crawler-Transfer-Encoding
and the payload's Content-Length added), and WARC-Payload-Digest is over those bytes. A record whose
producer did not keep the wire body (``wire_hash`` None: an older fetcher) is recorded decoded as before,
its codings under X-Crawler- headers.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import BinaryIO

import surt
from streamcrawl_contracts.messages import ArchiveRecord
from streamcrawl_core.warc_layout import (
    cdxj_line,
    mime_of,
    received_head,
    record_id,
    recorded_head,
    sha256_digest,
    status_of,
    warc_date,
)
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.utils import Digester
from warcio.warcwriter import WARCWriter

SOFTWARE = "streamcrawl/0.1 (warcio)"


class _Sha256Writer(WARCWriter):  # type: ignore[misc]
    """warcio's writer with SHA-256 block and payload digests (its default is SHA-1)."""

    @staticmethod
    def _create_digester() -> Digester:
        return Digester("sha256")


@dataclass(frozen=True)
class Written:
    """Where the fetch's main record (response or revisit) is, and its CDXJ line (without the filename)."""

    offset: int
    length: int
    urlkey: str
    fields: dict[str, str]
    fetched_at: float


def _head(text: str, request: bool = False) -> StatusAndHeaders:
    parsed = StatusAndHeadersParser([], verify=False).parse(io.BytesIO(text.encode("latin-1")))
    if request:
        parsed.is_http_request = True
    return parsed


class FileWriter:
    """Appends records to one open WARC file (``out`` positioned at its end)."""

    def __init__(self, out: BinaryIO, filename: str) -> None:
        self.out = out
        self.filename = filename  # the base name, as cdxj-indexer writes it in `filename`
        self.writer = _Sha256Writer(out, gzip=True, warc_version="1.1")

    def _write(self, record: ArcWarcRecord) -> tuple[int, int]:
        start = self.out.tell()
        self.writer.write_record(record)
        return start, self.out.tell() - start

    def warcinfo(self, epoch_s: float, stem: str) -> None:
        """The file's first record: who wrote it and in what format (dated by its first fetch)."""
        body = f"software: {SOFTWARE}\r\nformat: WARC File Format 1.1\r\n".encode()
        rec = self.writer.create_warc_record(
            "", "warcinfo", payload=io.BytesIO(body), length=len(body),
            warc_content_type="application/warc-fields",
            warc_headers_dict={"WARC-Record-ID": record_id(stem, "warcinfo"), "WARC-Date": warc_date(epoch_s),
                               "WARC-Filename": self.filename})
        rec.rec_headers.remove_header("WARC-Target-URI")
        self._write(rec)

    def fetch(self, rec: ArchiveRecord, body: bytes | None) -> Written:
        """request, then response (``body``: as received when ``rec.wire_hash`` is set, else decoded; None =
        not stored) or revisit, then metadata."""
        ex = rec.exchange
        date = warc_date(rec.fetched_at)
        main_role = "revisit" if rec.revisit_of is not None else "response"
        main_id = record_id(ex.id, main_role)
        common = {"WARC-Date": date, "WARC-IP-Address": ex.ip}
        wire = rec.wire_hash is not None  # the payload is the body as received
        if rec.revisit_of is not None:
            named = rec.wire_hash or rec.content_hash
            if not named:
                raise ValueError("a revisit needs the payload's digest")
            refers = rec.revisit_of
            main = self.writer.create_revisit_record(
                rec.url, sha256_digest(named), refers.url,
                warc_date(refers.fetched_at) if refers.fetched_at else None,
                http_headers=_head((received_head if wire else recorded_head)(ex.response_head, None)),
                warc_headers_dict={"WARC-Record-ID": main_id, **common})
            if refers.fetched_at is None:  # an exact duplicate of another URL whose capture date is not known
                main.rec_headers.remove_header("WARC-Refers-To-Date")
        else:
            payload = body if body is not None else b""
            headers = {"WARC-Record-ID": main_id, **common}
            if body is None:  # the fetcher stores no body of redirects, errors and soft 404s
                headers["WARC-Truncated"] = "unspecified"
            elif rec.truncated:
                headers["WARC-Truncated"] = "length"
            head = (received_head if wire and body is not None else recorded_head)(ex.response_head, len(payload))
            main = self.writer.create_warc_record(
                rec.url, "response", payload=io.BytesIO(payload), length=len(payload),
                http_headers=_head(head), warc_headers_dict=headers)
        request = self.writer.create_warc_record(
            rec.url, "request", payload=io.BytesIO(b""), length=0, http_headers=_head(ex.request_head, True),
            warc_headers_dict={"WARC-Record-ID": record_id(ex.id, "request"), **common,
                               "WARC-Concurrent-To": main_id})
        self._write(request)
        offset, length = self._write(main)
        lines = [f"fetchTimeMs: {round(rec.fetch_s * 1000)}", f"outcome: {rec.outcome}"]
        lines += [f"outlink: {link}" for link in rec.out_links]
        meta_body = ("\r\n".join(lines) + "\r\n").encode("utf-8")
        meta = self.writer.create_warc_record(
            rec.url, "metadata", payload=io.BytesIO(meta_body), length=len(meta_body),
            warc_content_type="application/warc-fields",
            warc_headers_dict={"WARC-Record-ID": record_id(ex.id, "metadata"), "WARC-Date": date,
                               "WARC-Concurrent-To": main_id})
        self._write(meta)
        fields: dict[str, str] = {"url": rec.url}
        mime = "warc/revisit" if rec.revisit_of is not None else mime_of(ex.response_head)
        if mime:
            fields["mime"] = mime
        status = status_of(ex.response_head)
        if status is not None:
            fields["status"] = str(status)
        fields["digest"] = str(main.rec_headers.get_header("WARC-Payload-Digest"))
        fields.update(length=str(length), offset=str(offset), filename=self.filename)
        return Written(offset, length, urlkey(rec.url), fields, rec.fetched_at)


def urlkey(url: str) -> str:
    """The SURT sort key, as cdxj-indexer computes it."""
    try:
        return str(surt.surt(url))
    except Exception:  # cdxj-indexer falls back to the URL itself, so do we
        return url


def cdxj_lines(written: list[Written]) -> str:
    """The file's index, sorted (pywb binary-searches it)."""
    return "".join(sorted(cdxj_line(w.urlkey, w.fetched_at, w.fields) + "\n" for w in written))
