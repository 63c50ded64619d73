"""One asyncio (aiohttp low-level) HTTP server that serves every host of a ``SynthWeb``.

Each host is reachable only at its own 127.x.y.z address (one listening socket per host, all on one
port), so DNS resolution matters. A request is dispatched on the Host header, falling back to the
local address it arrived on. HTTP/1.1 keep-alive and HEAD come from aiohttp; gzip/brotli, strong
ETags, Last-Modified and 304s are done here so the ETag can name the representation. Which coding a host
prefers, and whether it sends it chunked, is `wire_style` (by host name).
"""

from __future__ import annotations

import asyncio
import email.utils
import gzip
import hashlib
import logging
import re
import secrets
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urlsplit

from aiohttp import web

from streamcrawl_synthweb import sitemaps
from streamcrawl_synthweb.log import LogEntry, RequestLog
from streamcrawl_synthweb.model import NORMAL, Host, SynthWeb
from streamcrawl_synthweb.pages import (
    Rendered,
    big_body_chunks,
    render_calendar,
    render_page,
    render_repeat,
    render_soft404,
    robots_real_txt,
    robots_spec,
)

try:  # brotli is a pinned dependency, but the server must not die without it.
    import brotli as _brotli
except ImportError:  # pragma: no cover
    _brotli = None

__all__ = ["SynthServer", "wire_style"]

log = logging.getLogger("streamcrawl_synthweb.server")

_CAL = re.compile(r"^/cal/(\d{4})/(\d{2})/$")
_REPEAT = re.compile(r"^/r/((?:a/)*)$")
_EPOCH_2026 = 1767225600.0  # 2026-01-01T00:00:00Z: static pages were "last modified" before this


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None
    last_modified: float | None = None  # set -> ETag/Last-Modified/conditional GET apply
    compressible: bool = True


@dataclass
class _Sent:
    """What went out so far: body bytes, and the time stamped just before the last write call."""

    bytes: int = 0
    last_write: float | None = None


def _http_date(ts: float) -> str:
    return email.utils.formatdate(ts, usegmt=True)


def _etag_core(value: str) -> str:
    v = value.strip()
    v = v[2:] if v.startswith("W/") else v
    v = v.strip('"')
    for suffix in ("-gzip", "-br"):
        if v.endswith(suffix):
            return v[: -len(suffix)]
    return v


def wire_style(host_name: str) -> tuple[bool, bool]:
    """(prefers gzip, sends it chunked) for a host: about half the hosts answer a crawler that accepts both
    with br and a Content-Length; a quarter prefer gzip and send it chunked (no Content-Length), a quarter
    prefer gzip with a Content-Length, so a crawl meets both codings and both framings."""
    style = zlib.crc32(host_name.encode()) % 4
    return style in (0, 1), style == 0


def _pick_encoding(accept: str, prefer_gzip: bool = False) -> str | None:
    offered: dict[str, float] = {}
    for part in accept.split(","):
        name, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        offered[name.strip().lower()] = q
    if prefer_gzip and offered.get("gzip", 0) > 0:
        return "gzip"
    if _brotli is not None and offered.get("br", 0) > 0:
        return "br"
    if offered.get("gzip", 0) > 0:
        return "gzip"
    return None


class SynthServer:
    """Serve ``web`` on every host's address at ``web.port``. ``start_time`` anchors content versions."""

    def __init__(self, web_: SynthWeb, request_log: RequestLog | None = None) -> None:
        self.web = web_
        self.log = request_log or RequestLog(None)
        self.start_time = time.time()
        self._hits: dict[str, int] = {}  # host -> non-robots requests seen (for 429s)
        self._servers: list[asyncio.Server] = []
        self._low: web.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.log.open()
        # handler_cancellation: a client that goes away (a timeout, a crawler killed mid-request) ends
        # the exchange there, as on servers that cancel work for a closed connection (Go's request
        # context, nginx without proxy_ignore_client_abort). The log's end is then the disconnect, not
        # the end of a delay nobody waits for any more: politeness is judged on how long we held the host.
        self._low = web.Server(self._handle, access_log=None, handler_cancellation=True)  # needs the running loop
        self.start_time = time.time()
        ips = [h.ip for h in self.web.hosts]
        # One create_server call with all addresses: numeric hosts skip getaddrinfo, so 2,000+
        # listening sockets come up in well under a second.
        server = await loop.create_server(self._low, host=ips, port=self.web.port, reuse_address=True)
        self._servers.append(server)
        log.info("http listening", extra={"fields": {"hosts": len(ips), "port": self.web.port}})

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        if self._low is not None:
            await self._low.shutdown(timeout=1.0)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        await self.log.close()

    def version(self, host: Host) -> int:
        if host.kind != "changing":
            return 0
        return int((time.time() - self.start_time) / self.web.profile.change_period_s)

    # --- dispatch -----------------------------------------------------------------------------------
    def _host_for(self, request: web.BaseRequest) -> tuple[Host | None, str]:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        ip = str(sock[0]) if sock else ""
        name = (request.host or "").rsplit(":", 1)[0].lower().rstrip(".")
        host = self.web.by_name.get(name) or self.web.by_ip.get(ip)
        return host, ip

    async def _handle(self, request: web.BaseRequest) -> web.StreamResponse:
        start = time.time()
        host, ip = self._host_for(request)
        resp = web.StreamResponse()
        sent = _Sent()
        aborted = False
        try:
            reply = await self._reply(request, host) if host else Reply(421, b"unknown host\n")
            await self._send(request, reply, resp, sent, host.name if host else "")
        except (ConnectionError, asyncio.CancelledError):
            aborted = True
            raise
        except Exception:
            resp.set_status(500)
            log.exception("handler failed", extra={"fields": {"path": request.raw_path}})
            raise
        finally:
            self.log.write(
                LogEntry(
                    host=host.name if host else (request.host or ""),
                    ip=ip,
                    port=self.web.port,
                    client=str(request.remote or ""),
                    method=request.method,
                    path=request.raw_path,
                    status=resp.status,
                    start=start,
                    end=time.time(),
                    bytes=sent.bytes,
                    ua=request.headers.get("User-Agent", ""),
                    if_none_match=request.headers.get("If-None-Match"),
                    if_modified_since=request.headers.get("If-Modified-Since"),
                    aborted=aborted,
                    last_write=None if aborted else sent.last_write,
                )
            )
        return resp

    async def _reply(self, request: web.BaseRequest, host: Host) -> Reply:
        prof = self.web.profile
        parts = urlsplit(request.raw_path)
        path = parts.path or "/"
        if host.kind == "slow":
            lo, hi = prof.slow_delay_s
            frac = zlib.crc32(f"{host.name}{request.raw_path}".encode()) / 0xFFFFFFFF
            await asyncio.sleep(lo + (hi - lo) * frac)
        if prof.sitemaps and host.kind == NORMAL:
            if path == "/robots.txt":
                return Reply(body=sitemaps.robots_txt(self.web, host).encode())
            served = sitemaps.serve(self.web, host, path)
            if served is not None:
                return Reply(body=served[0], content_type=served[1], compressible=served[1] != "application/gzip")
            orphan = sitemaps.orphan_page(path)
            if orphan is not None:
                return Reply(body=orphan, content_type="text/html; charset=utf-8")
        if path == "/robots.txt":
            return await self._robots(host)
        if path == "/robots-real.txt" and host.kind == "robots_redirect":
            return Reply(body=robots_real_txt().encode())
        if host.kind.startswith("ratelimit_"):
            n = self._hits.get(host.name, 0)
            self._hits[host.name] = n + 1
            if n < prof.ratelimit_first_n:
                retry = str(prof.retry_after_s)
                if host.kind == "ratelimit_date":
                    retry = _http_date(time.time() + prof.retry_after_s + 1)  # +1: date has 1 s grain
                return Reply(429, b"slow down\n", headers={"Retry-After": retry})
        query = parts.query
        sid: str | None = None
        if host.kind == "trap_session":
            query = urlencode([(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "sid"])
            sid = secrets.token_hex(8)
        # Exact path+query first (some table pages differ only by query), then the bare path: like
        # most real servers, unknown query parameters are ignored.
        page = host.pages.get(path + (f"?{query}" if query else "")) or host.pages.get(path)
        if page is None:
            return self._dynamic(host, path)
        if page.kind == "redirect":
            return Reply(page.status, b"moved\n", headers={"Location": page.location or "/"})
        if page.kind == "error":
            r = render_page(self.web, host, page)
            return Reply(page.status, r.body, r.content_type)
        if page.kind == "big":
            return Reply(
                stream=big_body_chunks(prof.big_body_bytes),
                content_type="text/html; charset=utf-8",
                compressible=False,
            )
        version = self.version(host)
        r = render_page(self.web, host, page, version=version, sid=sid)
        if host.kind == "changing":
            modified = self.start_time + version * prof.change_period_s
        else:
            modified = _EPOCH_2026 - zlib.crc32(page.path.encode()) % (86400 * 300)
        headers = {"X-Robots-Tag": page.x_robots} if page.x_robots else {}
        return Reply(body=r.body, content_type=r.content_type, headers=headers, last_modified=modified)

    async def _robots(self, host: Host) -> Reply:
        spec = robots_spec(host.kind, self.web.profile)
        if spec.status == 0:
            # Hang longer than any sane client timeout; answer afterwards if anyone still listens.
            await asyncio.sleep(self.web.profile.robots_timeout_s)
            return Reply(body=spec.body.encode())
        headers = {"Location": spec.location} if spec.location else {}
        return Reply(spec.status, spec.body.encode(), headers=headers)

    def _dynamic(self, host: Host, path: str) -> Reply:
        r: Rendered | None = None
        if host.kind == "trap_calendar" and (m := _CAL.match(path)):
            year, month = int(m.group(1)), int(m.group(2))
            if 1 <= month <= 12:
                r = render_calendar(year, month)
        elif host.kind == "trap_repeat" and (m := _REPEAT.match(path)):
            r = render_repeat(m.group(1).count("a/"))
        elif host.kind == "trap_soft404":
            r = render_soft404()  # 200 for anything unknown
        if r is None:
            return Reply(404, b"<html><body><h1>404 Not Found</h1></body></html>\n", "text/html")
        return Reply(body=r.body, content_type=r.content_type, last_modified=_EPOCH_2026)

    # --- sending ------------------------------------------------------------------------------------
    async def _send(self, request: web.BaseRequest, reply: Reply, resp: web.StreamResponse, sent: _Sent,
                    host_name: str = "") -> None:
        """Write ``reply`` into ``resp``; ``sent`` counts body bytes as they go out and stamps
        ``last_write`` right before the call that hands the last bytes to the socket."""
        resp.set_status(reply.status)
        resp.headers.update(reply.headers)
        resp.headers["Content-Type"] = reply.content_type  # verbatim: aiohttp would lowercase the charset
        head = request.method == "HEAD"
        if reply.stream is not None:
            await resp.prepare(request)  # chunked: the size is not announced, like a real stream
            if not head:
                for chunk in reply.stream:
                    await resp.write(chunk)
                    sent.bytes += len(chunk)
            sent.last_write = time.time()  # the terminating chunk goes out in write_eof
            await resp.write_eof()
            return
        body = reply.body
        if reply.last_modified is not None:
            etag = hashlib.blake2b(body, digest_size=8).hexdigest()
            resp.headers["Last-Modified"] = _http_date(reply.last_modified)
            if self._not_modified(request, etag, reply.last_modified):
                resp.set_status(304)
                resp.headers["ETag"] = f'"{etag}"'
                await resp.prepare(request)
                sent.last_write = time.time()  # the buffered head goes out in write_eof
                await resp.write_eof()
                return
        else:
            etag = None
        text_like = reply.content_type.startswith(("text/", "application/json"))
        prefer_gzip, chunked = wire_style(host_name)
        encoding = _pick_encoding(request.headers.get("Accept-Encoding", ""), prefer_gzip) if text_like else None
        if reply.compressible and encoding and reply.status == 200:
            body = _brotli.compress(body) if encoding == "br" and _brotli else gzip.compress(body, mtime=0)
            resp.headers["Content-Encoding"] = encoding
            resp.headers["Vary"] = "Accept-Encoding"
        else:
            chunked = False
        if etag is not None:
            resp.headers["ETag"] = f'"{etag}-{encoding}"' if encoding else f'"{etag}"'
        if chunked and not head:
            # The compressed body in two chunks, its size not announced (as a streaming gzip filter sends it).
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            half = len(body) // 2
            for part in (body[:half], body[half:]):
                if part:
                    await resp.write(part)
            sent.bytes = len(body)
            sent.last_write = time.time()  # the terminating chunk goes out in write_eof
            await resp.write_eof()
            return
        resp.content_length = len(body)
        await resp.prepare(request)
        # aiohttp buffers the head and sends it with the body in one write (or in write_eof when there is
        # no body); with Content-Length, write_eof sends nothing after a body.
        sent.last_write = time.time()
        if not head and body:
            await resp.write(body)
            sent.bytes = len(body)
        await resp.write_eof()

    @staticmethod
    def _not_modified(request: web.BaseRequest, etag: str, modified: float) -> bool:
        inm = request.headers.get("If-None-Match")
        if inm is not None:
            tags = [t for t in inm.split(",") if t.strip()]
            return any(t.strip() == "*" or _etag_core(t) == etag for t in tags)
        ims = request.headers.get("If-Modified-Since")
        if ims:
            try:
                since = email.utils.parsedate_to_datetime(ims).timestamp()
            except (TypeError, ValueError):
                return False
            return int(modified) <= since
        return False
