"""The hostile web: a raw socket HTTP server (plain and TLS ports) and a DNS server that serve the corpus of
``hostile_cases.py`` on loopback, for the real fetcher and parser.

The HTTP server writes raw bytes, so it can send what no well-behaved server library would: compression
bombs, endless or dripping bodies, giant or countless headers, HTTP/0.9, garbage status lines, resets. A
request for ``/c/<case>`` gets that case; ``/robots.txt`` depends on the Host (the robots cases); the
fetcher's soft-404 probe gets a 404; anything else a small page with one link. The DNS server answers A
and AAAA for ``*.hostile.test`` with 127.0.0.1, and misbehaves for the DNS cases (no answer, CNAME loops,
SERVFAIL, garbage, private and metadata addresses, IPv6 only).

    web = HostileWeb(); await web.start(); ...; url = web.url(case); ...; await web.stop()
"""

from __future__ import annotations

import asyncio
import gzip
import random
import socket
import ssl
import struct
import zlib
from collections.abc import Awaitable, Callable
from functools import cache

import brotli
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset

from streamcrawl_synthweb.hostile_cases import Case

__all__ = ["HostileWeb"]

OK_PAGE = b"<html><head><title>ok</title></head><body><p>fine</p><a href='/c/ok-next'>next</a></body></html>"
_BOMB = 100 * 1024 * 1024  # decoded size of each bomb: 10x the fetcher's cap


def _resp(status: str, headers: list[tuple[str, str]], body: bytes = b"", version: str = "HTTP/1.1") -> bytes:
    # Every answer says it closes the connection (and it does): a keep-alive connection the server then
    # closed under the client would make the next case fail for a reason of its own.
    if version == "HTTP/1.1" and not any(k.lower() == "connection" for k, _ in headers):
        headers = [*headers, ("Connection", "close")]
    head = "".join(f"{k}: {v}\r\n" for k, v in headers)
    return f"{version} {status}\r\n{head}\r\n".encode("latin-1") + body


def _html(body: bytes, ctype: str = "text/html; charset=utf-8", extra: list[tuple[str, str]] | None = None) -> bytes:
    return _resp("200 OK", [("Content-Type", ctype), ("Content-Length", str(len(body))), ("Connection", "close"),
                            *(extra or [])], body)


@cache
def _bomb(kind: str) -> bytes:
    data = b" " * _BOMB
    if kind == "gzip":
        return gzip.compress(data, compresslevel=6)
    if kind == "deflate":
        return zlib.compress(data, 6)
    if kind == "raw-deflate":
        c = zlib.compressobj(6, zlib.DEFLATED, -15)
        return c.compress(data) + c.flush()
    if kind == "br":
        return bytes(brotli.compress(data, quality=1))
    return gzip.compress(_bomb("gzip"), compresslevel=6)  # gzip, gzip


Writer = asyncio.StreamWriter
Behaviour = Callable[[Writer], Awaitable[None]]


async def _drip(w: Writer, data: bytes, every_s: float, limit_s: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + limit_s
    for i in range(len(data)):
        if loop.time() > end:
            return
        w.write(data[i:i + 1])
        await w.drain()
        await asyncio.sleep(every_s)


async def _forever(w: Writer, chunk: bytes, every_s: float, limit_s: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + limit_s
    while loop.time() < end:
        w.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        await w.drain()
        if every_s:
            await asyncio.sleep(every_s)


def _reset(w: Writer) -> None:
    sock = w.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    w.transport.abort()


def _bytes_case(data: bytes | Callable[[], bytes]) -> Behaviour:
    async def send(w: Writer) -> None:
        w.write(data() if callable(data) else data)
        await w.drain()
    return send


def _encoded(kind: str, name: str) -> Behaviour:
    def build() -> bytes:
        body = _bomb(kind)
        return _resp("200 OK", [("Content-Type", "text/html"), ("Content-Encoding", name),
                                ("Content-Length", str(len(body))), ("Connection", "close")], body)
    return _bytes_case(build)


async def _slow_drip(w: Writer) -> None:
    w.write(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Length", "100000")]))
    await _drip(w, b"<" * 100000, 0.5)


async def _slow_head(w: Writer) -> None:
    await _drip(w, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n", 0.5)


async def _infinite(w: Writer, every_s: float, size: int) -> None:
    w.write(_resp("200 OK", [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")]))
    w.write(b"%x\r\n%s\r\n" % (len(OK_PAGE[:-14]), OK_PAGE[:-14]))
    await _forever(w, b"<p>" + b"x" * (size - 7) + b"</p>\n", every_s)


async def _fifteen_mb(w: Writer) -> None:
    total = 15 * 1000 * 1000
    w.write(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Length", str(total))]))
    head = OK_PAGE[:-14]
    w.write(head)
    sent, filler = len(head), b"<p>" + b"filler text " * 80 + b"</p>\n"
    while sent < total:
        piece = filler[: total - sent]
        w.write(piece)
        sent += len(piece)
        await w.drain()


async def _reset_mid_body(w: Writer) -> None:
    w.write(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Length", "10000")], b"<p>" + b"a" * 4997))
    await w.drain()
    await asyncio.sleep(0.05)
    _reset(w)


async def _nothing(w: Writer) -> None:
    return None


def _links(n: int) -> bytes:
    return b"<html><body>" + b"".join(b'<a href="/l/%d">l</a>' % i for i in range(n)) + b"</body></html>"


def _page(body: str) -> bytes:
    return f"<html><head><title>t</title></head><body>{body}</body></html>".encode()


_PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90wS\xde"
        b"\x00\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")
_SJIS = "<html><body><p>日本語のページです。東京の天気は晴れ。</p><a href='/c/ok'>次へ</a></body></html>"

BEHAVIOURS: dict[str, Behaviour] = {
    "gzip-bomb": _encoded("gzip", "gzip"),
    "deflate-bomb": _encoded("deflate", "deflate"),
    "raw-deflate-bomb": _encoded("raw-deflate", "deflate"),
    "brotli-bomb": _encoded("br", "br"),
    "double-gzip-bomb": _encoded("double", "gzip, gzip"),
    "bad-gzip": _bytes_case(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Encoding", "gzip"),
                                             ("Content-Length", "40")], b"this is not gzip at all, not at all!!!!!")),
    "unknown-encoding": _bytes_case(_html(OK_PAGE, extra=[("Content-Encoding", "x-unknown")])),
    "slow-drip": _slow_drip,
    "slow-head": _slow_head,
    "infinite-chunked": lambda w: _infinite(w, 0.0, 64 * 1024),
    "slow-infinite-chunked": lambda w: _infinite(w, 0.1, 1024),
    "15mb-page": _fifteen_mb,
    "short-body": _bytes_case(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Length", "1000"),
                                               ("Connection", "close")], b"<p>short</p>")),
    "long-body": _bytes_case(_resp("200 OK", [("Content-Type", "text/html"), ("Content-Length", "20"),
                                              ("Connection", "close")], b"<p>" + b"z" * 5000)),
    "close-delimited": _bytes_case(_resp("200 OK", [("Content-Type", "text/html")], OK_PAGE, "HTTP/1.0")),
    "empty-200": _bytes_case(_html(b"")),
    "no-content-type": _bytes_case(_resp("200 OK", [("Content-Length", str(len(OK_PAGE)))], OK_PAGE)),
    "header-70k": _bytes_case(_html(OK_PAGE, extra=[("X-Big", "a" * 70 * 1024)])),
    "header-200k": _bytes_case(_html(OK_PAGE, extra=[("X-Big", "a" * 200 * 1024)])),
    "headers-10000": _bytes_case(_html(OK_PAGE, extra=[(f"X-H{i}", "v") for i in range(10_000)])),
    "cookie-flood": _bytes_case(_html(OK_PAGE, extra=[("Set-Cookie", f"c{i}=v; Path=/") for i in range(1000)])),
    "nul-in-header": _bytes_case(_html(OK_PAGE, extra=[("X-Nul", "a\x00b")])),
    "http09": _bytes_case(OK_PAGE),
    "garbage-status": _bytes_case(b"HTTP/1.1 abc OK\r\nContent-Length: 2\r\n\r\nok"),
    "status-999": _bytes_case(b"HTTP/1.1 999 Weird\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"),
    "informational-first": _bytes_case(b"HTTP/1.1 100 Continue\r\n\r\n" + _html(OK_PAGE)),
    "reset-mid-body": _reset_mid_body,
    "close-no-answer": _nothing,
    "invalid-charset": _bytes_case(_html(OK_PAGE, "text/html; charset=no-such-charset")),
    "lying-charset": _bytes_case(_html(_SJIS.encode("shift_jis"), "text/html; charset=utf-8")),
    "utf16-lie": _bytes_case(_html(OK_PAGE, "text/html; charset=utf-16")),
    "rot13-charset": _bytes_case(_html(OK_PAGE, "text/html; charset=rot13")),
    "binary-as-html": _bytes_case(lambda: _html(random.Random(11).randbytes(1_000_000), "text/html")),
    "png-as-html": _bytes_case(_html(_PNG, "text/html")),
    "deep-nesting": _bytes_case(lambda: _html(b"<html><body>" + b"<div>" * 100_000 + b"deep" + b"</div>" * 100_000)),
    "100k-links": _bytes_case(lambda: _html(_links(100_000))),
    "huge-attribute": _bytes_case(lambda: _html(b'<a href="/' + b"a" * 1_000_000 + b'">x</a><a href="/ok">ok</a>')),
    "control-char-links": _bytes_case(_html(_page('<a href="/a\x00b">1</a><a href="/tab\tx">2</a>'
                                                  '<a href="/nl\nx">3</a><a href="/del\x7fx">4</a>'))),
    "base-javascript": _bytes_case(_html(_page('<base href="javascript:alert(1)"><a href="rel.html">r</a>'))),
    "base-other-host": _bytes_case(_html(_page('<base href="http://elsewhere.hostile.test/">'
                                               '<a href="rel.html">r</a>'))),
    "base-twice": _bytes_case(_html(_page('<base href="http://first.hostile.test/"><base href="http://second.hostile.test/">'
                                          '<a href="rel.html">r</a>'))),
    "meta-refresh-loop": _bytes_case(_html(_page('<meta http-equiv="refresh" content="0;url=/c/meta-refresh-loop">'
                                                 "<p>redirecting</p>"))),
    "idn-links": _bytes_case(_html(_page('<a href="http://аpple.hostile.test/">h</a><a href="http://xn--zz-.hostile.test/">'
                                         'z</a><a href="http://xn--.hostile.test/">e</a>'
                                         '<a href="http://xn--a.hostile.test/">a</a>'))),
    "redirect-file": _bytes_case(_resp("302 Found", [("Location", "file:///etc/passwd"), ("Content-Length", "0")])),
    "redirect-metadata": _bytes_case(_resp("302 Found", [("Location", "http://169.254.169.254/latest/meta-data/"),
                                                         ("Content-Length", "0")])),
    "redirect-64k": _bytes_case(_resp("302 Found", [("Location", "/" + "a" * 65536), ("Content-Length", "0")])),
    "retry-after-huge": _bytes_case(_resp("429 Too Many Requests", [("Retry-After", "999999999"),
                                                                    ("Content-Length", "0")])),
}


def _robots(host: str) -> bytes:
    if host.startswith("robots-big."):
        body = b"User-agent: *\nDisallow: /private/\n" + b"# " + b"c" * 97 + b"\n"
        body = body + body[-100:] * (5 * 1024 * 1024 // 100)
        return _resp("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))], body)
    if host.startswith("robots-bin."):
        return _resp("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "10000")],
                     random.Random(5).randbytes(10000))
    if host.startswith("robots-bom."):
        body = b"\xef\xbb\xbfUser-agent: *\nDisallow: /private/\n"
        return _resp("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))], body)
    if host.startswith("robots-loop."):
        return _resp("301 Moved Permanently", [("Location", "/robots.txt"), ("Content-Length", "0")])
    return _resp("404 Not Found", [("Content-Length", "0")])


class HostileWeb:
    """The hostile HTTP server (plain ``port``, TLS ``tls_port`` with ``tls`` if given) and DNS server."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.tls = tls
        self.port = self.tls_port = self.dns_port = 0
        self.requests: list[tuple[str, str]] = []  # (host, path) of every request head read
        self._servers: list[asyncio.AbstractServer] = []
        self._udp: asyncio.DatagramTransport | None = None

    def url(self, case: Case, zone: str = "hostile.test", path: str | None = None) -> str:
        """The case's URL; ``zone`` replaces hostile.test in its host (a run of its own: fresh host_state)."""
        port = self.tls_port if case.name in ("tls-self-signed", "plain-on-tls-port") else self.port
        host = case.host.replace("hostile.test", zone)
        if path is not None:
            return f"{case.scheme}://{host}:{port}{path}"
        path = case.url_path
        if case.name == "64k-url":
            path += "?" + "a" * 65536
        elif case.name == "control-char-url":
            path += "/x\n\x00y"
        return f"{case.scheme}://{host}:{port}{path}"

    async def start(self) -> None:
        plain = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = plain.sockets[0].getsockname()[1]
        self._servers.append(plain)
        if self.tls is not None:
            secure = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.tls)
            self.tls_port = secure.sockets[0].getsockname()[1]
            self._servers.append(secure)
        loop = asyncio.get_running_loop()
        self._udp, _ = await loop.create_datagram_endpoint(lambda: _Dns(), local_addr=("127.0.0.1", 0))
        self.dns_port = self._udp.get_extra_info("sockname")[1]

    async def stop(self) -> None:
        for s in self._servers:
            s.close()
        if self._udp is not None:
            self._udp.close()

    async def _serve(self, reader: asyncio.StreamReader, w: Writer) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1] if len(lines[0].split(" ")) > 1 else "/"
            host = next((ln.split(":", 1)[1].strip() for ln in lines[1:] if ln.lower().startswith("host:")), "")
            host = host.rsplit(":", 1)[0]
            self.requests.append((host, path))
            if path == "/robots.txt":
                w.write(_robots(host))
            elif path.startswith("/c/") and path[3:] in BEHAVIOURS:
                await BEHAVIOURS[path[3:]](w)
            elif path.startswith("/streamcrawl-probe-"):
                w.write(_resp("404 Not Found", [("Content-Length", "0")]))
            else:
                w.write(_html(OK_PAGE))
            await w.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ssl.SSLError,
                IndexError):
            pass  # the client went away, or spoke no HTTP: nothing to answer
        finally:
            if not w.transport.is_closing():
                w.close()


_ZONE = "hostile.test"
_A = {"private": "10.0.0.1", "metadata": "169.254.169.254"}
_AAAA = {"v6only": "::1", "mapped": "::ffff:10.0.0.1"}


class _Dns(asyncio.DatagramProtocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        try:
            query = dns.message.from_wire(data)
        except Exception:
            return
        q = query.question[0]
        name = q.name.to_text(omit_final_dot=True).lower()
        label = name.split(".")[0]
        if label == "slowdns":
            return  # never answers: the resolver times out
        if label == "garbage":
            self.transport.sendto(b"\x00\x01garbage, not a DNS message", addr)  # type: ignore[attr-defined]
            return
        resp = dns.message.make_response(query)
        if label == "gone" or not (name == _ZONE or name.endswith("." + _ZONE)):
            resp.set_rcode(dns.rcode.NXDOMAIN)
        elif label == "fail":
            resp.set_rcode(dns.rcode.SERVFAIL)
        elif label in ("loop1", "loop2"):
            other = name.replace(label, "loop2" if label == "loop1" else "loop1", 1)
            resp.answer.append(dns.rrset.from_text(q.name, 60, "IN", "CNAME", f"{other}."))
            resp.answer.append(dns.rrset.from_text(f"{other}.", 60, "IN", "CNAME", f"{name}."))
        elif label.startswith("chain") and q.rdtype == dns.rdatatype.A:
            rest = name[len(label):]  # ".<zone>"
            for i in range(int(label[5:] or 1), 4):
                resp.answer.append(dns.rrset.from_text(f"chain{i}{rest}.", 60, "IN", "CNAME", f"chain{i + 1}{rest}."))
            resp.answer.append(dns.rrset.from_text(f"chain4{rest}.", 60, "IN", "A", "127.0.0.1"))
        elif label in _AAAA:
            if q.rdtype == dns.rdatatype.AAAA:
                resp.answer.append(dns.rrset.from_text(q.name, 60, "IN", "AAAA", _AAAA[label]))
        elif q.rdtype == dns.rdatatype.A:
            resp.answer.append(dns.rrset.from_text(q.name, 60, "IN", "A", _A.get(label, "127.0.0.1")))
        self.transport.sendto(resp.to_wire(), addr)  # type: ignore[attr-defined]
