"""HttpFetcher over AiohttpTransport against real local servers on loopback (aiohttp's web server, or a
raw asyncio socket server for what a well-behaved server never sends): what goes on the wire, decoding,
the body cap, timeouts, errors, cookies, proxies, keep-alive, TLS SNI and many hosts at once."""

from __future__ import annotations

import asyncio
import gzip
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import aiohttp
import brotli
import httpx
import pytest
from aiohttp import web
from streamcrawl_fetcher.dns import Resolver, parse_networks
from streamcrawl_fetcher.fetch import AiohttpTransport, HttpFetcher, HttpResponse, NetworkError, make_client
from streamcrawl_fetcher.settings import DEFAULT_USER_AGENT

from .fakes import TinyDNS

UA = DEFAULT_USER_AGENT
Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]


@pytest.fixture(scope="module")
def dns_server() -> Iterator[TinyDNS]:
    srv = TinyDNS({"site.test": "127.0.0.1", "other.test": "127.0.0.1", "secure.test": "127.0.0.1"})
    yield srv
    srv.close()


def fetcher(dns_port: int = 9, connect_s: float = 2.0, read_s: float = 2.0, total_s: float = 10.0,
            max_connections: int = 16, client: httpx.AsyncBaseTransport | None = None) -> HttpFetcher:
    resolver = Resolver("127.0.0.1", dns_port, 1.0, parse_networks("127.0.0.0/8"))
    return HttpFetcher(client or make_client(max_connections, verify_tls=False), resolver, UA,
                       connect_s, read_s, total_s)


@asynccontextmanager
async def serve(handler: Handler, hosts: tuple[str, ...] = ("127.0.0.1",),
                tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    """aiohttp's low-level web server on `hosts` (one port), in the test's own event loop."""
    with socket.socket() as probe:  # one port on every address
        probe.bind((hosts[0], 0))
        port = int(probe.getsockname()[1])
    low = web.Server(handler, access_log=None)
    server = await asyncio.get_running_loop().create_server(low, host=list(hosts), port=port, ssl=tls,
                                                             reuse_address=True)
    try:
        yield port
    finally:
        server.close()
        await low.shutdown(0.5)
        await server.wait_closed()


class Raw:
    """A socket server that reads one request head per connection and answers with `reply(head)` bytes
    (None: close without answering), after `hold_s`; `drip` bytes are then written one per `drip_every_s`.
    With `keep_alive` False the connection is closed after the first answer."""

    def __init__(self, reply: Callable[[bytes], bytes | None], drip: bytes = b"", drip_every_s: float = 0.0,
                 hold_s: float = 0.0, keep_alive: bool = True) -> None:
        self.reply, self.drip, self.drip_every_s, self.hold_s = reply, drip, drip_every_s, hold_s
        self.keep_alive = keep_alive
        self.heads: list[bytes] = []
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head)
                if self.hold_s:
                    await asyncio.sleep(self.hold_s)
                answer = self.reply(head)
                if answer is None:
                    break
                writer.write(answer)
                for i in range(len(self.drip)):
                    await asyncio.sleep(self.drip_every_s)
                    writer.write(self.drip[i:i + 1])
                await writer.drain()
                if not self.keep_alive:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[int]:
        server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        try:
            yield int(server.sockets[0].getsockname()[1])
        finally:
            server.close()


def ok(body: bytes = b"hello", extra: bytes = b"") -> Callable[[bytes], bytes]:
    return lambda _head: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def get(f: HttpFetcher, url: str, max_bytes: int = 1 << 20) -> HttpResponse:
    return await f.get(url, max_bytes)


def run(coro: Coroutine[None, None, None]) -> None:
    asyncio.run(coro)


# ------------------------------------------------------------------ the request on the wire


def test_request_head_on_the_wire_is_exactly_ours(dns_server: TinyDNS) -> None:
    """The request goes to the resolved address with the original Host; no header of aiohttp's own."""
    raw = Raw(ok())

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher(dns_server.port)
            resp = await f.get(f"http://site.test:{port}/a%7eb/%2F/c?q=%41&x=1", 1000, {"If-None-Match": '"v"'})
            await f.client.aclose()
        assert resp.status == 200 and resp.body == b"hello" and not resp.truncated
        [head] = raw.heads
        lines = head.decode("latin-1").split("\r\n")
        assert lines[0] == "GET /a%7eb/%2F/c?q=%41&x=1 HTTP/1.1"  # the path as given, not re-quoted
        fields = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        assert fields == {"host": f"site.test:{port}", "user-agent": UA, "accept-encoding": "gzip, br",
                          "accept": "text/html,application/xhtml+xml,*/*;q=0.8", "if-none-match": '"v"'}
        # what the WARC request record holds is the head on the wire, field for field
        recorded = resp.request_head.split("\r\n")
        assert recorded[0] == lines[0] and resp.request_head.endswith("\r\n\r\n")
        assert {k.lower(): v.strip() for k, _, v in (x.partition(":") for x in recorded[1:] if x)} == fields
        assert resp.ip == "127.0.0.1"

    run(go())


def test_response_head_is_recorded_as_received() -> None:
    raw = Raw(lambda _h: b"HTTP/1.1 201 Made It\r\nContent-Length: 1\r\nX-Odd-CASE: v\r\nset-cookie: a=1\r\n\r\nx")

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            resp = await get(f, f"http://127.0.0.1:{port}/")
            await f.client.aclose()
        assert resp.response_head == ("HTTP/1.1 201 Made It\r\nContent-Length: 1\r\nX-Odd-CASE: v\r\n"
                                      "set-cookie: a=1\r\n\r\n")

    run(go())


def test_response_headers_are_httpx_headers_with_repeats() -> None:
    raw = Raw(ok(b"x", b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Robots-Tag: noindex\r\nX-Robots-Tag: nofollow\r\n"))

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            resp = await get(f, f"http://127.0.0.1:{port}/")
            await f.client.aclose()
        assert isinstance(resp.headers, httpx.Headers)
        assert resp.headers.get_list("x-robots-tag") == ["noindex", "nofollow"]
        assert resp.headers.get_list("set-cookie") == ["a=1", "b=2"] and resp.headers["content-length"] == "1"

    run(go())


def test_header_value_with_a_line_break_is_refused_before_sending() -> None:
    """A validator echoed back from storage must never inject a header line."""
    raw = Raw(ok())

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            with pytest.raises(NetworkError, match=r"^LocalProtocolError"):
                await f.get(f"http://127.0.0.1:{port}/", 100, {"If-None-Match": '"a"\r\nX-Evil: 1'})
            await f.client.aclose()

    run(go())
    assert raw.heads == []


def test_odd_reason_phrases_are_fine() -> None:
    raw = Raw(lambda _h: "HTTP/1.1 200 Ça va ✓\r\nContent-Length: 2\r\n\r\nok".encode())

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            assert (await get(f, f"http://127.0.0.1:{port}/")).body == b"ok"
            await f.client.aclose()

    run(go())


def test_large_response_head_is_accepted() -> None:
    """h11 (under httpcore) took heads up to 100 KiB; aiohttp's default 8 KiB per line would not."""
    raw = Raw(ok(b"x", b"X-Big: " + b"v" * 20_000 + b"\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(300))))

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            resp = await get(f, f"http://127.0.0.1:{port}/")
            await f.client.aclose()
        assert resp.status == 200 and len(resp.headers["x-big"]) == 20_000 and resp.headers["x-299"] == "1"

    run(go())


def test_no_cookies_are_kept_between_requests(dns_server: TinyDNS) -> None:
    """No jar at all: aiohttp's default one refuses cookies of address hosts (ours) only by default."""
    seen: list[str | None] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        seen.append(request.headers.get("Cookie"))
        resp = web.Response(body=b"ok")
        resp.set_cookie("session", "s3cret", domain="site.test")
        resp.set_cookie("plain", "1")
        return resp

    async def go() -> None:
        async with serve(handler) as port:
            f = fetcher(dns_server.port)
            for host in ("site.test", "site.test", "other.test"):
                assert (await get(f, f"http://{host}:{port}/")).status == 200
            assert isinstance(f.client, AiohttpTransport) and f.client._session is not None
            assert isinstance(f.client._session.cookie_jar, aiohttp.DummyCookieJar)
            await f.client.aclose()

    run(go())
    assert seen == [None, None, None]


def test_redirects_are_not_followed() -> None:
    paths: list[str] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        paths.append(request.path)
        return web.Response(status=301, headers={"Location": "/elsewhere"}, body=b"moved")

    async def go() -> None:
        async with serve(handler) as port:
            f = fetcher()
            resp = await get(f, f"http://127.0.0.1:{port}/old")
            await f.client.aclose()
        assert resp.status == 301 and resp.headers["location"] == "/elsewhere" and resp.body == b"moved"

    run(go())
    assert paths == ["/old"]


def test_proxies_from_the_environment_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY", "https_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    raw = Raw(ok())

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            assert (await get(f, f"http://127.0.0.1:{port}/")).body == b"hello"
            await f.client.aclose()

    run(go())
    assert raw.heads[0].startswith(b"GET / HTTP/1.1")


# ------------------------------------------------------------------ decoding and the body cap

PAGE = b"<html><body>" + b"<p>some words, some more words</p>" * 3000 + b"</body></html>"


def encoded_handler(encoding: str, body: bytes) -> Handler:
    data = {"gzip": gzip.compress, "br": brotli.compress, "identity": lambda b: b}[encoding](body)

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        headers = {"Content-Type": "text/html"}
        if encoding != "identity":
            headers["Content-Encoding"] = encoding
        return web.Response(body=data, headers=headers)

    return handler


@pytest.mark.parametrize("encoding", ["gzip", "br", "identity"])
def test_bodies_are_decoded(encoding: str) -> None:
    async def go() -> None:
        async with serve(encoded_handler(encoding, PAGE)) as port:
            f = fetcher()
            resp = await get(f, f"http://127.0.0.1:{port}/")
            await f.client.aclose()
        assert resp.body == PAGE and not resp.truncated
        assert resp.headers.get("content-encoding") == (None if encoding == "identity" else encoding)

    run(go())


@pytest.mark.parametrize("chunked", [False, True])
@pytest.mark.parametrize("encoding", ["gzip", "br", "identity"])
def test_the_wire_body_is_kept_as_transferred(encoding: str, chunked: bool) -> None:
    """One pass gives the decoded body and the entity body as sent (Content-Encoding kept, the chunked
    framing removed); with no content coding there is no second copy (the body is the wire body)."""
    data = {"gzip": gzip.compress, "br": brotli.compress, "identity": lambda b: b}[encoding](PAGE)

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html",
                                           **({} if encoding == "identity" else {"Content-Encoding": encoding})})
        if chunked:
            resp.enable_chunked_encoding()
        else:
            resp.content_length = len(data)
        await resp.prepare(request)
        for i in range(0, len(data), 1000):
            await resp.write(data[i:i + 1000])
        await resp.write_eof()
        return resp

    async def go() -> None:
        async with serve(handler) as port:
            f = fetcher()
            resp = await get(f, f"http://127.0.0.1:{port}/")
            await f.client.aclose()
        assert resp.body == PAGE and not resp.truncated
        assert ("transfer-encoding" in resp.response_head.lower()) == chunked
        if encoding == "identity":
            assert resp.wire is None and resp.wire_body == PAGE
        else:
            assert resp.wire == data and resp.wire_body == data

    run(go())


@pytest.mark.parametrize("encoding", ["gzip", "br", "identity"])
def test_body_cap_is_on_the_decoded_body(encoding: str) -> None:
    bomb = b"\0" * (20 << 20)  # 20 MiB that compress to a few KiB

    async def go() -> None:
        async with serve(encoded_handler(encoding, bomb)) as port:
            f = fetcher()
            resp = await get(f, f"http://127.0.0.1:{port}/", max_bytes=100_000)
            exact = await get(f, f"http://127.0.0.1:{port}/", max_bytes=len(bomb))
            await f.client.aclose()
        assert resp.truncated and resp.body == bomb[:100_000]
        assert not exact.truncated and exact.body == bomb  # exactly the cap: complete, not truncated

    run(go())


# ------------------------------------------------------------------ keep-alive, limits, many hosts


def test_keep_alive_per_host_and_a_cut_body_closes_its_connection() -> None:
    raw = Raw(ok(b"y" * 5000))

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            for _ in range(3):
                assert (await get(f, f"http://127.0.0.1:{port}/")).body == b"y" * 5000
            assert raw.connections == 1  # one connection, kept alive
            assert (await get(f, f"http://127.0.0.1:{port}/", max_bytes=10)).truncated
            assert (await get(f, f"http://127.0.0.1:{port}/")).status == 200
            await f.client.aclose()
        # A connection whose body was not read to the end is never reused.
        assert raw.connections in (1, 2) and len(raw.heads) == 5

    run(go())


def test_many_hosts_at_once_through_a_small_pool() -> None:
    addresses = tuple(f"127.0.1.{i}" for i in range(1, 41))
    seen: set[str] = set()

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        seen.add(str(sock[0]) if sock else "")
        await asyncio.sleep(0.01)
        return web.Response(body=request.host.encode())

    async def go() -> None:
        async with serve(handler, addresses) as port:
            f = fetcher(max_connections=8)
            urls = [f"http://{addresses[i % len(addresses)]}:{port}/{i}" for i in range(400)]
            results = await asyncio.gather(*(get(f, u) for u in urls))
            await f.client.aclose()
        assert [r.body.decode() for r in results] == [u.split("/")[2] for u in urls]

    run(go())
    assert seen == set(addresses)


def test_client_made_outside_the_loop_works_in_one_loop_after_another() -> None:
    """make_client runs before asyncio.run (the service, the tests): the session opens on first use."""
    raw = Raw(ok())
    client = make_client(4)
    assert isinstance(client, AiohttpTransport)

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher(client=client)
            assert (await get(f, f"http://127.0.0.1:{port}/")).body == b"hello"
            await client.aclose()

    run(go())
    run(go())  # closed, then usable again in a new loop


# ------------------------------------------------------------------ timeouts and errors


def fails_with(raw: Raw, pattern: str, **fetcher_kw: float) -> float:
    """GET / from ``raw`` expecting a NetworkError whose text matches ``pattern``; the seconds it took."""
    async def go() -> float:
        async with raw.running() as port:
            f = fetcher(**fetcher_kw)  # type: ignore[arg-type]
            t0 = time.monotonic()
            try:
                with pytest.raises(NetworkError, match=pattern):
                    await get(f, f"http://127.0.0.1:{port}/")
                return time.monotonic() - t0
            finally:
                await f.client.aclose()

    return asyncio.run(go())


def test_read_timeout_waiting_for_the_head() -> None:
    assert fails_with(Raw(ok(), hold_s=2.0), r"^ReadTimeout", read_s=0.3) < 1.5


def test_read_timeout_in_the_body() -> None:
    raw = Raw(lambda _h: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc", drip=b"d", drip_every_s=2.0)
    fails_with(raw, r"^ReadTimeout", read_s=0.3)


def test_total_limit_stops_a_dripping_server() -> None:
    """One byte every 0.1 s never trips the read timeout; the wall-clock limit does."""
    raw = Raw(lambda _h: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", drip=b"z" * 100, drip_every_s=0.1)
    assert 0.7 < fails_with(raw, "total", read_s=1.0, total_s=0.8) < 2.0


def test_connect_timeout() -> None:
    """A listening socket whose backlog is full drops further SYNs: the connect hangs until the timeout."""
    import socket

    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(0)
    port = lsock.getsockname()[1]
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        with suppress(BlockingIOError):
            s.connect(("127.0.0.1", port))
        fillers.append(s)

    with socket.socket() as probe:  # the kernel drops SYNs to a full backlog (Linux's default)?
        probe.settimeout(0.2)
        try:
            probe.connect(("127.0.0.1", port))
        except TimeoutError:
            pass
        else:
            pytest.skip("this kernel answers a full backlog: no way to make a connect hang")

    async def go() -> None:
        f = fetcher(connect_s=0.3)
        t0 = time.monotonic()
        with pytest.raises(NetworkError, match=r"^ConnectTimeout"):
            await get(f, f"http://127.0.0.1:{port}/")
        assert time.monotonic() - t0 < 2.0
        await f.client.aclose()

    try:
        run(go())
    finally:
        for s in fillers:
            s.close()
        lsock.close()


def test_connection_refused_is_a_connect_error() -> None:
    async def go() -> None:
        f = fetcher()
        with pytest.raises(NetworkError, match=r"^ConnectError"):
            await get(f, "http://127.0.0.1:1/")
        await f.client.aclose()

    run(go())


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 2OO OK\r\nContent-Length: 2\r\n\r\nok",  # a bad status line
    b"NONSENSE\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\nok",  # a bad Content-Length
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot hex\r\n",  # a bad chunk
])
def test_malformed_responses_are_protocol_errors(answer: bytes) -> None:
    fails_with(Raw(lambda _h: answer), r"^RemoteProtocolError")


def test_body_cut_short_is_a_protocol_error() -> None:
    raw = Raw(lambda _h: b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", keep_alive=False)
    fails_with(raw, r"^RemoteProtocolError")


def test_server_closing_without_an_answer_is_not_retried() -> None:
    """aiohttp resends an idempotent request on a broken connection; one lease pays for one request."""
    raw = Raw(lambda _h: None)

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            with pytest.raises(NetworkError, match=r"^RemoteProtocolError"):
                await get(f, f"http://127.0.0.1:{port}/")
            await f.client.aclose()

    run(go())
    assert raw.connections == 1 and len(raw.heads) == 1


def test_broken_keep_alive_connection_is_not_retried() -> None:
    """The second request on a kept-alive connection that the server then drops: one try, an error."""
    answers = iter([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", None])
    raw = Raw(lambda _h: next(answers, None))

    async def go() -> None:
        async with raw.running() as port:
            f = fetcher()
            assert (await get(f, f"http://127.0.0.1:{port}/")).body == b"ok"
            with pytest.raises(NetworkError):
                await get(f, f"http://127.0.0.1:{port}/")
            await f.client.aclose()

    run(go())
    assert len(raw.heads) == 2


# ------------------------------------------------------------------ TLS: SNI is the original host


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", str(key), "-out", str(cert), "-days", "1", "-subj", "/CN=secure.test",
                    "-addext", "subjectAltName=DNS:secure.test,IP:127.0.0.1"], check=True, capture_output=True)
    return cert, key


def test_https_goes_to_the_address_with_the_original_sni_and_host(dns_server: TinyDNS, tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    server_names: list[str | None] = []
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    tls.sni_callback = lambda _sock, name, _ctx: server_names.append(name)  # type: ignore[assignment,func-returns-value]
    hosts: list[str] = []

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        hosts.append(request.host)
        return web.Response(body=b"secret page")

    async def go() -> None:
        async with serve(handler, tls=tls) as port:
            f = fetcher(dns_server.port)  # verify_tls=False: the certificate is self-signed
            resp = await get(f, f"https://secure.test:{port}/p")
            assert resp.status == 200 and resp.body == b"secret page"
            assert hosts == [f"secure.test:{port}"]
            await f.client.aclose()
            strict = fetcher(dns_server.port, client=make_client(4, verify_tls=True))
            with pytest.raises(NetworkError, match=r"^ConnectError"):  # an unknown issuer
                await get(strict, f"https://secure.test:{port}/p")
            await strict.client.aclose()

    run(go())
    assert server_names[0] == "secure.test"
