"""Fetcher handler against a real local HTTP server and a tiny DNS server (127.0.0.1 only)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import hashlib
import ipaddress
import random
import re
import socket
import time
import uuid
from collections.abc import Iterator, Sequence

import pytest
from aiohttp import web as aioweb
from prometheus_client import REGISTRY
from pydantic import ValidationError
from streamcrawl_contracts.messages import (
    ARCHIVE_INLINE_MAX_BYTES,
    FetchRequest,
    FetchResult,
    ParsedPage,
    UrlCandidates,
)
from streamcrawl_contracts.topics import ARCHIVE, FETCH_RESULTS, URL_CANDIDATES
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.robots import RobotsConfig
from streamcrawl_fetcher.archive import GUESSED_SITEMAP_PRIORITY
from streamcrawl_fetcher.dns import AddressNotAllowed, DnsError, Resolver, parse_networks
from streamcrawl_fetcher.fetch import HttpFetcher, make_client
from streamcrawl_fetcher.handler import FetcherHandler, FetchPolicy
from streamcrawl_fetcher.main import build_handler
from streamcrawl_fetcher.robots_cache import RobotsCache, RobotsHops
from streamcrawl_fetcher.settings import (
    DEFAULT_INLINE_BODY_MAX_BYTES,
    DEFAULT_USER_AGENT,
    INLINE_BODY_LIMIT,
    FetcherSettings,
)
from streamcrawl_parser.handler import ParserHandler
from streamcrawl_runtime.memory import MemoryBlobStore, MemoryCrawlState
from streamcrawl_runtime.ports.blobs import StoredPage, decode_page, encode_page
from streamcrawl_runtime.ports.errors import TransientError
from streamcrawl_runtime.ports.loop import Output, Record
from streamcrawl_runtime.ports.state import HostState, LeaseMarks, UrlState

from .fakes import Reply, ScriptedHTTP, TinyDNS

HOST = "site.test"


@pytest.fixture(scope="module")
def dns_server() -> Iterator[TinyDNS]:
    srv = TinyDNS({HOST: "127.0.0.1", "other.test": "127.0.0.1", "far.test": "10.1.2.3"},
                  servfail={"broken.test"})
    yield srv
    srv.close()


@pytest.fixture
def web() -> Iterator[ScriptedHTTP]:
    srv = ScriptedHTTP()
    yield srv
    srv.close()


class Rig:
    def __init__(self, dns_port: int, web: ScriptedHTTP, max_body: int = 10 * 1024 * 1024,
                 read_timeout: float = 5.0, blobs: object | None = None,
                 inline_max: int = DEFAULT_INLINE_BODY_MAX_BYTES, soft404_probe: str = "always") -> None:
        # "always" (probe every host before its pages): the probe's own tests below; the default policy
        # ("suspect": probe once a page looks like a "not found" page) has its tests of its own
        self.web = web
        self.state = MemoryCrawlState()
        self.blobs = blobs or MemoryBlobStore()
        self.resolver = Resolver("127.0.0.1", dns_port, 1.0, parse_networks("127.0.0.0/8"))
        self.client = make_client(16)
        self.http = HttpFetcher(self.client, self.resolver, DEFAULT_USER_AGENT, 1.0, read_timeout, 10.0)

        async def fetch_robots(url: str, hops: RobotsHops) -> tuple[int | None, bytes | None]:
            return await self.http.fetch_robots(url, 500 * 1024, 5, hops=hops)

        self.robots = RobotsCache(self.state, fetch_robots, RobotsConfig())  # type: ignore[arg-type]
        self.handler = FetcherHandler(self.http, self.robots, self.state, self.blobs,  # type: ignore[arg-type]
                                      FetchPolicy(max_body_bytes=max_body, inline_body_max_bytes=inline_max,
                                                  soft404_probe=soft404_probe))  # type: ignore[arg-type]

    def url(self, path: str, host: str = HOST) -> str:
        return f"http://{host}:{self.web.port}{path}"

    def allow_all(self, host: str = HOST, soft404: str | None = "none") -> None:
        """robots.txt known (a 404: everything allowed) and, unless soft404 is None, the probe answer too."""
        asyncio.run(self.state.host_put_robots(host, 404, None, time.time(), None))
        if soft404 is not None:
            asyncio.run(self.state.host_put_soft404(host, soft404))

    def request(self, path: str, host: str = HOST, **kw: object) -> FetchRequest:
        url = self.url(path, host)
        # every dispatch carries a new lease, as the frontier's do
        fields: dict[str, object] = {"lease_expires_at": time.time() + 60, "lease_id": uuid.uuid4().hex, **kw}
        return FetchRequest(url=url, host=host, url_fp=url_fingerprint(url), **fields)  # type: ignore[arg-type]

    def run(self, req: FetchRequest) -> FetchResult:
        async def go() -> FetchResult:
            rec = Record("t", 0, 0, req.host, b"")
            outs = await self.handler.handle(rec, req)
            await self.client.aclose()
            assert outs[0].topic == FETCH_RESULTS and outs[0].key == req.host
            # a redirect's target (and, on a robots.txt fetch, the sitemaps) as candidates of their hosts; the
            # WARC writer's record of a fetch that leaves nothing to parse
            self.extra = [o for o in outs[1:] if o.topic == URL_CANDIDATES]
            self.archived = [o for o in outs[1:] if o.topic == ARCHIVE]
            assert len(self.extra) + len(self.archived) == len(outs) - 1
            res = outs[0].value
            assert isinstance(res, FetchResult)
            return res

        # the frontier persists the lease before it sends a request (the fetcher checks it: fencing)
        hs = self.state.hosts.setdefault(req.host, HostState(req.host))
        hs.lease_id = req.lease_id
        # a fresh client per run: a client's connections are bound to the event loop that used them
        self.client = self.http.client = make_client(16)
        return asyncio.run(go())


@pytest.fixture
def rig(dns_server: TinyDNS, web: ScriptedHTTP) -> Rig:
    return Rig(dns_server.port, web)


def test_lease_expired_makes_no_request(rig: Rig) -> None:
    res = rig.run(rig.request("/a", lease_expires_at=time.time() - 1))
    assert res.outcome == "lease_expired"
    assert rig.web.seen == []


def test_request_waits_for_not_before_and_reports_when_it_ended(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/a"] = Reply(200, b"<html>a</html>", {"Content-Type": "text/html"})
    not_before = time.time() + 0.3
    res = rig.run(rig.request("/a", not_before=not_before))
    assert res.outcome == "fetched"
    [seen] = [s for s in rig.web.seen if s.path == "/a"]
    assert seen.at >= not_before  # the server saw nothing before the host's time
    assert res.ended_at is not None and seen.at <= res.ended_at <= time.time()


def test_request_dispatched_far_too_early_is_returned_unsent(rig: Rig) -> None:
    rig.allow_all()
    res = rig.run(rig.request("/a", not_before=time.time() + 60))
    assert res.outcome == "lease_expired" and "ahead of its time" in (res.error or "")
    assert rig.web.seen == []


def test_first_request_fetches_robots_only_then_page(rig: Rig) -> None:
    rig.web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n")
    rig.web.routes["/page"] = Reply(200, b"<html><title>x</title></html>",
                                   {"Content-Type": "text/html; charset=utf-8", "ETag": '"v1"',
                                    "Last-Modified": "Wed, 21 Oct 2015 07:28:00 GMT", "X-Robots-Tag": "noarchive"})
    first = rig.run(rig.request("/page"))
    assert first.outcome == "robots_fetched" and first.status == 200 and first.crawl_delay_s == 2.0
    assert rig.web.pages() == []
    assert rig.state.hosts[HOST].robots_status == 200 and rig.state.hosts[HOST].crawl_delay_s == 2.0

    probe = rig.run(rig.request("/page"))  # then the soft-404 probe, under its own lease
    assert probe.outcome == "probe_fetched" and probe.status == 404 and probe.crawl_delay_s == 2.0
    assert rig.web.pages() == [] and len(rig.web.probes()) == 1

    second = rig.run(rig.request("/page"))
    assert second.outcome == "fetched" and second.status == 200
    assert second.crawl_delay_s == 2.0
    assert second.content_type == "text/html; charset=utf-8" and second.etag == '"v1"'
    assert second.last_modified == "Wed, 21 Oct 2015 07:28:00 GMT" and second.x_robots_tag == "noarchive"
    assert second.content_length == len(b"<html><title>x</title></html>") and not second.truncated
    assert second.storage_key is not None and second.content_hash is not None
    assert rig.blobs.get_page(second.storage_key) == b"<html><title>x</title></html>"  # type: ignore[attr-defined]
    assert second.fetch_s > 0 and second.started_at > 0
    seen = rig.web.seen[-1]
    assert seen.headers["host"] == f"{HOST}:{rig.web.port}"
    assert seen.headers["user-agent"] == DEFAULT_USER_AGENT
    assert "gzip" in seen.headers["accept-encoding"]

    third = rig.run(rig.request("/private/x"))
    assert third.outcome == "robots_disallowed" and third.crawl_delay_s == 2.0
    assert rig.web.pages() == ["/page"]
    assert [s.path for s in rig.web.seen].count("/robots.txt") == 1 and len(rig.web.probes()) == 1


def test_robots_reused_from_crawl_state_after_restart(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    web.routes["/robots.txt"] = Reply(200, b"User-agent: streamcrawl\nDisallow: /no\n")
    web.routes["/yes"] = Reply(200, b"ok")
    a = Rig(dns_server.port, web)
    assert a.run(a.request("/yes")).outcome == "robots_fetched"
    b = Rig(dns_server.port, web)
    b.state = a.state
    b.robots.state = b.handler.state = a.state
    assert b.run(b.request("/no")).outcome == "robots_disallowed"
    assert b.run(b.request("/yes")).outcome == "probe_fetched"
    assert b.run(b.request("/yes")).outcome == "fetched"
    c = Rig(dns_server.port, web)  # the probe answer is reused after a restart too
    c.state = c.robots.state = c.handler.state = a.state
    assert c.run(c.request("/yes")).outcome == "fetched"
    assert [s.path for s in web.seen].count("/robots.txt") == 1 and len(web.probes()) == 1


def test_robots_5xx_is_unavailable_and_no_page_request(rig: Rig) -> None:
    rig.web.routes["/robots.txt"] = Reply(503, b"busy")
    res = rig.run(rig.request("/page"))
    assert res.outcome == "robots_unavailable" and res.status == 503
    res2 = rig.run(rig.request("/page"))
    assert res2.outcome == "robots_unavailable"
    assert rig.web.pages() == [] and len(rig.web.seen) == 1


def test_robots_redirect_is_followed(rig: Rig) -> None:
    rig.web.routes["/robots.txt"] = Reply(301, b"", {"Location": "/real-robots.txt"})
    rig.web.routes["/real-robots.txt"] = Reply(200, b"User-agent: *\nDisallow: /\n")
    assert rig.run(rig.request("/page")).outcome == "robots_disallowed"
    assert [s.path for s in rig.web.seen] == ["/robots.txt", "/real-robots.txt"]


def test_robots_404_allows_everything(rig: Rig) -> None:
    assert rig.run(rig.request("/page")).outcome == "robots_fetched"
    assert rig.run(rig.request("/page")).outcome == "probe_fetched"
    rig.web.routes["/page"] = Reply(200, b"hi")
    assert rig.run(rig.request("/page")).outcome == "fetched"


def test_redirect_is_reported_not_followed(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/old"] = Reply(301, b"", {"Location": "../New/Place?utm_source=x#frag"})
    res = rig.run(rig.request("/old"))
    assert res.outcome == "redirect" and res.status == 301
    assert res.redirect_to == f"http://{HOST}:{rig.web.port}/New/Place"
    assert rig.web.pages() == ["/old"]


@pytest.mark.parametrize("location", ["mailto:someone@example.com", "ftp://site.test/file", "javascript:alert(1)",
                                      "file:///etc/passwd", "data:text/html,hi", "http://"])
def test_a_redirect_to_a_non_http_location_is_refused(rig: Rig, location: str) -> None:
    rig.allow_all()
    rig.web.routes["/bad"] = Reply(302, b"", {"Location": location})
    res = rig.run(rig.request("/bad"))
    assert res.outcome == "redirect_refused" and res.status == 302 and res.redirect_to is None
    assert res.error and "Location" in res.error


def test_a_cross_scheme_redirect_is_an_ordinary_hop(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/s"] = Reply(301, b"", {"Location": "https://site.test/secure"})
    res = rig.run(rig.request("/s", redirect_chain=[11, 12]))
    assert res.outcome == "redirect" and res.redirect_to == "https://site.test/secure"
    assert res.redirect_chain == [11, 12]  # echoed: dedup appends this URL for the target


def test_redirect_hop_limit_and_loops_use_the_chain_the_request_carries(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/hop"] = Reply(302, b"", {"Location": "/next"})
    five = rig.run(rig.request("/hop", redirect_chain=[1, 2, 3, 4, 5]))  # reached by 5 hops already
    assert five.outcome == "redirect_limit" and five.redirect_to == rig.url("/next")
    four = rig.run(rig.request("/hop", redirect_chain=[1, 2, 3, 4]))
    assert four.outcome == "redirect" and four.redirect_to == rig.url("/next")
    back = rig.run(rig.request("/hop", redirect_chain=[url_fingerprint(rig.url("/next"))]))
    assert back.outcome == "redirect_loop" and "loop" in (back.error or "")
    rig.web.routes["/self"] = Reply(307, b"", {"Location": "/self"})
    assert rig.run(rig.request("/self")).outcome == "redirect_loop"
    assert rig.web.pages().count("/hop") == 3  # each request was made once; no hop was followed here


def test_conditional_get_from_url_state(rig: Rig) -> None:
    rig.allow_all()
    req = rig.request("/cond", kind="refresh")
    rig.state.urls[(HOST, req.url_fp)] = UrlState(HOST, req.url_fp, req.url, etag='"abc"',
                                                  last_modified="Wed, 21 Oct 2015 07:28:00 GMT")
    rig.web.routes["/cond"] = lambda h: Reply(304) if h.get("if-none-match") == '"abc"' else Reply(200, b"new")
    res = rig.run(req)
    assert res.outcome == "not_modified" and res.status == 304
    assert rig.web.seen[-1].headers["if-modified-since"] == "Wed, 21 Oct 2015 07:28:00 GMT"


def test_discovery_fetch_does_not_read_url_state(rig: Rig) -> None:
    """A discovery was never fetched: no validators to look up, so no Cassandra read per new URL."""
    rig.allow_all()
    req = rig.request("/new")
    rig.state.urls[(HOST, req.url_fp)] = UrlState(HOST, req.url_fp, req.url, etag='"stale"')
    rig.web.routes["/new"] = Reply(200, b"body")
    res = rig.run(req)
    assert res.outcome == "fetched" and "if-none-match" not in rig.web.seen[-1].headers


def test_conditional_get_from_request_fields(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/cond"] = lambda h: Reply(304) if h.get("if-none-match") == '"r"' else Reply(200, b"new")
    res = rig.run(rig.request("/cond", etag='"r"'))
    assert res.outcome == "not_modified" and res.etag == '"r"'


def test_429_retry_after(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/slow-down"] = Reply(429, b"", {"Retry-After": "120"})
    res = rig.run(rig.request("/slow-down"))
    assert res.outcome == "http_error" and res.status == 429 and res.retry_after_s == 120.0


def test_404_is_http_error_without_body_stored(rig: Rig) -> None:
    rig.allow_all()
    res = rig.run(rig.request("/missing"))
    assert res.outcome == "http_error" and res.status == 404 and res.storage_key is None


def test_body_cap_truncates(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    rig = Rig(dns_server.port, web, max_body=1000)
    rig.allow_all()
    web.routes["/big"] = Reply(200, b"x" * 50_000, {"Content-Type": "text/plain"})
    res = rig.run(rig.request("/big"))
    assert res.outcome == "fetched" and res.truncated and res.content_length == 1000


def test_gzip_body_is_decoded(rig: Rig) -> None:
    rig.allow_all()
    body = b"<p>hello</p>" * 100
    rig.web.routes["/gz"] = Reply(200, gzip.compress(body), {"Content-Encoding": "gzip"})
    res = rig.run(rig.request("/gz"))
    assert res.outcome == "fetched" and res.content_length == len(body)
    assert rig.blobs.get_page(res.storage_key) == body  # type: ignore[attr-defined,arg-type]


def test_read_timeout_is_network_error(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    rig = Rig(dns_server.port, web, read_timeout=0.3)
    rig.allow_all()
    web.routes["/slow"] = Reply(200, b"late", delay_s=1.0)
    res = rig.run(rig.request("/slow"))
    assert res.outcome == "network_error" and res.status is None and res.error


def test_dns_nxdomain_and_servfail(rig: Rig, dns_server: TinyDNS) -> None:
    res = rig.run(rig.request("/", host="nowhere.test"))
    assert res.outcome == "dns_error" and "NXDOMAIN" in (res.error or "")
    res = rig.run(rig.request("/", host="broken.test"))
    assert res.outcome == "dns_error" and "SERVFAIL" in (res.error or "")


def test_dns_timeout_is_a_network_error_the_frontier_retries(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    """No answer says nothing about the name: network_error (retried), not dns_error (dropped)."""
    silent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)  # bound, never answers
    silent.bind(("127.0.0.1", 0))
    try:
        rig = Rig(silent.getsockname()[1], web)  # the resolver gives up after 1 s
        res = rig.run(rig.request("/"))
    finally:
        silent.close()
    assert res.outcome == "network_error" and "timeout" in (res.error or "")
    assert rig.web.seen == []


def test_address_outside_allowed_networks_is_refused(rig: Rig) -> None:
    req = rig.request("/", host="far.test")
    res = rig.run(req)
    assert res.outcome == "blocked_address" and "private address 10.1.2.3" in (res.error or "")
    assert res.status is None and rig.web.seen == []
    assert rig.state.urls[("far.test", req.url_fp)].status == "blocked"  # the fetcher records it (not dedup)


@pytest.mark.parametrize(("answer", "why"), [
    ("127.0.0.1", "loopback"), ("169.254.169.254", "metadata"), ("10.0.0.7", "private"),
    ("100.100.100.200", "metadata"), ("192.168.1.1", "private"), ("0.0.0.0", "this-network")])
def test_the_default_guard_refuses_a_public_name_that_resolves_inside(web: ScriptedHTTP, answer: str,
                                                                       why: str) -> None:
    """No allow-list (the settings' and the chart's default): a public-looking name whose DNS answers a
    loopback, private or metadata address gets no connection at all, robots.txt included."""
    name = "www.shop-example.com"
    dns_srv = TinyDNS({name: answer})
    try:
        settings = FetcherSettings(dns_server="127.0.0.1", dns_port=dns_srv.port)
        assert settings.allowed_networks == ""
        handler = build_handler(settings, state=MemoryCrawlState(), blobs=MemoryBlobStore())  # type: ignore[arg-type]
        url = f"http://{name}:{web.port}/"
        req = FetchRequest(url=url, host=name, url_fp=url_fingerprint(url), lease_id="L",
                           lease_expires_at=time.time() + 60)

        async def go() -> FetchResult:
            try:
                return await handler.fetch(req, maybe_replay=False)
            finally:
                await handler.http.aclose()

        res = asyncio.run(go())
    finally:
        dns_srv.close()
    assert res.outcome == "blocked_address" and why in (res.error or "") and answer in (res.error or "")
    assert web.seen == []  # not even robots.txt


def test_the_connection_goes_to_the_checked_address(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    """The request is sent to the address the guard checked: the HTTP client never resolves the name itself
    (a name only our DNS knows still works), so a second, rebinding answer has no way in."""
    dns_server.records["only-ours.test"] = "127.0.0.1"
    rig = Rig(dns_server.port, web)
    rig.allow_all("only-ours.test")
    web.routes["/x"] = Reply(200, b"<html>x</html>", {"Content-Type": "text/html"})
    res = rig.run(rig.request("/x", host="only-ours.test"))
    assert res.outcome == "fetched"
    assert web.seen[-1].headers["host"] == f"only-ours.test:{web.port}"  # the name travels in Host only


def test_connection_refused_is_network_error(rig: Rig) -> None:
    rig.allow_all("other.test")
    req = FetchRequest(url="http://other.test:1/x", host="other.test", url_fp=1, lease_id="L",
                       lease_expires_at=time.time() + 60)
    assert rig.run(req).outcome == "network_error"


def test_malformed_url_is_http_error(rig: Rig) -> None:
    req = FetchRequest(url="ftp://site.test/x", host=HOST, url_fp=1, lease_id="L", lease_expires_at=time.time() + 60)
    res = rig.run(req)
    assert res.outcome == "http_error" and "malformed" in (res.error or "")


class DownStore(MemoryBlobStore):
    def store_page(self, body: bytes) -> StoredPage:
        raise TransientError("s3 down")


def test_blob_store_down_raises_transient(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    rig = Rig(dns_server.port, web, blobs=DownStore())
    rig.allow_all()
    web.routes["/p"] = Reply(200, b"body")
    with pytest.raises(TransientError):
        rig.run(rig.request("/p"))


# ------------------------------------------------------------------ the body inline in the result

PAGE = b"<html><head><title>T</title></head><body>" + b"<p>some words</p><a href=/a>a</a>" * 300 + b"</body></html>"


class SpyStore(MemoryBlobStore):
    """Records the order of writes and reads (the body must be in the store before a result exists)."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def get_page(self, key: str) -> bytes:
        self.reads.append(key)
        return super().get_page(key)


def test_small_body_is_stored_and_carried_in_the_result(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    rig = Rig(dns_server.port, web, blobs=SpyStore())
    rig.allow_all()
    web.routes["/p"] = Reply(200, PAGE, {"Content-Type": "text/html"})
    res = rig.run(rig.request("/p"))
    assert res.outcome == "fetched" and res.storage_key is not None and res.body_gz is not None
    stored = rig.blobs.objects[res.storage_key]  # type: ignore[attr-defined]
    assert res.body_gz == stored == encode_page(PAGE)  # the very bytes in the store
    assert decode_page(res.body_gz) == PAGE and len(res.body_gz) < len(PAGE)


@pytest.mark.parametrize("warc", [True, False])
def test_a_content_coded_body_is_also_kept_as_received_for_the_warc_writer(
        dns_server: TinyDNS, web: ScriptedHTTP, warc: bool) -> None:
    """As received: a small one travels in the result (wire_body, no blob), a large one is a blob."""
    rig = Rig(dns_server.port, web)
    rig.handler.policy = dataclasses.replace(rig.handler.policy, warc=warc)
    rig.allow_all()
    coded = gzip.compress(PAGE, mtime=0)
    big_page = PAGE + random.Random(7).randbytes(ARCHIVE_INLINE_MAX_BYTES + 1024).hex().encode()
    big = gzip.compress(big_page, mtime=0)
    assert len(coded) <= ARCHIVE_INLINE_MAX_BYTES < len(big)
    web.routes["/gz"] = Reply(200, coded, {"Content-Type": "text/html", "Content-Encoding": "gzip"})
    web.routes["/big"] = Reply(200, big, {"Content-Type": "text/html", "Content-Encoding": "gzip"})
    web.routes["/plain"] = Reply(200, PAGE + b"<!-- 2 -->", {"Content-Type": "text/html"})
    gz, large, plain = rig.run(rig.request("/gz")), rig.run(rig.request("/big")), rig.run(rig.request("/plain"))
    assert gz.outcome == large.outcome == plain.outcome == "fetched"
    assert decode_page(rig.blobs.objects[gz.storage_key]) == PAGE  # type: ignore[attr-defined]  # decoded
    assert decode_page(rig.blobs.objects[large.storage_key]) == big_page  # type: ignore[attr-defined]
    assert plain.wire_key is None and plain.wire_hash == (plain.content_hash if warc else None)  # no 2nd object
    assert plain.wire_body is None
    if warc:
        assert gz.wire_hash == hashlib.sha256(coded).hexdigest() != gz.content_hash
        assert gz.wire_key is None and gz.wire_body == coded  # inline: no blob of its own
        assert large.wire_hash == hashlib.sha256(big).hexdigest() and large.wire_body is None
        assert large.wire_key is not None
        assert decode_page(rig.blobs.objects[large.wire_key]) == big  # type: ignore[attr-defined]  # as received
        assert len(rig.blobs.objects) == 4  # type: ignore[attr-defined]
    else:
        assert gz.wire_hash is None and gz.wire_key is None and gz.wire_body is None
        assert large.wire_hash is None and large.wire_key is None
        assert len(rig.blobs.objects) == 3  # type: ignore[attr-defined]


def test_duplicate_body_is_carried_too(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    rig = Rig(dns_server.port, web)
    rig.allow_all()
    web.routes["/p"] = Reply(200, PAGE, {"Content-Type": "text/html"})
    web.routes["/mirror"] = Reply(200, PAGE, {"Content-Type": "text/html"})
    first, second = rig.run(rig.request("/p")), rig.run(rig.request("/mirror"))
    assert first.storage_key == second.storage_key and first.body_gz == second.body_gz is not None


@pytest.mark.parametrize("margin,inline", [(0, True), (-1, False), (1, True)])
def test_inline_cap_boundary_is_the_stored_size(dns_server: TinyDNS, web: ScriptedHTTP, margin: int,
                                                inline: bool) -> None:
    body = PAGE + bytes(range(256)) * 40  # the cap counts gzip bytes, not the body's
    size = len(encode_page(body))
    rig = Rig(dns_server.port, web, inline_max=size + margin)
    rig.allow_all()
    web.routes["/p"] = Reply(200, body, {"Content-Type": "text/html"})
    res = rig.run(rig.request("/p"))
    assert res.outcome == "fetched" and res.storage_key is not None
    assert rig.blobs.get_page(res.storage_key) == body  # type: ignore[attr-defined]  # stored either way
    assert res.body_gz == (encode_page(body) if inline else None)


def test_inline_cap_zero_never_inlines(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    rig = Rig(dns_server.port, web, inline_max=0)
    rig.allow_all()
    web.routes["/p"] = Reply(200, b"", {"Content-Type": "text/html"})
    res = rig.run(rig.request("/p"))
    assert res.outcome == "fetched" and res.body_gz is None and res.storage_key is not None


def test_results_without_a_stored_body_carry_none(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/r"] = Reply(301, b"moved", {"Location": "/p"})
    rig.web.routes["/e"] = Reply(500, b"<html>error page</html>")
    assert rig.run(rig.request("/r")).body_gz is None
    assert rig.run(rig.request("/e")).body_gz is None
    assert rig.run(rig.request("/missing")).body_gz is None


@pytest.mark.parametrize("inline_max,reads", [(len(encode_page(PAGE)), 0), (len(encode_page(PAGE)) - 1, 1)])
def test_parser_reads_the_store_only_for_a_body_over_the_cap(dns_server: TinyDNS, web: ScriptedHTTP,
                                                             inline_max: int, reads: int) -> None:
    """Fetcher → JSON (as on Kafka) → parser: under the cap the parser never reads the store; over it, it
    reads it once; the parsed page is the same either way."""
    blobs = SpyStore()
    rig = Rig(dns_server.port, web, blobs=blobs, inline_max=inline_max)
    rig.allow_all()
    web.routes["/p"] = Reply(200, PAGE, {"Content-Type": "text/html; charset=utf-8"})
    res = rig.run(rig.request("/p"))
    assert (res.body_gz is None) == (reads == 1)
    wire = FetchResult.model_validate_json(res.model_dump_json().encode())
    assert wire == res
    [out] = asyncio.run(ParserHandler(blobs).handle(Record("t", 0, 0, HOST, b""), wire))
    page = out.value
    assert isinstance(page, ParsedPage) and blobs.reads == [res.storage_key] * reads
    assert page.title == "T" and page.out_links == [rig.url("/a")] and page.content_hash == res.content_hash


def test_inline_cap_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STREAMCRAWL_FETCHER_INLINE_BODY_MAX_BYTES", raising=False)
    assert FetcherSettings().inline_body_max_bytes == DEFAULT_INLINE_BODY_MAX_BYTES == 256 * 1024
    monkeypatch.setenv("STREAMCRAWL_FETCHER_INLINE_BODY_MAX_BYTES", "0")
    settings = FetcherSettings()
    assert settings.inline_body_max_bytes == 0
    handler = build_handler(settings, state=MemoryCrawlState(), blobs=MemoryBlobStore())  # type: ignore[arg-type]
    assert handler.policy.inline_body_max_bytes == 0
    asyncio.run(handler.http.client.aclose())
    for bad in (str(INLINE_BODY_LIMIT + 1), "-1"):
        monkeypatch.setenv("STREAMCRAWL_FETCHER_INLINE_BODY_MAX_BYTES", bad)
        with pytest.raises(ValidationError):
            FetcherSettings()


def test_robots_persist_failure_does_not_fail_the_lease(rig: Rig) -> None:
    async def broken(*_a: object) -> None:
        raise TransientError("cassandra down")

    rig.state.host_put_robots = broken  # type: ignore[method-assign]
    rig.web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    rig.web.routes["/p"] = Reply(200, b"ok")
    assert rig.run(rig.request("/p")).outcome == "robots_fetched"
    assert rig.run(rig.request("/p")).outcome == "probe_fetched"
    assert rig.run(rig.request("/p")).outcome == "fetched"  # rules kept in memory


def test_literals_and_allowed_networks(dns_server: TinyDNS) -> None:
    """Address literals skip DNS and are checked against allowed_networks every time (the memo of allowed
    addresses never lets an outside one through); a name that starts with a digit is still a name."""
    dns_server.records.setdefault("1digit.test", "127.0.0.1")
    resolver = Resolver("127.0.0.1", dns_server.port, 1.0, allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),))

    async def go() -> None:
        for _ in range(2):
            assert await resolver.resolve("127.0.0.9") == "127.0.0.9"
            assert await resolver.resolve("1digit.test") == "127.0.0.1"
            for outside in ("10.0.0.1", "[::1]"):
                with pytest.raises(AddressNotAllowed):
                    await resolver.resolve(outside)

    asyncio.run(go())
    assert dns_server.queries.count("1digit.test") == 1


def test_the_resolver_uses_the_first_address_the_guard_accepts(dns_server: TinyDNS) -> None:
    """Of several addresses an accepted one is used (an RRset has no order); an IPv6-only name resolves through AAAA; an
    IPv4-mapped answer is connected to as the IPv4 address it is; refused answers raise."""
    dns_server.records.update({"multi.test": ["10.0.0.1", "169.254.169.254", "127.0.0.5"],
                               "v6only.test": "::1", "mapped.test": "::ffff:127.0.0.3",
                               "allbad.test": ["10.0.0.1", "192.168.0.1"]})
    guarded = Resolver("127.0.0.1", dns_server.port, 1.0, parse_networks("127.0.0.0/8"))
    with_v6 = Resolver("127.0.0.1", dns_server.port, 1.0, parse_networks("127.0.0.0/8, ::1/128"))

    async def go() -> None:
        assert await guarded.resolve("multi.test") == "127.0.0.5"
        assert await guarded.resolve("mapped.test") == "127.0.0.3"
        assert await with_v6.resolve("v6only.test") == "::1"
        with pytest.raises(AddressNotAllowed, match="loopback address ::1"):
            await guarded.resolve("v6only.test")
        with pytest.raises(AddressNotAllowed, match=r"private address (10\.0\.0\.1|192\.168\.0\.1)"):
            await guarded.resolve("allbad.test")
        assert await guarded.resolve("[::ffff:127.0.0.9]") == "127.0.0.9"
        for literal in ("[::ffff:169.254.169.254]", "[64:ff9b::a9fe:a9fe]", "169.254.169.254", "[fe80::1]"):
            with pytest.raises(AddressNotAllowed):
                await with_v6.resolve(literal)

    asyncio.run(go())


def test_an_ipv6_only_host_is_fetched_over_ipv6_when_allowed(dns_server: TinyDNS) -> None:
    """The checked IPv6 address goes into the request URL in brackets; the Host header keeps the name."""
    dns_server.records["six.test"] = "::1"

    async def go() -> tuple[int, str]:
        async def handler(request: aioweb.BaseRequest) -> aioweb.StreamResponse:
            return aioweb.Response(text=request.host)


        low = aioweb.Server(handler, access_log=None)
        server = await asyncio.get_running_loop().create_server(low, host="::1", port=0)
        port = server.sockets[0].getsockname()[1]
        resolver = Resolver("127.0.0.1", dns_server.port, 1.0, parse_networks("::1/128"))
        http = HttpFetcher(make_client(4), resolver, DEFAULT_USER_AGENT, 2.0, 2.0, 5.0)
        try:
            resp = await http.get(f"http://six.test:{port}/", 1000)
        finally:
            await http.aclose()
            server.close()
            await low.shutdown(0.5)
        return resp.status, resp.body.decode()

    status, host_seen = asyncio.run(go())
    assert status == 200 and host_seen.startswith("six.test:")


def test_dns_positive_and_negative_answers_are_cached(dns_server: TinyDNS) -> None:
    resolver = Resolver("127.0.0.1", dns_server.port, 1.0, parse_networks("127.0.0.0/8, ::1/128"))
    before = list(dns_server.queries)  # the server is shared by the module's tests

    async def go() -> None:
        for _ in range(3):
            assert await resolver.resolve("other.test") == "127.0.0.1"
            with pytest.raises(DnsError):
                await resolver.resolve("gone.test")
        assert await resolver.resolve("[::1]") == "::1"  # literals need no lookup

    asyncio.run(go())
    new = dns_server.queries[len(before):]
    assert new.count("other.test") == 1 and new.count("gone.test") == 1


def test_replayed_request_with_a_superseded_lease_is_not_fetched(rig: Rig) -> None:
    """After a crash the fetcher may re-consume a request it already executed; the host's current lease
    (persisted by the frontier) is another one by then, so no second request reaches the host."""
    rig.allow_all()
    rig.web.routes["/x"] = Reply(200, b"body")
    req = rig.request("/x")
    first = rig.run(req)
    assert first.outcome == "fetched"
    before = len(rig.web.pages())

    async def superseded(host: str) -> LeaseMarks:
        return LeaseMarks("L2", "L2")  # the frontier has leased the host again since (and L2 was fetched)

    rig.state.host_lease = superseded  # type: ignore[method-assign]

    async def go() -> Sequence[Output]:
        try:
            return await rig.handler.handle(Record("t", 0, 0, req.host, b""), req)
        finally:
            await rig.http.client.aclose()

    rig.http.client = make_client(16)
    [out] = asyncio.run(go())
    assert out.value.outcome == "lease_expired" and len(rig.web.pages()) == before


def test_replay_of_a_request_finished_under_the_current_lease_makes_no_second_request(rig: Rig) -> None:
    """Killed after its result was produced but before the offset commit, the fetcher re-consumes the
    request; the frontier has not handled the result yet, so the lease is still current. The lease's
    work is marked finished (host_state.fetched_lease, written before the result): no second request,
    no second result (the first one is in Kafka)."""
    rig.allow_all()
    rig.web.routes["/x"] = Reply(200, b"body")
    req = rig.request("/x")
    assert rig.run(req).outcome == "fetched"
    assert ("host_put_fetched_lease", req.host, req.lease_id) in rig.state.calls
    before = len(rig.web.pages())

    async def replay() -> Sequence[Output]:
        return await rig.handler.handle(Record("t", 0, 0, req.host, b""), req)  # fresh=False: maybe a replay

    assert asyncio.run(replay()) == () and len(rig.web.pages()) == before
    # A replayed request whose lease is current but was never started (it waited in the fetcher when the
    # crash came) is fetched normally.
    other = rig.request("/x")
    rig.state.hosts[req.host].lease_id = other.lease_id
    assert rig.run(other).outcome == "fetched" and len(rig.web.pages()) == before + 1


def test_replay_of_a_request_cut_short_by_a_crash_is_not_repeated_and_reports_how_long_it_may_have_run(
        rig: Rig) -> None:
    """The fetcher dies while the host serves a request (kill -9: the task just stops). The replay finds the
    lease started but not finished: no second request to a host that may still be busy with the first, and
    an `interrupted` result that says since when it ran, for the frontier's politeness delay. A second replay
    is then skipped like any finished lease."""
    rig.allow_all()
    rig.web.routes["/slow"] = Reply(200, b"body", delay_s=5.0)
    req = rig.request("/slow")
    hs = rig.state.hosts.setdefault(req.host, HostState(req.host))
    hs.lease_id = req.lease_id

    async def killed_mid_request() -> float:
        task = asyncio.ensure_future(rig.handler.handle(Record("t", 0, 0, req.host, b""), req))
        while "/slow" not in rig.web.pages():  # the host has the request
            await asyncio.sleep(0.01)
        task.cancel()
        killed = time.time()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await rig.http.client.aclose()
        return killed

    rig.http.client = make_client(16)
    t0 = time.time()
    killed = asyncio.run(killed_mid_request())
    assert rig.web.pages().count("/slow") == 1
    started_lease, started_at = rig.state.started_leases[req.host]
    assert started_lease == req.lease_id and t0 - 0.001 <= started_at <= killed
    assert not [c for c in rig.state.calls if c[0] == "host_put_fetched_lease"]
    time.sleep(0.3)

    async def replay() -> Sequence[Output]:
        try:
            return await rig.handler.handle(Record("t", 0, 0, req.host, b""), req)  # fresh=False
        finally:
            await rig.http.client.aclose()

    rig.http.client = make_client(16)
    [out] = asyncio.run(replay())
    res = out.value
    assert isinstance(res, FetchResult) and res.outcome == "interrupted" and res.status is None
    assert res.started_at == pytest.approx(started_at, abs=0.002)  # the mark keeps milliseconds
    assert res.ended_at is not None and res.ended_at >= killed + 0.3
    assert res.fetch_s == pytest.approx(res.ended_at - res.started_at, abs=0.002) and res.fetch_s >= 0.3
    assert rig.web.pages().count("/slow") == 1  # no second request
    assert ("host_put_fetched_lease", req.host, req.lease_id) in rig.state.calls
    rig.http.client = make_client(16)
    assert asyncio.run(replay()) == ()  # replayed again: finished


def test_every_request_is_marked_started_under_its_lease_before_it_goes_out(rig: Rig) -> None:
    """robots.txt, the soft-404 probe and the page: each request is preceded by its started mark."""
    rig.web.routes["/robots.txt"] = Reply(404)
    rig.web.routes["/x"] = Reply(200, b"body")
    marks: list[tuple[str, int]] = []
    put = rig.state.host_put_started_lease

    async def mark(host: str, lease_id: str, at: float) -> None:
        marks.append((lease_id, len(rig.web.seen)))  # how many requests the host had seen by then
        await put(host, lease_id, at)

    rig.state.host_put_started_lease = mark  # type: ignore[method-assign]
    outcomes = []
    for _ in range(3):
        req = rig.request("/x")
        outcomes.append(rig.run(req).outcome)
        assert marks[-1][0] == req.lease_id
    assert outcomes == ["robots_fetched", "probe_fetched", "fetched"]
    assert [n for _, n in marks] == [0, 1, 2]  # each mark before its request reached the host
    assert len(rig.web.seen) == 3


def test_no_request_goes_out_in_the_last_seconds_of_its_lease(rig: Rig) -> None:
    """The frontier reads the started mark when a lease expires; a request sent just before that could be
    missed by its read. The fetcher sends none within lease_guard_s of the expiry."""
    rig.allow_all()
    rig.web.routes["/x"] = Reply(200, b"body")
    res = rig.run(rig.request("/x", lease_expires_at=time.time() + 3.0))
    assert res.outcome == "lease_expired" and rig.web.pages() == []
    assert not [c for c in rig.state.calls if c[0] == "host_put_fetched_lease"]
    assert rig.run(rig.request("/x", lease_expires_at=time.time() + 30.0)).outcome == "fetched"


def test_no_finished_mark_for_a_request_that_was_fenced(rig: Rig) -> None:
    rig.allow_all()
    req = rig.request("/x", lease_expires_at=time.time() - 1)
    assert rig.run(req).outcome == "lease_expired"
    assert not [c for c in rig.state.calls if c[0] == "host_put_fetched_lease"]


def test_fresh_request_skips_the_lease_read(rig: Rig) -> None:
    """A request produced after the fetcher took its partition cannot be a replay: no lease read. One
    that may be a replay (fresh=False, the default) still reads it."""
    rig.allow_all()
    rig.web.routes["/x"] = Reply(200, b"body")
    rig.run(rig.request("/x"))  # robots.txt and the soft-404 probe are done; the host is ready
    reads: list[str] = []

    async def lease(host: str) -> LeaseMarks:
        reads.append(host)
        return LeaseMarks(None, None)  # would fence any request

    rig.state.host_lease = lease  # type: ignore[method-assign]

    async def go(req: FetchRequest, fresh: bool) -> Sequence[Output]:
        try:
            return await rig.handler.handle(Record("t", 0, 0, req.host, b"", fresh=fresh), req)
        finally:
            await rig.http.client.aclose()

    rig.http.client = make_client(16)
    [out] = asyncio.run(go(rig.request("/x"), True))
    assert out.value.outcome == "fetched" and reads == []
    rig.http.client = make_client(16)
    [out] = asyncio.run(go(rig.request("/x"), False))
    assert out.value.outcome == "lease_expired" and len(reads) == 1


def _fresh(rig: Rig, req: FetchRequest) -> FetchResult:
    """Handle ``req`` as a record produced after the fetcher took its partition (no replay read)."""
    async def go() -> Sequence[Output]:
        try:
            return await rig.handler.handle(Record("t", 0, 0, req.host, b"", fresh=True), req)
        finally:
            await rig.http.client.aclose()

    hs = rig.state.hosts.setdefault(req.host, HostState(req.host))
    hs.lease_id = req.lease_id
    rig.http.client = make_client(16)
    res = asyncio.run(go())[0].value
    assert isinstance(res, FetchResult)
    return res


def test_late_request_confirms_its_lease_and_a_fenced_one_sends_nothing(rig: Rig) -> None:
    """Early check (streamcrawl_core.lease): the frontier fenced the lease of a request that looked stuck
    (host_state's lease cleared) and put its URL back. The request, delivered at last, writes its started
    mark, reads the lease again, and sends nothing: lease_expired, no finished mark."""
    rig.allow_all()
    rig.web.routes["/x"] = Reply(200, b"body")
    req = rig.request("/x", confirm_after=time.time() - 1)
    put = rig.state.host_put_started_lease

    async def fenced_meanwhile(host: str, lease_id: str, at: float) -> None:
        await put(host, lease_id, at)
        rig.state.hosts[host].lease_id = None  # the frontier's fence, landed before the confirming read

    rig.state.host_put_started_lease = fenced_meanwhile  # type: ignore[method-assign]
    res = _fresh(rig, req)
    assert res.outcome == "lease_expired" and "superseded" in (res.error or "")
    assert rig.web.pages() == []
    assert rig.state.started_leases[HOST][0] == req.lease_id  # the mark the frontier's second read sees
    assert not [c for c in rig.state.calls if c[0] == "host_put_fetched_lease"]


def test_late_request_whose_lease_is_current_is_sent(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/x"] = Reply(200, b"body")
    reads: list[str] = []
    real = rig.state.host_lease

    async def lease(host: str) -> LeaseMarks:
        reads.append(host)
        return await real(host)

    rig.state.host_lease = lease  # type: ignore[method-assign]
    assert _fresh(rig, rig.request("/x", confirm_after=time.time() - 1)).outcome == "fetched"
    assert reads == [HOST] and rig.web.pages() == ["/x"]


def test_early_request_pays_no_confirming_read(rig: Rig) -> None:
    """The normal case: a request that starts before confirm_after (or one without it, from an older
    frontier) makes no lease read: the per-page statements are unchanged."""
    rig.allow_all()
    rig.web.routes["/x"] = Reply(200, b"body")
    reads: list[str] = []

    async def lease(host: str) -> LeaseMarks:
        reads.append(host)
        return LeaseMarks(None, None)  # would fence any request that read it

    rig.state.host_lease = lease  # type: ignore[method-assign]
    assert _fresh(rig, rig.request("/x", confirm_after=time.time() + 15)).outcome == "fetched"
    assert _fresh(rig, rig.request("/x")).outcome == "fetched"
    assert reads == []


# ------------------------------------------------------------------ soft 404s

SOFT404_PAGE = ("<html><head><title>Oops</title></head><body><h1>Sorry</h1>"
                "<p>The page {path} was not found (request {rid}).</p><a href=\"/\">home</a></body></html>")
HTML = {"Content-Type": "text/html; charset=utf-8"}


def soft404_host(web: ScriptedHTTP) -> None:
    """Every unknown path: 200 with the same "not found" template, echoing the path and a request id."""
    count = iter(range(1000, 10**6))
    web.default = lambda path: Reply(200, SOFT404_PAGE.format(path=path, rid=next(count)).encode(), HTML)


def soft404_total() -> float:
    return REGISTRY.get_sample_value("streamcrawl_fetcher_soft404_total") or 0.0


def test_probe_is_spent_under_the_lease_and_a_404_answer_means_none(rig: Rig) -> None:
    rig.allow_all(soft404=None)  # robots.txt known, the probe answer not
    rig.web.routes["/page"] = Reply(200, b"<p>hello</p>", HTML)
    res = rig.run(rig.request("/page"))
    assert res.outcome == "probe_fetched" and res.status == 404 and res.storage_key is None
    [probe] = rig.web.probes()
    assert re.fullmatch(r"/streamcrawl-probe-[0-9a-f]{16}\.html", probe)
    assert len(rig.web.seen) == 1  # one lease, one request: the page was not requested
    assert rig.state.hosts[HOST].soft404_signature == "none"
    # the answer is known: pages are fetched normally, the host is not probed again
    assert rig.run(rig.request("/page")).outcome == "fetched"
    assert rig.run(rig.request("/page", kind="refresh")).outcome == "fetched"
    assert rig.web.pages() == ["/page", "/page"] and len(rig.web.probes()) == 1


def test_probe_skipped_when_robots_disallows_it(rig: Rig) -> None:
    body = "User-agent: *\nDisallow: /streamcrawl-probe-\n"
    asyncio.run(rig.state.host_put_robots(HOST, 200, body, time.time(), None))
    soft404_host(rig.web)
    res = rig.run(rig.request("/missing.html"))
    assert res.outcome == "fetched"  # no signature: the page goes on, under this same lease
    assert rig.web.probes() == [] and rig.web.pages() == ["/missing.html"]
    assert rig.state.hosts[HOST].soft404_signature == "none"


def test_no_probe_when_robots_unavailable(rig: Rig) -> None:
    rig.web.routes["/robots.txt"] = Reply(503, b"busy")
    soft404_host(rig.web)
    for _ in range(3):
        assert rig.run(rig.request("/page")).outcome == "robots_unavailable"
    assert [s.path for s in rig.web.seen] == ["/robots.txt"]  # only robots.txt, never the probe
    assert rig.state.hosts[HOST].soft404_signature is None


def test_soft404_host_pages_matching_the_probe_are_soft_404(rig: Rig) -> None:
    rig.allow_all(soft404=None)
    soft404_host(rig.web)
    rig.web.routes["/real.html"] = Reply(200, b"<html><body><h1>Real</h1><p>Content.</p></body></html>", HTML)
    assert rig.run(rig.request("/real.html")).outcome == "probe_fetched"
    signature = rig.state.hosts[HOST].soft404_signature
    assert signature is not None and re.fullmatch(r"[0-9a-f]{16}", signature)
    [probe] = rig.archived  # the probe's 200 answer is stored for its WARC record
    probe_keys = {probe.value.storage_key}

    before = soft404_total()
    res = rig.run(rig.request("/docs/missing.html?q=1"))
    assert res.outcome == "soft_404" and res.status == 200 and res.content_type == HTML["Content-Type"]
    assert res.storage_key is None and res.content_hash is None and res.content_length > 0
    assert set(rig.blobs.objects) == probe_keys  # type: ignore[attr-defined]  # the body is not stored
    assert soft404_total() == before + 1

    real = rig.run(rig.request("/real.html"))
    assert real.outcome == "fetched" and real.storage_key is not None
    assert len(rig.web.probes()) == 1


def test_probe_answer_of_a_non_text_200_is_none(rig: Rig) -> None:
    rig.allow_all(soft404=None)
    rig.web.default = lambda path: Reply(200, b"\x89PNG...", {"Content-Type": "image/png"})
    assert rig.run(rig.request("/a.png")).outcome == "probe_fetched"
    assert rig.state.hosts[HOST].soft404_signature == "none"
    assert rig.run(rig.request("/a.png")).outcome == "fetched"


def test_probe_without_an_answer_is_none_and_backs_off(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    rig = Rig(dns_server.port, web, read_timeout=0.3)
    rig.allow_all(soft404=None)
    web.default = lambda path: Reply(200, b"late", delay_s=1.0)
    res = rig.run(rig.request("/page"))
    # no status: the frontier backs off as for any network error, then the page goes back in the queue
    assert res.outcome == "probe_fetched" and res.status is None and "probe" in (res.error or "")
    assert rig.state.hosts[HOST].soft404_signature == "none"


def test_new_robots_lifetime_means_a_new_probe(rig: Rig) -> None:
    """The probe answer lives as long as the robots.txt rules: re-fetched robots → probed again."""
    expired = time.time() - 2 * 86400
    asyncio.run(rig.state.host_put_robots(HOST, 404, None, expired, None))
    asyncio.run(rig.state.host_put_soft404(HOST, "none"))
    soft404_host(rig.web)
    rig.web.routes["/robots.txt"] = Reply(404, b"")
    assert rig.run(rig.request("/gone.html")).outcome == "robots_fetched"
    assert rig.state.hosts[HOST].soft404_signature is None
    assert rig.run(rig.request("/gone.html")).outcome == "probe_fetched"
    assert rig.run(rig.request("/gone.html")).outcome == "soft_404"


def test_corrupt_stored_answer_is_probed_again(rig: Rig) -> None:
    rig.allow_all(soft404="garbage")
    assert rig.run(rig.request("/page")).outcome == "probe_fetched"
    assert rig.state.hosts[HOST].soft404_signature == "none"


def test_soft404_matching_decodes_the_declared_charset(rig: Rig) -> None:
    rig.allow_all(soft404=None)
    latin = {"Content-Type": "text/html; charset=iso-8859-1"}
    rig.web.default = lambda path: Reply(200, f"<p>Désolé, {path} introuvable</p>".encode("latin-1"), latin)
    rig.web.routes["/odd"] = Reply(200, b"<p>caf\xe9</p>", {"Content-Type": "text/html; charset=rot13"})
    assert rig.run(rig.request("/x")).outcome == "probe_fetched"
    assert rig.run(rig.request("/nope.html")).outcome == "soft_404"
    assert rig.run(rig.request("/odd")).outcome == "fetched"  # a bogus charset falls back to UTF-8


def test_home_page_goes_before_the_probe_and_is_not_classified(rig: Rig) -> None:
    """A new host's first page does not wait a delay behind the probe: its home page (`/`) is fetched at
    once, unclassified (a site's root is its own content), and the probe takes the next lease."""
    rig.allow_all(soft404=None)
    soft404_host(rig.web)  # every unknown path answers the host's "not found" page with 200
    rig.web.routes["/"] = Reply(200, b"<html><body><h1>Home</h1><p>Welcome.</p></body></html>", HTML)
    home = rig.run(rig.request("/"))
    assert home.outcome == "fetched" and home.storage_key is not None
    assert rig.web.probes() == [] and rig.state.hosts[HOST].soft404_signature is None
    assert rig.run(rig.request("/docs/missing.html")).outcome == "probe_fetched"  # the next lease: the probe
    assert rig.run(rig.request("/docs/missing.html")).outcome == "soft_404"
    assert rig.run(rig.request("/?q=1")).outcome == "soft_404"  # only the bare root skips the check
    assert len(rig.web.probes()) == 1


# ------------------------------------------------------------------ the default: probe on suspicion


@pytest.fixture
def lazy(dns_server: TinyDNS, web: ScriptedHTTP) -> Rig:
    """The default policy: a host is probed only once one of its pages looks like a "not found" page."""
    rig = Rig(dns_server.port, web, soft404_probe="suspect")
    rig.allow_all(soft404=None)  # robots.txt known, the host not probed
    return rig


def suspects_total() -> float:
    return REGISTRY.get_sample_value("streamcrawl_fetcher_soft404_suspects_total") or 0.0


def test_the_default_policy_is_to_probe_on_suspicion() -> None:
    assert FetchPolicy().soft404_probe == "suspect" and FetcherSettings().soft404_probe == "suspect"
    handler = build_handler(FetcherSettings(soft404_probe="always"), MemoryCrawlState(), MemoryBlobStore())
    assert handler.policy.soft404_probe == "always"


def test_pages_that_do_not_look_like_not_found_go_without_a_probe(lazy: Rig) -> None:
    """Most hosts answer unknown paths with a real 404: their pages never wait a delay behind a probe."""
    for path in ("/a.html", "/b.html"):
        lazy.web.routes[path] = Reply(200, b"<html><head><title>Kafka</title></head><body><h1>Streams</h1>"
                                           b"<p>Partitions and offsets.</p></body></html>", HTML)
        res = lazy.run(lazy.request(path))
        assert res.outcome == "fetched" and res.storage_key is not None
    assert lazy.web.probes() == [] and lazy.web.pages() == ["/a.html", "/b.html"]
    assert lazy.state.hosts[HOST].soft404_signature is None  # still unknown: probed when a page asks for it


def test_a_page_that_looks_like_not_found_is_held_back_until_the_host_is_probed(lazy: Rig) -> None:
    soft404_host(lazy.web)
    lazy.web.routes["/real.html"] = Reply(200, b"<html><body><h1>Real</h1><p>Content.</p></body></html>", HTML)
    assert lazy.run(lazy.request("/real.html")).outcome == "fetched"  # no suspicion yet, no probe
    before = suspects_total()
    held = lazy.run(lazy.request("/docs/missing.html"))
    assert held.outcome == "soft404_suspect" and held.status == 200 and held.storage_key is None
    assert held.fetch_s > 0 and "probed first" in (held.error or "")
    assert suspects_total() == before + 1 and lazy.robots.probe_wanted(HOST)
    # nothing of it is published or stored but its WARC record (the response as received, with its body)
    [record] = lazy.archived
    assert record.value.outcome == "soft404_suspect" and record.value.url == lazy.url("/docs/missing.html")
    assert set(lazy.blobs.objects) >= {record.value.storage_key}  # type: ignore[attr-defined]
    assert lazy.run(lazy.request("/docs/missing.html")).outcome == "probe_fetched"  # the next lease: the probe
    assert not lazy.robots.probe_wanted(HOST) and lazy.state.hosts[HOST].soft404_signature not in (None, "none")
    assert lazy.run(lazy.request("/docs/missing.html")).outcome == "soft_404"  # judged against the signature
    assert lazy.run(lazy.request("/real.html")).outcome == "fetched"
    assert len(lazy.web.probes()) == 1


def test_a_false_suspicion_costs_one_probe_and_one_refetch(lazy: Rig) -> None:
    """A real page about errors on a host with real 404s: probed once, the page then fetched and kept."""
    lazy.web.routes["/errors.html"] = Reply(200, b"<html><head><title>Error handling</title></head>"
                                                 b"<body><p>Retries and dead letters.</p></body></html>", HTML)
    assert lazy.run(lazy.request("/errors.html")).outcome == "soft404_suspect"
    probe = lazy.run(lazy.request("/errors.html"))
    assert probe.outcome == "probe_fetched" and probe.status == 404
    res = lazy.run(lazy.request("/errors.html"))
    assert res.outcome == "fetched" and res.storage_key is not None
    assert lazy.run(lazy.request("/errors.html")).outcome == "fetched"  # the host's answer is known: no more
    assert lazy.web.pages() == ["/errors.html"] * 3 and len(lazy.web.probes()) == 1


def test_no_suspicion_on_the_home_page_nor_when_robots_forbids_the_probe(lazy: Rig) -> None:
    soft404_host(lazy.web)
    assert lazy.run(lazy.request("/")).outcome == "fetched"  # the root is a site's own content
    lazy.web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nDisallow: /streamcrawl-probe-\n")
    asyncio.run(lazy.state.host_put_robots(HOST, 200, "User-agent: *\nDisallow: /streamcrawl-probe-\n",
                                           time.time(), None))
    lazy.robots.forget(HOST)
    # no probe can be asked for: the page is judged as it is (no signature) and kept
    res = lazy.run(lazy.request("/missing.html"))
    assert res.outcome == "fetched" and lazy.state.hosts[HOST].soft404_signature == "none"
    assert lazy.web.probes() == []


def test_a_restarted_fetcher_forgets_the_wish_and_asks_again(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    """The wish to probe is memory only: after a restart the page is fetched again and asks again."""
    a = Rig(dns_server.port, web, soft404_probe="suspect")
    a.allow_all(soft404=None)
    soft404_host(web)
    assert a.run(a.request("/gone.html")).outcome == "soft404_suspect"
    b = Rig(dns_server.port, web, soft404_probe="suspect")
    b.state = a.state
    b.robots.state = a.state  # type: ignore[assignment]
    b.handler.state = a.state
    assert b.run(b.request("/gone.html")).outcome == "soft404_suspect"
    assert b.run(b.request("/gone.html")).outcome == "probe_fetched"
    assert b.run(b.request("/gone.html")).outcome == "soft_404"


# ------------------------------------------------------------------ the URL's status (not dedup's any more)

def test_redirect_records_its_status_and_sends_the_target_as_a_candidate(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/old"] = Reply(301, b"", {"Location": "HTTP://B.test/new"})
    req = rig.request("/old", depth=2)
    res = rig.run(req)
    assert res.outcome == "redirect"
    [cand] = rig.extra
    assert cand.key == "b.test"
    c = cand.value
    assert isinstance(c, UrlCandidates)
    assert (c.urls, c.url_fps, c.host, c.depth, c.source_url) == (
        ["http://b.test/new"], [url_fingerprint("http://b.test/new")], "b.test", 2, req.url)
    st = rig.state.urls[(HOST, req.url_fp)]
    assert (st.status, st.http_status, st.url) == ("redirected", 301, req.url)
    # one request for the fetched mark and the status (the adapter batches concurrent writes)
    assert [c[0] for c in rig.state.calls[-2:]] == ["host_put_fetched_lease", "url_put_outcome"]


def test_a_redirect_target_carries_the_chain_grown_by_this_url(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/hop2"] = Reply(302, b"", {"Location": "https://site.test/hop3"})
    req = rig.request("/hop2", redirect_chain=[11, 12])
    assert rig.run(req).outcome == "redirect"
    [cand] = rig.extra
    assert cand.value.redirect_chain == [11, 12, req.url_fp] and cand.value.urls == ["https://site.test/hop3"]


@pytest.mark.parametrize(("chain", "location", "outcome"), [
    ([1, 2, 3, 4, 5], "/next", "redirect_limit"), ([], "/stop", "redirect_loop"),
    ([], "ftp://site.test/f", "redirect_refused")])
def test_a_stopped_redirect_is_recorded_and_not_followed(rig: Rig, chain: list[int], location: str,
                                                          outcome: str) -> None:
    rig.allow_all()
    rig.web.routes["/stop"] = Reply(301, b"", {"Location": location})
    req = rig.request("/stop", redirect_chain=chain)
    assert rig.run(req).outcome == outcome
    assert rig.extra == []  # no candidate
    st = rig.state.urls[(HOST, req.url_fp)]
    assert (st.status, st.http_status) == (outcome, 301)


@pytest.mark.parametrize("status,expected", [(404, "error"), (304, "fetched"), (503, "error")])
def test_other_outcomes_record_only_the_status(rig: Rig, status: int, expected: str) -> None:
    rig.allow_all()
    rig.web.routes["/p"] = Reply(status, b"")
    req = rig.request("/p")
    st = rig.state.urls.setdefault((HOST, req.url_fp), UrlState(HOST, req.url_fp, req.url, 0, "fetched", 200,
                                                                 content_hash="h1", fetch_count=1))
    rig.run(req)
    assert (st.status, st.http_status, st.content_hash, st.fetch_count) == (expected, status, "h1", 1)
    assert rig.extra == []


@pytest.mark.parametrize(("before", "after"), [("noindex", "noindex"), ("duplicate", "duplicate"),
                                               ("sitemap", "sitemap"), ("error", "fetched"), (None, "fetched")])
def test_a_304_keeps_the_status_dedup_gave_the_page(rig: Rig, before: str | None, after: str) -> None:
    """A noindex page answered 304 on a recrawl stays noindex (never published), an alias stays one."""
    rig.allow_all()
    rig.web.routes["/p"] = Reply(304, b"")
    req = rig.request("/p")
    st = rig.state.urls.setdefault((HOST, req.url_fp), UrlState(HOST, req.url_fp, req.url, 0, before, 200,
                                                                 content_hash="h1", fetch_count=1))
    assert rig.run(req).outcome == "not_modified"
    assert (st.status, st.http_status) == (after, 304)


def test_the_host_views_outcome_row_keeps_at_most_2048_chars_of_a_url() -> None:
    from streamcrawl_fetcher.outcomes import SHOWN_URL_CHARS, shown_url

    assert shown_url("http://a.test/x") == "http://a.test/x"
    long = "http://a.test/?" + "a" * 65536
    assert len(shown_url(long)) == SHOWN_URL_CHARS and shown_url(long).endswith("…")


def test_robots_disallowed_is_recorded_and_fetched_pages_are_left_to_dedup(rig: Rig) -> None:
    asyncio.run(rig.state.host_put_robots(HOST, 200, "User-agent: *\nDisallow: /private/\n", time.time(), None))
    asyncio.run(rig.state.host_put_soft404(HOST, "none"))
    blocked = rig.request("/private/x")
    assert rig.run(blocked).outcome == "robots_disallowed"
    assert rig.state.urls[(HOST, blocked.url_fp)].status == "disallowed"
    rig.web.routes["/ok"] = Reply(200, b"<p>x</p>", {"Content-Type": "text/html"})
    ok = rig.request("/ok")
    assert rig.run(ok).outcome == "fetched"
    assert (HOST, ok.url_fp) not in rig.state.urls  # dedup writes a fetched page's row, from the parsed page


# ------------------------------------------------------------------ WARC records and sitemaps


def test_a_304_sends_a_revisit_of_the_last_capture_to_the_warc_writer(rig: Rig) -> None:
    rig.allow_all()
    req = rig.request("/cond", kind="refresh", etag='"abc"')
    rig.state.urls[(HOST, req.url_fp)] = UrlState(HOST, req.url_fp, req.url, content_hash="c" * 64,
                                                  fetched_at=1_700_000_000.0)
    rig.web.routes["/cond"] = lambda h: Reply(304) if h.get("if-none-match") == '"abc"' else Reply(200, b"new")
    res = rig.run(req)
    assert res.outcome == "not_modified" and res.exchange is not None
    [archived] = rig.archived
    rec = archived.value
    assert archived.key == res.exchange.id and rec.content_hash == "c" * 64
    assert rec.revisit_of is not None and rec.revisit_of.fetched_at == 1_700_000_000.0
    # the exchange is the one on the wire: the validator we sent, the status the server gave
    assert 'If-None-Match: "abc"' in rec.exchange.request_head and rec.exchange.response_head.startswith("HTTP/1.1 304")
    assert rec.exchange.ip.startswith("127.")


def test_errors_and_redirects_are_archived_as_responses(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/old"] = Reply(301, b"", {"Location": "/new"})
    rig.run(rig.request("/old"))
    [archived] = rig.archived
    assert archived.value.revisit_of is None and archived.value.out_links == [f"http://{HOST}:{rig.web.port}/new"]
    rig.run(rig.request("/missing"))
    assert [a.value.status for a in rig.archived] == [404]


def test_robots_fetch_sends_its_sitemaps_and_sitemap_xml_as_candidates(rig: Rig) -> None:
    rig.web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nDisallow:\nSitemap: /maps/a.xml.gz\n"
                                               b"Sitemap: http://other.test/s.xml\n")
    res = rig.run(rig.request("/page"))
    assert res.outcome == "robots_fetched" and [a.value.outcome for a in rig.archived] == ["robots_txt"]
    got = {(o.key, tuple(o.value.urls), o.value.depth, o.value.priority) for o in rig.extra}
    base = f"http://{HOST}:{rig.web.port}"
    assert ("other.test", ("http://other.test/s.xml",), 0, None) in got
    assert (HOST, (f"{base}/maps/a.xml.gz",), 0, None) in got  # declared: the depth rule's priority
    # the guess, which robots.txt did not declare, in a message of its own, at the lowest priority
    assert (HOST, (f"{base}/sitemap.xml",), 0, GUESSED_SITEMAP_PRIORITY) in got and len(got) == 3


def test_a_declared_sitemap_xml_is_not_also_sent_as_a_guess(rig: Rig) -> None:
    rig.web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nDisallow:\nSitemap: /sitemap.xml\n")
    assert rig.run(rig.request("/page")).outcome == "robots_fetched"
    base = f"http://{HOST}:{rig.web.port}"
    assert [(tuple(o.value.urls), o.value.priority) for o in rig.extra] == [((f"{base}/sitemap.xml",), None)]


def test_robots_txt_and_the_probe_are_archived_as_responses(rig: Rig) -> None:
    robots = b"User-agent: *\nDisallow: /private/\n"
    rig.web.routes["/robots.txt"] = Reply(200, robots, {"Content-Type": "text/plain"})
    assert rig.run(rig.request("/page")).outcome == "robots_fetched"
    [archived] = rig.archived
    rec = archived.value
    base = f"http://{HOST}:{rig.web.port}"
    assert archived.key == rec.exchange.id and rec.url == f"{base}/robots.txt" and rec.outcome == "robots_txt"
    assert rec.status == 200 and rec.revisit_of is None and rec.storage_key is not None
    assert rig.blobs.get_page(rec.storage_key) == robots and rec.content_length == len(robots)
    assert rec.exchange.request_head.startswith("GET /robots.txt HTTP/1.1") and rec.exchange.ip.startswith("127.")
    assert rec.url_fp == url_fingerprint(rec.url)
    # the probe: a 404 answer is archived like any error, without a body
    assert rig.run(rig.request("/page")).outcome == "probe_fetched"
    [probe] = rig.archived
    [path] = rig.web.probes()
    assert probe.value.url == base + path and probe.value.outcome == "soft404_probe" and probe.value.status == 404
    assert probe.value.storage_key is None and probe.value.exchange.response_head.startswith("HTTP/1.1 404")
    # then the page: its own archive record only (it is parsed: dedup archives it)
    assert rig.run(rig.request("/page")).outcome in ("fetched", "http_error")
    assert all(a.value.outcome not in ("robots_txt", "soft404_probe") for a in rig.archived)


def test_a_robots_redirect_chain_archives_every_hop_and_a_200_probe_its_body(rig: Rig) -> None:
    rig.web.routes["/robots.txt"] = Reply(301, b"", {"Location": "/real-robots.txt"})
    rig.web.routes["/real-robots.txt"] = Reply(200, b"User-agent: *\nDisallow:\n", {"Content-Type": "text/plain"})
    assert rig.run(rig.request("/page")).outcome == "robots_fetched"
    base = f"http://{HOST}:{rig.web.port}"
    hops = [(a.value.url, a.value.status, a.value.storage_key is not None, a.value.out_links) for a in rig.archived]
    assert hops == [(f"{base}/robots.txt", 301, False, [f"{base}/real-robots.txt"]),
                    (f"{base}/real-robots.txt", 200, True, [])]
    assert len({a.value.exchange.id for a in rig.archived}) == 2
    rig.web.default = lambda _path: Reply(200, b"<p>Sorry, nothing here</p>", {"Content-Type": "text/html"})
    assert rig.run(rig.request("/page")).outcome == "probe_fetched"
    [probe] = rig.archived
    assert probe.value.status == 200 and probe.value.storage_key is not None
    assert rig.blobs.get_page(probe.value.storage_key) == b"<p>Sorry, nothing here</p>"


def test_no_own_records_without_warc_and_a_failed_store_archives_without_the_body(
        dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    class FailingStore(MemoryBlobStore):
        def store_page(self, body: bytes) -> StoredPage:
            raise TransientError("s3 down")

    web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nDisallow:\n")
    rig = Rig(dns_server.port, web, blobs=FailingStore())
    assert rig.run(rig.request("/page")).outcome == "robots_fetched"
    [archived] = rig.archived
    assert archived.value.status == 200 and archived.value.storage_key is None
    off = Rig(dns_server.port, web)
    off.handler.policy = FetchPolicy(warc=False)
    assert off.run(off.request("/page", host="other.test")).outcome == "robots_fetched" and off.archived == []


def test_robots_txt_fetched_under_a_lease_a_crash_cut_short_is_fetched_again_and_archived(rig: Rig) -> None:
    """The fetcher dies after its robots.txt request, the rules persisted, before the lease's outputs (its
    result and the request's archive records) were durable. The replay reports the lease interrupted and
    drops those rules, so the next lease fetches robots.txt again and its records reach the WARC writer;
    without that the robots.txt the host is crawled under is never archived. A page lease cut short the same
    way keeps rules fetched under an earlier lease."""
    rig.web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")

    def robots_requests() -> int:
        return [s.path for s in rig.web.seen].count("/robots.txt")

    rig.web.routes["/x"] = Reply(200, b"body")
    req = rig.request("/x")
    rig.state.hosts.setdefault(req.host, HostState(req.host)).lease_id = req.lease_id

    async def killed_before_the_outputs() -> FetchResult:
        try:
            return await rig.handler.fetch(req, maybe_replay=False, archive=[])  # the outputs go with it
        finally:
            await rig.http.client.aclose()

    rig.http.client = make_client(16)
    assert asyncio.run(killed_before_the_outputs()).outcome == "robots_fetched"
    assert robots_requests() == 1

    def restarted() -> None:  # a new process: nothing in memory, the same host_state
        rig.robots = RobotsCache(rig.state, rig.robots.fetch, RobotsConfig())
        rig.handler = FetcherHandler(rig.http, rig.robots, rig.state, rig.blobs,  # type: ignore[arg-type]
                                     rig.handler.policy)

    restarted()
    assert rig.run(req).outcome == "interrupted"
    assert robots_requests() == 1  # nothing sent by the replay
    nxt = rig.request("/x")
    assert rig.run(nxt).outcome == "robots_fetched"
    assert robots_requests() == 2
    assert [a.value.url for a in rig.archived] == [rig.url("/robots.txt")]  # type: ignore[union-attr]
    # a page lease cut short: the rules came from the lease before, and stay (the host's probe answered)
    asyncio.run(rig.state.host_put_soft404(nxt.host, "none"))
    restarted()
    rig.web.routes["/slow"] = Reply(200, b"body", delay_s=5.0)
    page = rig.request("/slow")
    rig.state.hosts[page.host].lease_id = page.lease_id

    async def killed_mid_request() -> None:
        task = asyncio.ensure_future(rig.handler.handle(Record("t", 0, 0, page.host, b""), page))
        deadline = time.time() + 10
        while "/slow" not in rig.web.pages() and time.time() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await rig.http.client.aclose()

    rig.http.client = make_client(16)
    asyncio.run(killed_mid_request())
    assert "/slow" in rig.web.pages()
    restarted()
    assert rig.run(page).outcome == "interrupted"
    assert asyncio.run(rig.robots.cached(page.host, time.time())) is not None
    assert robots_requests() == 2
