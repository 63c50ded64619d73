"""One S3 PUT from the event loop: the request minio's put_object sends for an in-memory body (signed by
streamcrawl_runtime.s3_sigv4), sent over an aiohttp connection pool instead of minio's urllib3 pool in a
worker thread. minio's per-request Python work (its header maps, signer, urllib3 and http.client) and the
thread hand-off were ~1 ms of the fetcher's CPU per stored page (docs/benchmarks-crawl.md).

Kept from minio: path-style URLs, 5 retries of a 500/502/503/504 answer or a connection error with
urllib3's back-off (0.2 s × 2^(n-1) from the second retry on), 300 s connect and read timeouts. Every
failure that is left is a TransientError (the run loop retries the message), as S3BlobStore's are.
The session is opened on first use: aiohttp binds it to the running loop."""

from __future__ import annotations

import asyncio

import aiohttp
from yarl import URL

from streamcrawl_runtime.ports.errors import TransientError
from streamcrawl_runtime.s3_sigv4 import PutSigner

RETRY_STATUSES = frozenset((500, 502, 503, 504))


def host_header(endpoint: str, secure: bool) -> str:
    """The Host header minio sends for an endpoint `host[:port]`: the scheme's default port left out."""
    host, sep, port = endpoint.rpartition(":")
    if sep and port.isdigit() and "]" not in port and int(port) == (443 if secure else 80):
        return host
    return endpoint


class AsyncS3Put:
    def __init__(self, endpoint: str, access_key: str, secret_key: str, region: str, secure: bool,
                 max_connections: int = 32, timeout_s: float = 300.0, retries: int = 5,
                 backoff_s: float = 0.2) -> None:
        self.base = ("https://" if secure else "http://") + endpoint
        self.signer = PutSigner(host_header(endpoint, secure), access_key, secret_key, region, secure)
        self.max_connections = max_connections
        self.timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        self.retries = retries
        self.backoff_s = backoff_s
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections), timeout=self.timeout,
                auto_decompress=False, skip_auto_headers=("Accept-Encoding",))
        return self._session

    async def put(self, bucket: str, key: str, data: bytes, headers: dict[str, str]) -> None:
        """PUT `data` as bucket/key with the extra `headers` (Content-Type, x-amz-meta-*)."""
        session = self._open()
        failures = 0
        while True:
            path, signed = self.signer.put_headers(bucket, key, data, headers)
            try:
                async with session.put(URL(self.base + path, encoded=True), data=data, headers=signed) as resp:
                    answer = await resp.read()
                    if resp.status < 300:
                        return
                    error = f"s3 put {key}: HTTP {resp.status} {_code(answer)}"
                    retry = resp.status in RETRY_STATUSES
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                error, retry = f"s3 put {key}: {exc!r}", True
            failures += 1
            if not retry or failures > self.retries:
                raise TransientError(error)
            if failures > 1:
                await asyncio.sleep(self.backoff_s * 2 ** (failures - 1))

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _code(answer: bytes) -> str:
    """The <Code> of an S3 error document, or ''."""
    start = answer.find(b"<Code>")
    end = answer.find(b"</Code>", start)
    return answer[start + 6:end].decode("utf-8", "replace") if start >= 0 and end > start else ""
