"""The blob-store port: page bodies gzip-compressed and keyed by content hash, and their stored form
(the page codec). Driver-free; `streamcrawl_runtime.s3_blobs` is the S3 adapter and
`streamcrawl_runtime.memory` the in-memory one. `encode_page`/`decode_page` are also the form of a body
carried inline in a FetchResult (`body_gz`), so the parser decodes it exactly as `get_page` would."""

from __future__ import annotations

import gzip
from typing import NamedTuple, Protocol


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

    async def astore_page(self, body: bytes) -> StoredPage:
        """store_page from the event loop (the same object stored; no blocking call on the loop)."""
        ...

    def get_page(self, key: str) -> bytes:
        """The decompressed body; KeyError if absent."""
        ...

    def put_bytes(self, key: str, data: bytes) -> None: ...

    def get_bytes(self, key: str) -> bytes | None: ...
