"""WARC naming and header rules (pure): where files go in the bucket, record ids, dates, digests, the
response head as recorded, and CDXJ lines.

Layout (README "WARC files"): one writer owns a Kafka partition of the archive topic and writes its
records into files named by that partition and the offset of the file's first message, so a file's name
is fixed before its first record is written and a rebuilt file (after a crash) gets the same name:

    warc/p003/streamcrawl-p003-000000001234.warc.gz    records, each its own gzip member
    warc/p003/streamcrawl-p003-000000001234.cdxj       its index (sorted CDXJ, pywb / cdxj-indexer form)
    warc/_state/p003.json                              the partition's checkpoint: next offset, last file

Record ids are name-based UUIDs (uuid5) of the exchange id and the record's role, and WARC-Date is the
fetch's start, so writing the same fetch again yields the same bytes.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from typing import Any

WARC_PREFIX = "warc"
STATE_PREFIX = f"{WARC_PREFIX}/_state"
#: The namespace of the record-id UUIDs (uuid5 of "streamcrawl-warc").
_RECORD_NS = uuid.uuid5(uuid.NAMESPACE_URL, "streamcrawl-warc")


def file_stem(partition: int, first_offset: int, name: str = "streamcrawl") -> str:
    if partition < 0 or first_offset < 0:
        raise ValueError("partition and offset must be >= 0")
    return f"{WARC_PREFIX}/p{partition:03d}/{name}-p{partition:03d}-{first_offset:012d}"


def warc_key(partition: int, first_offset: int, name: str = "streamcrawl") -> str:
    return file_stem(partition, first_offset, name) + ".warc.gz"


def cdxj_key(partition: int, first_offset: int, name: str = "streamcrawl") -> str:
    return file_stem(partition, first_offset, name) + ".cdxj"


def state_key(partition: int) -> str:
    return f"{STATE_PREFIX}/p{partition:03d}.json"


def record_id(exchange_id: str, role: str) -> str:
    """``<urn:uuid:…>`` for the record of ``role`` (request, response, revisit, metadata) of an exchange."""
    return f"<urn:uuid:{uuid.uuid5(_RECORD_NS, f'{exchange_id}/{role}')}>"


def warc_date(epoch_s: float) -> str:
    """WARC/1.1 date with microseconds (ISO 8601, UTC)."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def cdx_timestamp(epoch_s: float) -> str:
    """The 14-digit CDX timestamp of a WARC-Date."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y%m%d%H%M%S")


def sha256_digest(sha256_hex: str) -> str:
    """A labelled WARC digest (``sha256:`` + base32) from a hex SHA-256, as warcio writes and checks it."""
    return "sha256:" + base64.b32encode(bytes.fromhex(sha256_hex)).decode("ascii")


# Header names whose value no longer describes the recorded payload once the fetcher has removed the
# transfer coding (always: `received_head`) or the content coding too (a record of a producer that did not
# keep the wire body: `recorded_head`); kept under this prefix, as Common Crawl and StormCrawler record
# them, and a Content-Length of the recorded payload is added.
CRAWLER_PREFIX = "X-Crawler-"
_CODINGS = ("content-encoding", "transfer-encoding")


def recorded_head(response_head: str, payload_length: int | None) -> str:
    """The response head as recorded in front of a decoded payload (the fallback for records whose wire
    body is not known: `ArchiveRecord.wire_hash` None).

    Content-Encoding and Transfer-Encoding become ``X-Crawler-…``. With a payload (``payload_length``
    not None), when one of them was present or the received Content-Length differs from the payload's,
    Content-Length does too and the payload's own Content-Length is appended. Without one (a revisit,
    whose payload is the earlier capture's, recorded decoded as well) Content-Length is kept: a reader
    must not try to decode an encoding the recorded payload no longer has."""
    return _rewrite_head(response_head, payload_length, _CODINGS, length_follows_codings=True)


def received_head(response_head: str, payload_length: int | None) -> str:
    """The response head as recorded in front of the entity body as transferred (Content-Encoding kept):
    the status line and headers as received, but for the transfer coding, which the transport removed
    (Transfer-Encoding becomes ``X-Crawler-Transfer-Encoding``), and, with a payload, a Content-Length
    that is not the payload's (or none) becoming ``X-Crawler-Content-Length`` with the payload's own
    appended. Without a payload (a revisit) only Transfer-Encoding is renamed."""
    return _rewrite_head(response_head, payload_length, ("transfer-encoding",), length_follows_codings=False)


def _rewrite_head(response_head: str, payload_length: int | None, renamed: tuple[str, ...],
                  length_follows_codings: bool) -> str:
    """The head with the ``renamed`` headers under CRAWLER_PREFIX; with a payload, a Content-Length that is
    not the payload's (or any, once a renamed header was present, with ``length_follows_codings``) renamed
    too and the payload's own appended."""
    lines = response_head.split("\r\n")
    while lines and lines[-1] == "":
        lines.pop()
    if not lines:
        return "\r\n\r\n"
    status, fields = lines[0], lines[1:]

    def name(f: str) -> str:
        return f.split(":", 1)[0].strip().lower()

    lengths = [f.split(":", 1)[1].strip() for f in fields if name(f) == "content-length"]
    rename_length = payload_length is not None and (
        (length_follows_codings and any(name(f) in renamed for f in fields))
        or any(v != str(payload_length) for v in lengths))
    out = [status]
    for f in fields:
        moved = name(f) in renamed or (rename_length and name(f) == "content-length")
        out.append(CRAWLER_PREFIX + f if moved else f)
    if payload_length is not None and (rename_length or not lengths):
        out.append(f"Content-Length: {payload_length}")
    return "\r\n".join(out) + "\r\n\r\n"


def status_of(response_head: str) -> int | None:
    parts = response_head.split("\r\n", 1)[0].split(" ", 2)
    try:
        return int(parts[1])
    except (IndexError, ValueError):
        return None


def mime_of(response_head: str) -> str | None:
    """The media type of the Content-Type header (what cdxj-indexer puts in ``mime``), None without one."""
    for line in response_head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-type":
            media = value.strip().split(";", 1)[0].strip()
            return media.split()[0] if media else None
    return None


def cdxj_line(urlkey: str, epoch_s: float, fields: dict[str, Any]) -> str:
    """One CDXJ line: ``urlkey timestamp {json}`` (the json in cdxj-indexer's key order and spacing)."""
    return f"{urlkey} {cdx_timestamp(epoch_s)} {json.dumps(fields)}"
