"""Page bodies in an S3-compatible store: the adapter of the `BlobStore` port
(streamcrawl_runtime.ports.blobs). It reaches MinIO, AWS S3, SeaweedFS or versitygw through the minio
client. Identical bodies map to one key, so they are stored once.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict

from minio import Minio
from minio.error import S3Error

from streamcrawl_runtime.ports.blobs import StoredPage, decode_page, encode_page, page_key
from streamcrawl_runtime.ports.errors import TransientError


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
