"""Page bodies in memory: the in-memory adapter of the `BlobStore` port."""

from __future__ import annotations

import hashlib

from streamcrawl_runtime.ports.blobs import StoredPage, decode_page, encode_page, page_key


class MemoryBlobStore:
    """In-memory BlobStore (same keys and compression as the S3 adapter)."""

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

    async def astore_page(self, body: bytes) -> StoredPage:
        return self.store_page(body)

    def get_page(self, key: str) -> bytes:
        return decode_page(self.objects[key])

    def put_bytes(self, key: str, data: bytes) -> None:
        self.objects[key] = data

    def get_bytes(self, key: str) -> bytes | None:
        return self.objects.get(key)

    def object_size(self, key: str) -> int | None:
        data = self.objects.get(key)
        return None if data is None else len(data)

    def delete(self, key: str) -> None:
        self.objects.pop(key, None)

    def put_file(self, key: str, path: str, content_type: str = "application/octet-stream") -> None:
        with open(path, "rb") as fh:
            self.objects[key] = fh.read()
