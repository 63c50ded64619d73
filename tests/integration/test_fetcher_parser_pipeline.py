"""Fetcher → parser on the real engines: a FetchRequest on Kafka becomes FetchResults (robots first, then
the soft-404 probe, then the page, body in S3, robots and the probe answer in Cassandra host_state) and a
ParsedPage (from the body carried in the FetchResult: the parser reads nothing from S3). HTTP and DNS
are local fakes.

Output topics are redirected to per-test topics, so the test neither replays nor pollutes the shared
crawl topics."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer
from streamcrawl_contracts.messages import FetchRequest, FetchResult, ParsedPage, UrlCandidates
from streamcrawl_contracts.topics import FETCH_RESULTS, PARSED, Key, TopicSpec
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_fetcher.main import build_handler as build_fetcher
from streamcrawl_fetcher.settings import FetcherSettings
from streamcrawl_parser.handler import ParserHandler
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.s3_blobs import S3BlobStore

from tests.integration.kafka_helpers import TopicUnderTest, make_topics, read_topic
from tests.unit.services.fakes import Reply, ScriptedHTTP, TinyDNS

pytestmark = pytest.mark.integration


def test_fetch_request_to_parsed_page(stack, crawl_cql, s3, unique):
    host = f"it-{unique}.test"
    req_t, res_t, parsed_t = f"t-freq-{unique}", f"t-fres-{unique}", f"t-parsed-{unique}"
    make_topics(stack.kafka_bootstrap, req_t, res_t, parsed_t)
    res_spec = TopicSpec(res_t, Key.HOST, 3600_000, "test")
    parsed_spec = TopicSpec(parsed_t, Key.HOST, 3600_000, "test")

    dns_srv = TinyDNS({host: "127.0.0.1"})
    web = ScriptedHTTP()
    web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nCrawl-delay: 1\nDisallow: /private/\n")
    # A letter in every word: an all-digit `unique` (1 in 110) would otherwise leave too few distinct
    # shingles for a SimHash (all-digit tokens are ignored) and the page would get none.
    words = " ".join(f"integration body text w{i}x{unique}" for i in range(8))
    page = f"<html><head><title>Hello {unique}</title></head><body><p>{words}</p>" \
           f'<a href="/next">n</a><a href="/private/x">p</a></body></html>'.encode()
    web.routes["/page"] = Reply(200, page, {"Content-Type": "text/html; charset=utf-8", "ETag": '"p1"'})
    url = f"http://{host}:{web.port}/page"

    # "always": the probe before the page, so its answer's trip to Cassandra is exercised (the default probes
    # a host only once a page looks like a "not found" page; the e2e crawls' soft-404 host does that)
    settings = FetcherSettings(dns_server="127.0.0.1", dns_port=dns_srv.port, allowed_networks="127.0.0.0/8",
                               soft404_probe="always")
    blobs = S3BlobStore(s3, stack.s3_bucket)
    state = CassandraCrawlState(crawl_cql)
    fetcher = build_fetcher(settings, state=state, blobs=blobs)
    fetch_redirect = TopicUnderTest(fetcher, res_spec, FETCH_RESULTS)
    fetch_loop = RunLoop(LoopConfig("fetcher-it", f"fetcher-{unique}", {req_t: FetchRequest},
                                    stack.kafka_bootstrap, max_in_flight=16, resume_below=8),
                         fetch_redirect)
    # The parser's own store, counting body reads: a small page travels inside its FetchResult (body_gz).
    parser_blobs = S3BlobStore(s3, stack.s3_bucket)
    parser_reads: list[str] = []
    s3_get_page = parser_blobs.get_page

    def counted_get_page(key: str) -> bytes:
        parser_reads.append(key)
        return s3_get_page(key)

    parser_blobs.get_page = counted_get_page  # type: ignore[method-assign]
    parse_loop = RunLoop(LoopConfig("parser-it", f"parser-{unique}", {res_t: FetchResult}, stack.kafka_bootstrap,
                                    max_in_flight=8, resume_below=4),
                         TopicUnderTest(ParserHandler(parser_blobs), parsed_spec, PARSED))

    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})

    async def lease(lease_id: str) -> None:
        # As the frontier does: the lease is in host_state (the fetcher's fencing token) before the request.
        await state.host_put_lease(host, lease_id, url, time.time() + 120)
        req = FetchRequest(url=url, host=host, url_fp=url_fingerprint(url), lease_id=lease_id,
                           lease_expires_at=time.time() + 120)
        prod.produce(req_t, key=host.encode(), value=req.model_dump_json().encode())
        assert prod.flush(30) == 0

    async def scenario() -> tuple[list[bytes], list[bytes]]:
        runs = [asyncio.create_task(fetch_loop.run(install_signals=False)),
                asyncio.create_task(parse_loop.run(install_signals=False))]
        try:
            await lease("lease-1")  # robots.txt first (one lease, one request) ...
            await asyncio.to_thread(read_topic, stack.kafka_bootstrap, res_t, 1)
            await lease("lease-2")  # ... then the soft-404 probe ...
            await asyncio.to_thread(read_topic, stack.kafka_bootstrap, res_t, 2)
            await lease("lease-3")  # ... then the page under the next lease
            parsed = await asyncio.to_thread(read_topic, stack.kafka_bootstrap, parsed_t, 1)
            results = await asyncio.to_thread(read_topic, stack.kafka_bootstrap, res_t, 3)
        finally:
            fetch_loop.stop()
            parse_loop.stop()
            await asyncio.gather(*runs)
            await fetcher.http.client.aclose()
        return results, parsed

    try:
        results_raw, parsed_raw = asyncio.run(scenario())
    finally:
        web.close()
        dns_srv.close()

    results = sorted((FetchResult.model_validate_json(v) for v in results_raw), key=lambda r: r.lease_id)
    assert [r.outcome for r in results] == ["robots_fetched", "probe_fetched", "fetched"]
    assert all(r.crawl_delay_s == 1.0 for r in results)
    # The robots.txt fetch also offered the host's /sitemap.xml as a candidate (on url_candidates, kept aside).
    side = [o.value for o in fetch_redirect.side if isinstance(o.value, UrlCandidates)]
    assert [c.urls for c in side] == [[f"http://{host}:{web.port}/sitemap.xml"]]
    fetched = results[2]
    assert fetched.status == 200 and fetched.etag == '"p1"' and fetched.storage_key
    assert blobs.get_page(fetched.storage_key) == page  # the body, read back from S3
    assert fetched.body_gz is not None and fetched.body_gz == blobs.get_bytes(fetched.storage_key)  # and inline
    assert parser_reads == []  # so the parser did not read it back

    (parsed,) = [ParsedPage.model_validate_json(v) for v in parsed_raw]
    assert parsed.url == url and parsed.title == f"Hello {unique}"
    assert parsed.out_links == [f"http://{host}:{web.port}/next", f"http://{host}:{web.port}/private/x"]
    assert parsed.content_hash == fetched.content_hash and parsed.simhash is not None

    hs = asyncio.run(state.host_get(host))
    assert hs is not None and hs.robots_status == 200 and hs.crawl_delay_s == 1.0
    assert hs.soft404_signature == "none"  # the probe got the fake server's 404
    assert web.seen[0].path == "/robots.txt" and len(web.probes()) == 1
    assert web.pages() == ["/page"]
