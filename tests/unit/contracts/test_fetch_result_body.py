"""FetchResult.body_gz: bytes in Python, base64 in the JSON that travels on Kafka; optional, and small
enough at the fetcher's cap (and at the ceiling the settings accept) for Kafka's default 1 MB limit."""

from __future__ import annotations

import base64
import json
import os
import time

import pytest
from pydantic import ValidationError
from streamcrawl_contracts.messages import MAX_URL_CHARS, FetchResult
from streamcrawl_fetcher.settings import DEFAULT_INLINE_BODY_MAX_BYTES, INLINE_BODY_LIMIT
from streamcrawl_runtime.kafka_output import dead_letter
from streamcrawl_runtime.ports.blobs import decode_page, encode_page
from streamcrawl_runtime.ports.loop import Record

#: librdkafka's default message.max.bytes (the producer refuses larger records); brokers default to 1 MiB.
KAFKA_MAX_MESSAGE = 1_000_000


def _result(body_gz: bytes | None, **kw: object) -> FetchResult:
    fields: dict[str, object] = {"url": "http://site.test/p", "outcome": "fetched", "status": 200,
                                 "content_type": "text/html", "content_hash": "ab" * 32,
                                 "storage_key": f"pages/ab/{'ab' * 32}.gz", **kw}
    return FetchResult(host="site.test", url_fp=7, lease_id="L", started_at=time.time(), body_gz=body_gz,
                       **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 255, 1000, 65_537])
def test_bytes_round_trip_through_json(size: int) -> None:
    data = os.urandom(size)
    msg = _result(data)
    raw = msg.model_dump_json()
    back = FetchResult.model_validate_json(raw)
    assert back.body_gz == data and back == msg
    encoded = json.loads(raw)["body_gz"]
    assert isinstance(encoded, str) and base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)) == data


def test_every_byte_value_and_a_real_gzip_body_round_trip() -> None:
    everything = bytes(range(256)) * 3
    assert FetchResult.model_validate_json(_result(everything).model_dump_json()).body_gz == everything
    body = b"<html><body>" + "é ü 中文 \x00 \"quoted\" \\ ".encode() * 200 + b"</body></html>"
    back = FetchResult.model_validate_json(_result(encode_page(body)).model_dump_json().encode())
    assert back.body_gz is not None and decode_page(back.body_gz) == body


def test_standard_base64_alphabet_is_accepted_too() -> None:
    data = bytes([0xfb, 0xff, 0xfe]) * 10  # encodes to '+' and '/' in the standard alphabet, '-' '_' url-safe
    doc = json.loads(_result(None).model_dump_json())
    doc["body_gz"] = base64.b64encode(data).decode()
    assert "+" in doc["body_gz"] or "/" in doc["body_gz"]
    assert FetchResult.model_validate_json(json.dumps(doc)).body_gz == data


def test_field_is_optional_and_absent_means_none() -> None:
    doc = json.loads(_result(None).model_dump_json())
    assert doc["body_gz"] is None
    del doc["body_gz"]  # a result from a fetcher that predates the field
    msg = FetchResult.model_validate_json(json.dumps(doc))
    assert msg.body_gz is None and msg.schema_version == FetchResult.SCHEMA_VERSION == 1
    # ...and a consumer that predates it ignores it (extra="ignore")
    assert FetchResult.model_config["extra"] == "ignore"


def test_invalid_base64_is_undecodable() -> None:
    doc = json.loads(_result(None).model_dump_json())
    doc["body_gz"] = "not base64 at all!"
    with pytest.raises(ValidationError):  # the run loop dead-letters undecodable records
        FetchResult.model_validate_json(json.dumps(doc))


def test_body_is_left_out_of_repr() -> None:
    assert "body_gz" not in repr(_result(b"x" * 1000))


@pytest.mark.parametrize("cap", [DEFAULT_INLINE_BODY_MAX_BYTES, INLINE_BODY_LIMIT])
def test_worst_case_message_fits_kafka_default_limit(cap: int) -> None:
    """A body exactly at the cap (incompressible) with long text fields everywhere: the record, and the
    dead letter that would carry it base64-encoded again, stay under the default 1 MB."""
    long = "x" * 8192
    url = "http://site.test/" + "x" * (MAX_URL_CHARS - len("http://site.test/"))  # the longest URL a message may carry
    msg = _result(os.urandom(cap), url=url, error=long[:300], etag=long, last_modified=long,
                  x_robots_tag=long, content_type="text/html; " + long)
    raw = msg.model_dump_json().encode()
    assert len(raw) < cap * 4 / 3 + 60_000 + MAX_URL_CHARS
    assert len(raw) < 0.7 * KAFKA_MAX_MESSAGE  # with an 80 KiB URL
    assert FetchResult.model_validate_json(raw) == msg
    # its dead letter carries at most DEAD_LETTER_PAYLOAD_BYTES of it (the run loop's rule)
    rec = Record("streamcrawl.fetch_results", 7, 1 << 40, "site.test", raw)
    dead = dead_letter("parser", rec, "r" * 1000, OSError("BadGzipFile")).value
    assert len(dead.model_dump_json().encode()) < 0.2 * KAFKA_MAX_MESSAGE
