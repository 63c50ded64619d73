"""Pages stored from the event loop (AsyncS3Put) are the objects minio's put_object stores: the same key,
bytes, Content-Type and sha256 metadata, read back through minio; a refused signature or a dead endpoint
is a TransientError. Against the real S3 server."""

from __future__ import annotations

import asyncio
import hashlib

import pytest
from streamcrawl_runtime.connect import blob_store
from streamcrawl_runtime.ports.blobs import decode_page, page_key
from streamcrawl_runtime.ports.errors import TransientError
from streamcrawl_runtime.s3_async import AsyncS3Put
from streamcrawl_runtime.s3_blobs import INLINE_ENCODE_MAX_BYTES, S3BlobStore

pytestmark = pytest.mark.integration


def _object(s3, bucket: str, key: str) -> tuple[bytes, str, str]:
    stat = s3.stat_object(bucket, key)
    resp = s3.get_object(bucket, key)
    try:
        data = bytes(resp.read())
    finally:
        resp.close()
        resp.release_conn()
    meta = {k.lower(): v for k, v in (stat.metadata or {}).items()}
    return data, str(stat.content_type), str(meta.get("x-amz-meta-sha256"))


@pytest.mark.parametrize("size", [600, INLINE_ENCODE_MAX_BYTES + 5000])
def test_astore_page_stores_what_store_page_stores(s3, stack, unique, size):
    store = blob_store(stack)
    assert store.aput is not None
    body_async = (f"<html>async {unique} " * 200).encode()[:size]
    body_sync = (f"<html>sync {unique} " * 200).encode()[:size]

    async def run():
        try:
            first = await store.astore_page(body_async)
            again = await store.astore_page(body_async)
            return first, again
        finally:
            await store.aclose()

    first, again = asyncio.run(run())
    digest = hashlib.sha256(body_async).hexdigest()
    assert (first.content_hash, first.key, first.new) == (digest, page_key(digest), True)
    assert (again.key, again.new, again.data) == (first.key, False, first.data)
    via_minio = S3BlobStore(s3, stack.s3_bucket).store_page(body_sync)
    data, ctype, meta = _object(s3, stack.s3_bucket, first.key)
    _, sctype, smeta = _object(s3, stack.s3_bucket, via_minio.key)
    assert data == first.data and decode_page(data) == body_async and store.get_page(first.key) == body_async
    assert (ctype, meta) == ("application/gzip", digest)
    assert (sctype, smeta) == ("application/gzip", via_minio.content_hash)


def test_a_wrong_secret_or_a_dead_endpoint_is_transient(stack, unique):
    bad = AsyncS3Put(stack.s3_endpoint, stack.s3_access_key, "not-the-secret", stack.s3_region, stack.s3_secure)
    dead = AsyncS3Put("127.0.0.1:9", "a", "b", stack.s3_region, False, retries=1, backoff_s=0.01)

    async def put(aput: AsyncS3Put) -> None:
        try:
            await aput.put(stack.s3_bucket, f"pages/zz/{unique}.gz", b"x", {"Content-Type": "application/gzip"})
        finally:
            await aput.aclose()

    with pytest.raises(TransientError, match="HTTP 403"):
        asyncio.run(put(bad))
    with pytest.raises(TransientError, match="s3 put"):
        asyncio.run(put(dead))
