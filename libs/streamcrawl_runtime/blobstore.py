"""Page bodies in an S3-compatible store, gzip-compressed and keyed by content hash.

`BlobStore` is the port; `S3BlobStore` reaches MinIO, AWS S3, SeaweedFS or versitygw through the minio
client, and `MemoryBlobStore` serves unit tests. Identical bodies map to one key, so they are stored once.
`encode_page`/`decode_page` are the stored form (gzip), also used for a body carried inline in a
FetchResult (`body_gz`), so that the parser decodes it exactly as `get_page` would.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import threading
from collections import OrderedDict
from typing import NamedTuple, Protocol

from minio import Minio
from minio.error import S3Error

from streamcrawl_runtime.errors import TransientError


def page_key(content_hash: str) -> str:
    """pages/ab/abcdef….gz — a two-character fan-out keeps directory-backed stores fast."""
    return f"pages/{content_hash[:2]}/{content_hash}.gz"


def encode_page(body: bytes) -> bytes:
    """A page body in its stored form: gzip, deterministic (mtime=0)."""
    return gzip.compress(body, compresslevel=6, mtime=0)


def decode_page(data: bytes) -> bytes:
    """The body from its stored form. Corrupt data raises what gzip raises (BadGzipFile, EOFError,
    zlib.error): not transient, so the run loop dead-letters the message after its attempts."""
    return gzip.decompress(data)


class StoredPage(NamedTuple):
    content_hash: str  # sha256 hex of the body
    key: str  # storage key
    new: bool  # this call uploaded it (False: this process stored it lately)
    data: bytes  # the stored form, encode_page(body): what get_page decodes


class BlobStore(Protocol):
    def put_page(self, body: bytes) -> tuple[str, str, bool]:
        """Store a body; returns (sha256 hex, storage key, newly_stored)."""
        ...

    def store_page(self, body: bytes) -> StoredPage:
        """Store a body like put_page, and also return its stored form."""
        ...

    def get_page(self, key: str) -> bytes:
        """The decompressed body; KeyError if absent."""
        ...

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def get_bytes(self, key: str) -> bytes | None: ...


class S3BlobStore:
    def __init__(self, client: Minio, bucket: str, recent_keys: int = 100_000) -> None:
        self.client = client
        self.bucket = bucket
        # Keys this process stored lately, oldest first: a body seen again (mirrors, boilerplate pages)
        # skips the upload. No stat before a put: most bodies are new, so a HEAD per page would cost more
        # than re-uploading the odd duplicate that is not in this cache (a PUT of the same key is harmless).
        self._recent: OrderedDict[str, None] = OrderedDict()
        self._recent_max = recent_keys
        self._lock = threading.Lock()  # put_page runs in worker threads

    def put_page(self, body: bytes) -> tuple[str, str, bool]:
        stored = self.store_page(body)
        return stored.content_hash, stored.key, stored.new

    def store_page(self, body: bytes) -> StoredPage:
        digest = hashlib.sha256(body).hexdigest()
        key = page_key(digest)
        # Compressed even when the upload is skipped below: the caller gets the stored form either way.
        data = encode_page(body)
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return StoredPage(digest, key, False, data)
        try:
            self.client.put_object(self.bucket, key, io.BytesIO(data), len(data),
                                   content_type="application/gzip", metadata={"x-amz-meta-sha256": digest})
        except TransientError:
            raise
        except S3Error as exc:
            raise TransientError(f"s3 put {key}: {exc.code}") from exc
        except OSError as exc:  # connection refused / reset: the store is down
            raise TransientError(f"s3 put {key}: {exc}") from exc
        with self._lock:
            self._recent[key] = None
            if len(self._recent) > self._recent_max:
                self._recent.popitem(last=False)
        return StoredPage(digest, key, True, data)

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


class MemoryBlobStore:
    """In-memory BlobStore for unit tests (same keys and compression as S3BlobStore)."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}

    def put_page(self, body: bytes) -> tuple[str, str, bool]:
        stored = self.store_page(body)
        return stored.content_hash, stored.key, stored.new

    def store_page(self, body: bytes) -> StoredPage:
        digest = hashlib.sha256(body).hexdigest()
        key = page_key(digest)
        data = encode_page(body)
        if key in self.objects:
            return StoredPage(digest, key, False, data)
        self.objects[key] = data
        return StoredPage(digest, key, True, data)

    def get_page(self, key: str) -> bytes:
        return decode_page(self.objects[key])

    def put_bytes(self, key: str, data: bytes) -> None:
        self.objects[key] = data

    def get_bytes(self, key: str) -> bytes | None:
        return self.objects.get(key)
