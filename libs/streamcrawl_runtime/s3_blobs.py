"""Page bodies in an S3-compatible store: the adapter of the `BlobStore` port
(streamcrawl_runtime.ports.blobs). It reaches MinIO, AWS S3, SeaweedFS or versitygw through the minio
client, and page bodies from the event loop through an `AsyncPut` (streamcrawl_runtime.s3_async: the
same request, signed the same way, without minio's per-request cost and a worker thread) when one is
given. Identical bodies map to one key, so they are stored once.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import threading
from collections import OrderedDict
from typing import Protocol

from minio import Minio
from minio.error import S3Error

from streamcrawl_runtime.ports.blobs import StoredPage, decode_page, encode_page, page_key
from streamcrawl_runtime.ports.errors import TransientError

#: Bodies up to this size are hashed and compressed on the event loop by `astore_page` (≲ 0.3 ms of
#: gzip); larger ones in a worker thread, so a 10 MB body does not stall the loop.
INLINE_ENCODE_MAX_BYTES = 32 * 1024

PAGE_CONTENT_TYPE = "application/gzip"


class AsyncPut(Protocol):
    async def put(self, bucket: str, key: str, data: bytes, headers: dict[str, str]) -> None: ...

    async def aclose(self) -> None: ...


def _encode(body: bytes) -> tuple[str, str, bytes]:
    digest = hashlib.sha256(body).hexdigest()
    return digest, page_key(digest), encode_page(body)


class S3BlobStore:
    def __init__(self, client: Minio, bucket: str, recent_keys: int = 100_000,
                 aput: AsyncPut | None = None) -> None:
        self.client = client
        self.bucket = bucket
        self.aput = aput
        # Keys this process stored lately, oldest first: a body seen again (mirrors, boilerplate pages)
        # skips the upload. No stat before a put: most bodies are new, so a HEAD per page would cost more
        # than re-uploading the odd duplicate that is not in this cache (a PUT of the same key is harmless).
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._recent_max = recent_keys
        self._lock = threading.Lock()  # put_page runs in worker threads

    def put_page(self, body: bytes) -> tuple[str, str, bool]:
        stored = self.store_page(body)
        return stored.content_hash, stored.key, stored.new

    def _seen(self, key: str) -> bool:
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return True
        return False

    def _remember(self, key: str) -> None:
        with self._lock:
            self._recent[key] = None
            if len(self._recent) > self._recent_max:
                self._recent.popitem(last=False)

    def store_page(self, body: bytes) -> StoredPage:
        # Compressed even when the upload is skipped below: the caller gets the stored form either way.
        digest, key, data = _encode(body)
        if self._seen(key):
            return StoredPage(digest, key, False, data)
        try:
            self.client.put_object(self.bucket, key, io.BytesIO(data), len(data),
                                   content_type=PAGE_CONTENT_TYPE, metadata={"x-amz-meta-sha256": digest})
        except TransientError:
            raise
        except S3Error as exc:
            raise TransientError(f"s3 put {key}: {exc.code}") from exc
        except OSError as exc:  # connection refused / reset: the store is down
            raise TransientError(f"s3 put {key}: {exc}") from exc
        self._remember(key)
        return StoredPage(digest, key, True, data)

    async def astore_page(self, body: bytes) -> StoredPage:
        """store_page from the event loop: the same object (key, bytes, Content-Type, metadata)."""
        if self.aput is None:
            return await asyncio.to_thread(self.store_page, body)
        if len(body) <= INLINE_ENCODE_MAX_BYTES:
            digest, key, data = _encode(body)
        else:
            digest, key, data = await asyncio.to_thread(_encode, body)
        if self._seen(key):
            return StoredPage(digest, key, False, data)
        await self.aput.put(self.bucket, key, data,
                            {"Content-Type": PAGE_CONTENT_TYPE, "x-amz-meta-sha256": digest})
        self._remember(key)
        return StoredPage(digest, key, True, data)

    async def aclose(self) -> None:
        if self.aput is not None:
            await self.aput.aclose()

    def get_page(self, key: str) -> bytes:
        data = self.get_bytes(key)
        if data is None:
            raise KeyError(key)
        return decode_page(data)

    def put_bytes(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(self.bucket, key, io.BytesIO(data), len(data))
        except (S3Error, OSError) as exc:
            raise TransientError(f"s3 put {key}: {exc}") from exc

    def put_file(self, key: str, path: str, content_type: str = "application/octet-stream") -> None:
        """Upload a local file (multipart above minio's part size, so a 1 GB WARC file streams)."""
        try:
            self.client.fput_object(self.bucket, key, path, content_type=content_type)
        except (S3Error, OSError) as exc:
            raise TransientError(f"s3 put {key}: {exc}") from exc

    def object_size(self, key: str) -> int | None:
        """The stored object's size in bytes, None if there is none (a HEAD: nothing is downloaded)."""
        try:
            return int(self.client.stat_object(self.bucket, key).size or 0)
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchObject", "NotFound", "ResourceNotFound"):
                return None
            raise TransientError(f"s3 stat {key}: {exc.code}") from exc
        except OSError as exc:
            raise TransientError(f"s3 stat {key}: {exc}") from exc

    def delete(self, key: str) -> None:
        """Remove an object (no error if it is not there)."""
        try:
            self.client.remove_object(self.bucket, key)
        except (S3Error, OSError) as exc:
            raise TransientError(f"s3 delete {key}: {exc}") from exc

    def get_bytes(self, key: str) -> bytes | None:
        try:
            resp = self.client.get_object(self.bucket, key)
        except S3Error as exc:
            if exc.code in ("NoSuchKey", "NoSuchObject", "NotFound"):
                return None
            raise TransientError(f"s3 get {key}: {exc.code}") from exc
        except OSError as exc:
            raise TransientError(f"s3 get {key}: {exc}") from exc
        try:
            return bytes(resp.read())
        finally:
            resp.close()
            resp.release_conn()
