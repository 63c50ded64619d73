"""The fetcher handler's ports: what it needs from the HTTP transport and the resolver, and the errors
they raise, without the drivers (httpx, aiohttp, dnspython) in view. `fetch.py` and `dns.py` are the
adapters; unit tests can drive the handler with them on loopback or with doubles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class NetworkError(Exception):
    """No (complete) HTTP response: connect refused/timeout, reset, TLS failure, protocol error."""


class DnsError(Exception):
    """The name did not resolve (NXDOMAIN, SERVFAIL, timeout, no address)."""

    def __init__(self, reason: str, host: str) -> None:
        super().__init__(f"{reason}: {host}")
        self.reason = reason

    @property
    def transient(self) -> bool:
        """No answer came (a timeout, a resolver or transport error): it may clear up. NXDOMAIN, NODATA
        and SERVFAIL are answers: the name's servers said no, or that they cannot serve it."""
        return self.reason not in ("NXDOMAIN", "no_address", "SERVFAIL")


class AddressNotAllowed(Exception):
    """The name resolved to an address the fetcher must not connect to: we refuse."""


class Headers(Protocol):
    """Response headers, case-insensitive (httpx.Headers is one)."""

    def get(self, key: str, default: str | None = None) -> str | None: ...

    def get_list(self, key: str) -> list[str]: ...


@dataclass(frozen=True)
class HttpResponse:
    status: int
    headers: Headers
    body: bytes
    truncated: bool
    elapsed_s: float
    #: What a WARC record needs: the peer address and both heads as on the wire (latin-1 text).
    ip: str = ""
    request_head: str = ""
    response_head: str = ""
    #: The entity body as transferred (Content-Encoding kept, transfer coding removed) when a content
    #: coding was decoded; None when it is `body` itself (no coding: the common case).
    wire: bytes | None = None

    @property
    def wire_body(self) -> bytes:
        return self.body if self.wire is None else self.wire


class Resolver(Protocol):
    async def resolve(self, host: str) -> str:
        """An address the fetcher may connect to; DnsError or AddressNotAllowed otherwise."""
        ...


class Http(Protocol):
    """One GET through the fetcher's own DNS, with a body cap and a wall-clock limit; no redirects."""

    @property
    def resolver(self) -> Resolver: ...

    async def get(self, url: str, max_bytes: int, headers: dict[str, str] | None = None) -> HttpResponse: ...

    async def aclose(self) -> None: ...
