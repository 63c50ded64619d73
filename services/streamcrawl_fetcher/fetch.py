"""The HTTP side of the fetcher: one GET through our own DNS, with a body cap and a wall-clock limit.

The URL's host is resolved by `Resolver` (cache, negative cache, allow-list) and the request goes to the
IP; the Host header (and, for https, the TLS SNI name) stays the original host, so name-based virtual
hosting works and no second, uncontrolled lookup happens in the HTTP client. Redirects are never followed
here for pages (each hop goes back through normalization and dedup); `fetch_robots` follows a few.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpx
import yarl
from httpx._decoders import IdentityDecoder  # the decoder aiter_bytes would use (see _read_capped)
from streamcrawl_core.urls import UrlError, normalize

from streamcrawl_fetcher.dns import Resolver
from streamcrawl_fetcher.ports import AddressNotAllowed, DnsError, HttpResponse, NetworkError

__all__ = ["AddressNotAllowed", "AiohttpTransport", "DnsError", "HttpFetcher", "HttpResponse", "NetworkError",
           "make_client"]


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx requests and responses over one aiohttp connection pool.

    Why: with httpcore underneath, httpx/httpcore (anyio cancel scopes, h11, the pool) took about half of
    the fetcher's CPU; aiohttp's C parser and dict-keyed pool cost a fraction of that per request
    (bench/fetch_cost.py, docs/benchmarks-fetch.md). The fetcher still speaks httpx: requests,
    headers, timeouts (the request's "timeout" extension), SNI ("sni_hostname") and decoding (httpx's
    decoders, on the raw bytes: the body cap stays on the decoded body) are httpx's.

    What is pinned here, because aiohttp would otherwise differ from the httpcore transport:
    no cookie jar (cookies never travel from one host to another), no proxies from the environment,
    no automatic decompression, no redirects, no silent resend of a GET on a broken keep-alive
    connection (one lease = one request), and response heads up to h11's size. Every aiohttp error comes
    out as the httpx exception httpcore raised in the same situation, so `HttpFetcher.get` maps errors as
    before. aiohttp adds an Accept, Accept-Encoding or User-Agent header only when the request has none;
    HttpFetcher always sets all three, so the request head on the wire is the one HttpFetcher builds.

    Connections are pooled per (address, port, TLS, SNI name) with keep-alive; an idle one closes after
    `keepalive_expiry_s` (their number has no cap); `max_connections` caps the connections in use. The
    session is opened on first use: aiohttp binds it to the running loop. Request bodies must be in memory
    (the fetcher only sends GETs).
    """

    def __init__(self, max_connections: int, verify_tls: bool = True, keepalive_expiry_s: float = 15.0) -> None:
        self.max_connections = max_connections
        self.keepalive_expiry_s = keepalive_expiry_s
        self.ssl_context = httpx.create_ssl_context(verify=verify_tls)
        self._session: aiohttp.ClientSession | None = None
        self._timeouts: dict[tuple[float | None, float | None, float | None], aiohttp.ClientTimeout] = {}

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0, ssl=self.ssl_context,
                                         keepalive_timeout=self.keepalive_expiry_s, use_dns_cache=False)
        session = aiohttp.ClientSession(
            connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trust_env=False, auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None),
            # h11 (under httpcore) took a response head of up to 100 KiB with no per-line or count limit;
            # aiohttp's defaults (8 KiB per line, 128 fields) would refuse some real sites' heads.
            max_line_size=_MAX_HEAD_BYTES, max_field_size=_MAX_HEAD_BYTES, max_headers=_MAX_HEADER_FIELDS)
        # aiohttp resends an idempotent request once when the connection breaks under it; httpcore with
        # retries=0 did not, and a second request to the host would not be paid for by a lease.
        session._retry_connection = False
        self._session = session
        return session

    def _timeout(self, connect: float | None, read: float | None, pool: float | None) -> aiohttp.ClientTimeout:
        key = (connect, read, pool)
        timeout = self._timeouts.get(key)
        if timeout is None:
            # aiohttp's `connect` covers waiting for a pool slot and connecting; httpx splits the two.
            total_connect = None if connect is None or pool is None else connect + pool
            timeout = self._timeouts[key] = aiohttp.ClientTimeout(total=None, connect=total_connect,
                                                                  sock_connect=connect, sock_read=read)
        return timeout

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session or self._open()
        t = request.extensions.get("timeout", {})
        try:
            response = await session.request(
                request.method, yarl.URL(str(request.url), encoded=True), headers=request.headers.multi_items(),
                data=request.content or None, allow_redirects=False,
                timeout=self._timeout(t.get("connect"), t.get("read"), t.get("pool")),
                server_hostname=request.extensions.get("sni_hostname"))
        except (*_AIOHTTP_ERRORS, ValueError) as exc:  # ValueError: a header value aiohttp will not send
            raise _httpx_error(exc, request) from exc
        reason = (response.reason or "").encode("utf-8", "replace")
        ver = response.version
        version = f"HTTP/{ver.major}.{ver.minor}".encode() if ver else b"HTTP/1.1"
        return httpx.Response(response.status, headers=response.raw_headers, stream=_AiohttpBody(response, request),
                              request=request, extensions={"http_version": version, "reason_phrase": reason})

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


_MAX_HEAD_BYTES = 100 * 1024
_MAX_HEADER_FIELDS = 1024
# HttpProcessingError: a malformed response; TimeoutError: a timer of aiohttp's own (the total limit of
# HttpFetcher.get is outside the transport, and reaches it as a cancellation, never as TimeoutError).
_AIOHTTP_ERRORS = (aiohttp.ClientError, aiohttp.http_exceptions.HttpProcessingError, TimeoutError)


class _AiohttpBody(httpx.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self.response = response
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.response.content.iter_any():
                yield chunk
        except _AIOHTTP_ERRORS as exc:
            raise _httpx_error(exc, self.request, reading=True) from exc

    async def aclose(self) -> None:
        # Back to the pool when the body was read to its end, closed otherwise (as httpcore does).
        self.response.release()


def _httpx_error(exc: BaseException, request: httpx.Request, reading: bool = False) -> httpx.TransportError:
    """The httpx exception httpcore raised in the same situation (HttpFetcher.get maps those)."""
    message = str(exc) or type(exc).__name__
    error: type[httpx.TransportError]
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        error = httpx.ConnectTimeout
    elif isinstance(exc, aiohttp.SocketTimeoutError):
        error = httpx.ReadTimeout
    elif isinstance(exc, (aiohttp.ServerTimeoutError, TimeoutError)):
        error = httpx.ReadTimeout if reading else httpx.ConnectTimeout
    elif isinstance(exc, (aiohttp.ClientConnectorError, aiohttp.ClientSSLError, aiohttp.ServerFingerprintMismatch)):
        error = httpx.ConnectError
    elif isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError, aiohttp.ClientResponseError,
                          aiohttp.http_exceptions.HttpProcessingError)):
        error = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.InvalidURL):
        error = httpx.UnsupportedProtocol
    elif isinstance(exc, ValueError):  # a CR/LF in a header value, refused as h11 refused it
        error = httpx.LocalProtocolError
    else:  # ClientOSError (a reset, a broken pipe) and the rest
        error = httpx.ReadError
    return error(message, request=request)


def make_client(max_connections: int, verify_tls: bool = True) -> httpx.AsyncBaseTransport:
    """The connection pool. We drive the transport directly, not an AsyncClient: the client parses every
    Location header (raising on a malformed one and losing the response) even when not following."""
    return AiohttpTransport(max_connections, verify_tls)


class HttpFetcher:
    def __init__(self, client: httpx.AsyncBaseTransport, resolver: Resolver, user_agent: str,
                 connect_timeout_s: float = 5.0, read_timeout_s: float = 30.0,
                 total_timeout_s: float = 120.0) -> None:
        self.client = client
        self.timeouts = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s, write=read_timeout_s,
                                      pool=read_timeout_s).as_dict()
        self.resolver = resolver
        self.user_agent = user_agent
        self.total_timeout_s = total_timeout_s

    async def aclose(self) -> None:
        await self.client.aclose()

    async def get(self, url: str, max_bytes: int, headers: dict[str, str] | None = None) -> HttpResponse:
        """GET `url`, reading at most `max_bytes` of the (decoded) body.

        Raises DnsError, AddressNotAllowed, NetworkError, or UrlError for a URL httpx cannot use.
        """
        try:
            target = httpx.URL(url)
        except (httpx.InvalidURL, ValueError) as exc:
            raise UrlError("malformed", str(exc)[:200]) from exc
        if target.scheme not in ("http", "https") or not target.host:
            raise UrlError("scheme", "need an absolute http(s) URL")
        host = target.raw_host.decode("ascii")  # .host would be the Unicode (IDN-decoded) spelling
        ip = await self.resolver.resolve(host)
        host_header = f"[{host}]" if ":" in host else host
        if target.port is not None:
            host_header = f"{host_header}:{target.port}"
        req_headers = {
            "Host": host_header,
            "User-Agent": self.user_agent,
            "Accept": "text/html,application/xhtml+xml,*/*;q=0.8",
            "Accept-Encoding": "gzip, br",
            **(headers or {}),
        }
        extensions: dict[str, Any] = {"timeout": self.timeouts}
        if target.scheme == "https":
            extensions["sni_hostname"] = host
            # Kept from the httpcore pool, which was keyed by IP:port only and could have reused a TLS
            # connection for another virtual host (wrong SNI/certificate). aiohttp's pool key includes the
            # SNI name, so this could go; polite crawling rarely reuses a connection anyway.
            req_headers["Connection"] = "close"
        request = httpx.Request("GET", target.copy_with(host=ip), headers=req_headers, extensions=extensions)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.total_timeout_s):
                response = await self.client.handle_async_request(request)
                try:
                    body, wire, truncated = await _read_capped(response, max_bytes)
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            raise NetworkError(f"timeout after {self.total_timeout_s:.0f}s total") from exc
        except httpx.TimeoutException as exc:
            raise NetworkError(f"{type(exc).__name__}: {exc}"[:300]) from exc
        except (httpx.HTTPError, httpx.StreamError, OSError) as exc:
            raise NetworkError(f"{type(exc).__name__}: {exc}"[:300]) from exc
        return HttpResponse(response.status_code, response.headers, body, truncated, time.perf_counter() - t0,
                            ip=ip, request_head=_request_head(request), response_head=_response_head(response),
                            wire=wire)

    async def fetch_robots(self, url: str, max_bytes: int, max_redirects: int,
                           hop_delay: Callable[[float], float] = lambda _s: 0.0,
                           hops: list[tuple[str, float, HttpResponse]] | None = None,
                           ) -> tuple[int | None, bytes | None]:
        """Final (status, body) of a robots.txt fetch, following up to `max_redirects` redirects;
        (None, None) when the host is unreachable. A 3xx left after the last hop, or one that loops back to
        a URL of the chain, is returned as is (no body).
        Each hop is a request to the host like any other: `hop_delay(previous hop seconds)` is waited
        before the next one (the politeness delay), so a redirect chain is not a burst. Every answered hop
        is appended to `hops` as (URL, start time, response) when given: the WARC writer archives each."""
        current = url
        visited = {url}
        previous_s: float | None = None
        for _hop in range(max_redirects + 1):
            if previous_s is not None:
                await asyncio.sleep(hop_delay(previous_s))
            sent_at = time.time()
            try:
                # One byte over the cap lets the robots parser see that the file was cut.
                resp = await self.get(current, max_bytes + 1)
            except (DnsError, AddressNotAllowed, NetworkError, UrlError):
                return None, None
            previous_s = resp.elapsed_s
            if hops is not None:
                hops.append((current, sent_at, resp))
            location = resp.headers.get("location")
            if 300 <= resp.status <= 399 and location:
                try:
                    current = normalize(location, base=current)
                except UrlError:
                    return resp.status, None
                if current in visited:  # a loop: no request repeats, the 3xx is the answer
                    return resp.status, None
                visited.add(current)
                continue
            return resp.status, resp.body
        return resp.status, None


def _request_head(request: httpx.Request) -> str:
    """The request line and headers as HttpFetcher sends them (see AiohttpTransport: aiohttp adds none)."""
    lines = [f"{request.method} {request.url.raw_path.decode('latin-1')} HTTP/1.1"]
    lines += [f"{k.decode('latin-1')}: {v.decode('latin-1')}" for k, v in request.headers.raw]
    return "\r\n".join(lines) + "\r\n\r\n"


def _response_head(response: httpx.Response) -> str:
    """The status line and header lines as received (names in their own case, in their order)."""
    version = response.extensions.get("http_version", b"HTTP/1.1").decode("latin-1")
    reason = response.extensions.get("reason_phrase", b"").decode("latin-1")
    lines = [f"{version} {response.status_code} {reason}".rstrip()]
    lines += [f"{k.decode('latin-1')}: {v.decode('latin-1')}" for k, v in response.headers.raw]
    return "\r\n".join(lines) + "\r\n\r\n"


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bytes | None, bool]:
    """Read the body up to `max_bytes`: (decoded body, entity body as transferred or None, truncated).

    One pass: the raw bytes (transfer coding removed by the transport, Content-Encoding kept) go through
    the decoder httpx's own ``aiter_bytes`` uses. The cap is on decoded bytes, so a gzip bomb stops too
    (and on the raw bytes: a stream that decodes to nothing stops as well). With no content coding httpx
    knows (the common case) the wire bytes are the decoded bytes: None, so no second copy is kept."""
    decoder = response._get_content_decoder()  # httpx's decoder for the response's Content-Encoding
    identity = isinstance(decoder, IdentityDecoder)
    chunks: list[bytes] = []
    raw: list[bytes] = []
    size = raw_size = 0
    truncated = False
    async for chunk in response.aiter_raw():
        if not identity:
            raw.append(chunk)
            raw_size += len(chunk)
        decoded = decoder.decode(chunk)
        if size + len(decoded) > max_bytes or raw_size > max_bytes:
            chunks.append(decoded[: max_bytes - size])
            truncated = True
            break
        chunks.append(decoded)
        size += len(decoded)
    if not truncated:
        tail = decoder.flush()
        if size + len(tail) > max_bytes:
            tail, truncated = tail[: max_bytes - size], True
        chunks.append(tail)
    return b"".join(chunks), (None if identity else b"".join(raw)), truncated
