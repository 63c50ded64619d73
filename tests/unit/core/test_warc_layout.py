"""WARC naming and header rules."""

from __future__ import annotations

import base64
import hashlib

import pytest
from streamcrawl_core.warc_layout import (
    cdx_timestamp,
    cdxj_key,
    mime_of,
    record_id,
    recorded_head,
    sha256_digest,
    state_key,
    status_of,
    warc_date,
    warc_key,
)


def test_names_follow_partition_and_first_offset() -> None:
    assert warc_key(3, 1234) == "warc/p003/streamcrawl-p003-000000001234.warc.gz"
    assert cdxj_key(3, 1234, "crawl-a") == "warc/p003/crawl-a-p003-000000001234.cdxj"
    assert state_key(12) == "warc/_state/p012.json"
    with pytest.raises(ValueError):
        warc_key(-1, 0)


def test_record_ids_are_stable_per_exchange_and_role() -> None:
    assert record_id("ab", "response") == record_id("ab", "response")
    assert len({record_id("ab", r) for r in ("request", "response", "metadata")}) == 3
    assert record_id("ab", "response").startswith("<urn:uuid:") and record_id("ab", "response").endswith(">")


def test_dates_and_digests() -> None:
    assert warc_date(1700000000.25) == "2023-11-14T22:13:20.250000Z"
    assert cdx_timestamp(1700000000.99) == "20231114221320"
    h = hashlib.sha256(b"x").hexdigest()
    assert sha256_digest(h) == "sha256:" + base64.b32encode(hashlib.sha256(b"x").digest()).decode()


def test_decoded_payload_keeps_the_received_codings_under_x_crawler() -> None:
    head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n"
    out = recorded_head(head, 120).split("\r\n")
    assert out[:4] == ["HTTP/1.1 200 OK", "X-Crawler-Content-Encoding: gzip", "X-Crawler-Transfer-Encoding: chunked",
                       "X-Crawler-Content-Length: 9"]
    assert out[4] == "Content-Length: 120" and out[-2:] == ["", ""]


def test_plain_response_head_is_kept_as_received() -> None:
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n\r\n"
    assert recorded_head(head, 5) == head
    # no payload follows (a revisit): its length is kept, its codings are renamed like a response's
    gz = "HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 7\r\n\r\n"
    assert recorded_head(gz, None) == "HTTP/1.1 200 OK\r\nX-Crawler-Content-Encoding: br\r\nContent-Length: 7\r\n\r\n"
    assert recorded_head(head, None) == head
    # a length that does not match what is recorded (a truncated body) is replaced
    assert "X-Crawler-Content-Length: 5" in recorded_head(head, 3) and "Content-Length: 3" in recorded_head(head, 3)
    assert recorded_head("HTTP/1.0 200 OK\r\n\r\n", 4).endswith("Content-Length: 4\r\n\r\n")


def test_status_and_mime() -> None:
    assert status_of("HTTP/1.1 404 Not Found\r\n\r\n") == 404 and status_of("garbage") is None
    assert mime_of("HTTP/1.1 200 OK\r\ncontent-type: Text/HTML; charset=utf-8\r\n\r\n") == "Text/HTML"
    assert mime_of("HTTP/1.1 200 OK\r\n\r\n") is None
