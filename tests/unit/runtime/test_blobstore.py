"""Blob store: the stored form (gzip) is returned by store_page, so a caller can carry it elsewhere and
decode it exactly as get_page does; S3BlobStore against a fake minio client."""

from __future__ import annotations

import gzip
import hashlib
import io
from typing import Any

import pytest
from streamcrawl_runtime.memory import MemoryBlobStore
from streamcrawl_runtime.ports.blobs import StoredPage, decode_page, encode_page, page_key
from streamcrawl_runtime.ports.errors import is_transient
from streamcrawl_runtime.s3_blobs import S3BlobStore

BODY = b"<html><body>" + b"<p>words words words</p>" * 200 + b"</body></html>"


class FakeObject:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data

    def close(self) -> None: ...

    def release_conn(self) -> None: ...


class FakeMinio:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.puts = 0
        self.gets = 0

    def put_object(self, bucket: str, key: str, data: io.BytesIO, length: int, **_kw: Any) -> None:
        self.puts += 1
        raw = data.read()
        assert len(raw) == length
        self.objects[key] = raw

    def get_object(self, bucket: str, key: str) -> FakeObject:
        self.gets += 1
        return FakeObject(self.objects[key])


def test_encode_decode_round_trip_is_gzip_and_deterministic() -> None:
    data = encode_page(BODY)
    assert data[:2] == b"\x1f\x8b" and gzip.decompress(data) == BODY and decode_page(data) == BODY
    assert encode_page(BODY) == data  # mtime=0: the same body always gives the same bytes
    assert decode_page(encode_page(b"")) == b""


def _flipped(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1:]


@pytest.mark.parametrize("bad", [b"not gzip", encode_page(BODY)[:-9], encode_page(BODY)[:40],
                                 _flipped(encode_page(BODY), 30), _flipped(encode_page(BODY), -6)])
def test_corrupt_data_raises_a_non_transient_error(bad: bytes) -> None:
    with pytest.raises(Exception) as info:
        decode_page(bad)
    assert not is_transient(info.value)  # so the run loop dead-letters it after its attempts


def test_s3_store_page_returns_the_uploaded_bytes_even_when_the_upload_is_skipped() -> None:
    client = FakeMinio()
    store = S3BlobStore(client, "bucket")  # type: ignore[arg-type]
    first = store.store_page(BODY)
    digest = hashlib.sha256(BODY).hexdigest()
    assert first == StoredPage(digest, page_key(digest), True, client.objects[page_key(digest)])
    assert client.puts == 1 and decode_page(first.data) == BODY
    again = store.store_page(BODY)  # in the recent-keys cache: no second upload, same stored form
    assert again == StoredPage(digest, page_key(digest), False, first.data) and client.puts == 1
    assert store.put_page(BODY) == (digest, page_key(digest), False)
    assert store.get_page(first.key) == BODY and client.gets == 1


def test_memory_store_matches() -> None:
    store = MemoryBlobStore()
    stored = store.store_page(BODY)
    assert stored.new and store.objects[stored.key] == stored.data and store.get_page(stored.key) == BODY
    assert store.store_page(BODY) == stored._replace(new=False)
    assert store.put_page(BODY) == (stored.content_hash, stored.key, False)
