"""The HTTP side of the fetcher: one GET through our own DNS, with a body cap and a wall-clock limit.

The URL's host is resolved by `Resolver` (cache, negative cache, allow-list) and the request goes to the
IP; the Host header (and, for https, the TLS SNI name) stays the original host, so name-based virtual
hosting works and no second, uncontrolled lookup happens inside httpx. Redirects are never followed
here for pages (each hop goes back through normalization and dedup); `fetch_robots` follows a few.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx
from streamcrawl_core.urls import UrlError, normalize

from streamcrawl_fetcher.dns import AddressNotAllowed, DnsError, Resolver

__all__ = ["AddressNotAllowed", "DnsError", "HttpFetcher", "HttpResponse", "NetworkError", "make_client"]


class NetworkError(Exception):
    """No (complete) HTTP response: connect refused/timeout, reset, TLS failure, protocol error."""


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    elapsed_s: float


class ShardedTransport:
    """Connection pools sharded by origin. httpcore's pool scans every pooled connection for every
    request; a broad crawl keeps connections to thousands of hosts, which made that scan ~70% of the
    fetcher's CPU (py-spy, 2,000 hosts). With one small pool per shard the scan stays short, and a host
    always lands in the same shard, so keep-alive still works."""

    def __init__(self, max_connections: int, verify_tls: bool = True, shards: int = 64) -> None:
        per_shard = max(4, max_connections // shards)
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=max(2, per_shard // 2),
                              keepalive_expiry=15.0)
        ctx = httpx.create_ssl_context(verify=verify_tls)  # one TLS context shared by every shard
        # trust_env=False: proxies from the environment must not silently reroute a crawler.
        self.shards = [httpx.AsyncHTTPTransport(verify=ctx, trust_env=False, limits=limits, retries=0)
                       for _ in range(shards)]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = (request.url.host, request.url.port)
        return await self.shards[hash(origin) % len(self.shards)].handle_async_request(request)

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()


def make_client(max_connections: int, verify_tls: bool = True) -> ShardedTransport:
    """The connection pools. We drive transports directly, not an AsyncClient: the client parses every
    Location header (raising on a malformed one and losing the response) even when not following."""
    return ShardedTransport(max_connections, verify_tls)


class HttpFetcher:
    def __init__(self, client: ShardedTransport, resolver: Resolver, user_agent: str,
                 connect_timeout_s: float = 5.0, read_timeout_s: float = 30.0,
                 total_timeout_s: float = 120.0) -> None:
        self.client = client
        self.timeouts = httpx.Timeout(connect=connect_timeout_s, read=read_timeout_s, write=read_timeout_s,
                                      pool=read_timeout_s).as_dict()
        self.resolver = resolver
        self.user_agent = user_agent
        self.total_timeout_s = total_timeout_s

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
            # The pool is keyed by IP:port, so a kept-alive TLS connection could be reused for another
            # virtual host with the wrong SNI/certificate; polite crawling rarely reuses one anyway.
            req_headers["Connection"] = "close"
        request = httpx.Request("GET", target.copy_with(host=ip), headers=req_headers, extensions=extensions)
        t0 = time.perf_counter()
        try:
            async with asyncio.timeout(self.total_timeout_s):
                response = await self.client.handle_async_request(request)
                try:
                    body, truncated = await _read_capped(response, max_bytes)
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            raise NetworkError(f"timeout after {self.total_timeout_s:.0f}s total") from exc
        except httpx.TimeoutException as exc:
            raise NetworkError(f"{type(exc).__name__}: {exc}"[:300]) from exc
        except (httpx.HTTPError, httpx.StreamError, OSError) as exc:
            raise NetworkError(f"{type(exc).__name__}: {exc}"[:300]) from exc
        return HttpResponse(response.status_code, response.headers, body, truncated, time.perf_counter() - t0)

    async def fetch_robots(self, url: str, max_bytes: int, max_redirects: int,
                           hop_delay: Callable[[float], float] = lambda _s: 0.0) -> tuple[int | None, bytes | None]:
        """Final (status, body) of a robots.txt fetch, following up to `max_redirects` redirects;
        (None, None) when the host is unreachable. A 3xx left after the last hop is returned as is.
        Each hop is a request to the host like any other: `hop_delay(previous hop seconds)` is waited
        before the next one (the politeness delay), so a redirect chain is not a burst."""
        current = url
        previous_s: float | None = None
        for _hop in range(max_redirects + 1):
            if previous_s is not None:
                await asyncio.sleep(hop_delay(previous_s))
            try:
                # One byte over the cap lets the robots parser see that the file was cut.
                resp = await self.get(current, max_bytes + 1)
            except (DnsError, AddressNotAllowed, NetworkError, UrlError):
                return None, None
            previous_s = resp.elapsed_s
            location = resp.headers.get("location")
            if 300 <= resp.status <= 399 and location:
                try:
                    current = normalize(location, base=current)
                except UrlError:
                    return resp.status, None
                continue
            return resp.status, resp.body
        return resp.status, None


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read the decoded body up to `max_bytes`; the cap is on decoded bytes, so a gzip bomb stops too."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > max_bytes:
            chunks.append(chunk[: max_bytes - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False
