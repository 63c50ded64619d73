"""The SSRF guard on the real engines, with the default settings (no allow-list, as the chart ships it):
public-looking names whose DNS answers a loopback, private or metadata address get no connection; the
fetcher's run loop (Kafka) produces `blocked_address` and records the URL in Cassandra's url_state as
`blocked`. The web server on 127.0.0.1 would answer: its own log shows it was never asked."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Producer
from streamcrawl_contracts.messages import FetchRequest, FetchResult
from streamcrawl_contracts.topics import FETCH_RESULTS, Key, TopicSpec
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_fetcher.main import build_handler as build_fetcher
from streamcrawl_fetcher.settings import FetcherSettings
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.s3_blobs import S3BlobStore

from tests.integration.kafka_helpers import TopicUnderTest, make_topics, read_topic
from tests.unit.services.fakes import Reply, ScriptedHTTP, TinyDNS

pytestmark = pytest.mark.integration

#: name → what its DNS answers; every one of them is refused by the default policy.
HOSTILE = {
    "www.northwind-shop.com": "127.0.0.1",        # a public-looking name pointing at loopback
    "metadata.cloud-example.net": "169.254.169.254",
    "intranet.example.org": "10.20.30.40",
    "router.example.org": "192.168.1.1",
    "mapped.example.org": "::ffff:127.0.0.1",
}


def test_default_guard_blocks_public_names_resolving_inside(stack, crawl_cql, s3, unique):
    req_t, res_t = f"t-ssrf-req-{unique}", f"t-ssrf-res-{unique}"
    make_topics(stack.kafka_bootstrap, req_t, res_t)
    res_spec = TopicSpec(res_t, Key.HOST, 3600_000, "test")

    names = {f"{unique}.{name}": ip for name, ip in HOSTILE.items()}
    dns_srv = TinyDNS(dict(names))
    web = ScriptedHTTP()
    web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    web.routes["/"] = Reply(200, b"<html><body>secret admin page</body></html>", {"Content-Type": "text/html"})
    settings = FetcherSettings(dns_server="127.0.0.1", dns_port=dns_srv.port)  # no allowed_networks
    assert settings.allowed_networks == ""
    state = CassandraCrawlState(crawl_cql)
    fetcher = build_fetcher(settings, state=state, blobs=S3BlobStore(s3, stack.s3_bucket))
    loop = RunLoop(LoopConfig("fetcher-ssrf", f"fetcher-ssrf-{unique}", {req_t: FetchRequest}, stack.kafka_bootstrap,
                              max_in_flight=8, resume_below=4), TopicUnderTest(fetcher, res_spec, FETCH_RESULTS))
    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap, "partitioner": "murmur2_random"})
    urls = {name: f"http://{name}:{web.port}/" for name in names}

    async def scenario() -> list[bytes]:
        run = asyncio.create_task(loop.run(install_signals=False))
        try:
            for name, url in urls.items():
                await state.host_put_lease(name, f"lease-{name}", url, time.time() + 120)
                req = FetchRequest(url=url, host=name, url_fp=url_fingerprint(url), lease_id=f"lease-{name}",
                                   lease_expires_at=time.time() + 120)
                prod.produce(req_t, key=name.encode(), value=req.model_dump_json().encode())
            assert prod.flush(30) == 0
            return await asyncio.to_thread(read_topic, stack.kafka_bootstrap, res_t, len(urls))
        finally:
            loop.stop()
            await run
            await fetcher.http.aclose()

    try:
        raw = asyncio.run(scenario())
    finally:
        web.close()
        dns_srv.close()
    results = {r.host: r for r in (FetchResult.model_validate_json(v) for v in raw)}
    assert set(results) == set(names)
    for name, res in results.items():
        assert res.outcome == "blocked_address", (name, res.outcome, res.error)
        assert res.status is None and "address" in (res.error or "")
    assert "metadata" in (results[f"{unique}.metadata.cloud-example.net"].error or "")
    assert web.seen == []  # no request of any kind reached the server

    # The fetcher recorded each refusal in url_state (the real Cassandra) with its fetched mark, before it
    # produced the result; the frontier does not retry it (unit-tested in test_frontier_handler).
    async def recorded() -> dict[str, str | None]:
        rows = {name: await state.url_get(name, url_fingerprint(urls[name])) for name in names}
        return {name: row.status if row else None for name, row in rows.items()}

    assert asyncio.run(recorded()) == dict.fromkeys(names, "blocked")
