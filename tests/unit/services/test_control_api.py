"""Control-plane /v1 API over in-memory ports: every endpoint, authentication, good and bad input."""

from __future__ import annotations

import asyncio
import logging
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import DEFAULT_PARTITIONS, SEEDS
from streamcrawl_control.app import create_app
from streamcrawl_core.partition import partition_for
from streamcrawl_runtime.memory import InMemoryControlStore, InMemoryMetrics, InMemorySeedSink, InMemoryStats
from streamcrawl_runtime.ports.control import KafkaStats
from streamcrawl_runtime.ports.state import FetchOutcome, QueuedUrl

TOKEN = "s3cret-token-value"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def ports():
    stats = InMemoryStats(KafkaStats(end_offsets={SEEDS.name: 42, "page_fetched": 9},
                                     group_lag={"streamcrawl-frontier": {SEEDS.name: 5, "streamcrawl.urls": 7}}))
    return InMemorySeedSink(), InMemoryControlStore(), stats, InMemoryMetrics()


def _client(ports, **kw) -> TestClient:
    sink, store, stats, metrics = ports
    return TestClient(create_app(sink, store, stats, metrics, token=TOKEN, max_seeds_per_request=50, **kw),
                      headers=AUTH)


@pytest.fixture
def client(ports):
    return _client(ports)


@pytest.fixture
def anon(ports):
    sink, store, stats, metrics = ports
    return TestClient(create_app(sink, store, stats, metrics, token=TOKEN))


# ------------------------------------------------------------------------------------------- auth


MUTATING = [("post", "/v1/seeds", {"urls": ["http://a.com/"]}), ("put", "/v1/blocklist", {"patterns": ["a.com"]}),
            ("delete", "/v1/blocklist/a.com", None), ("put", "/v1/hosts/a.com/override", {"min_delay_s": 1}),
            ("delete", "/v1/hosts/a.com/override", None), ("post", "/v1/pause", {}), ("post", "/v1/resume", {})]
READS = ["/v1/stats", "/v1/blocklist", "/v1/pauses", "/v1/hosts/a.com", "/v1/hosts/a.com/override"]


@pytest.mark.parametrize(("method", "path", "body"), MUTATING)
@pytest.mark.parametrize("header", [None, "Bearer wrong", "Bearer ", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN}x"])
def test_every_mutating_endpoint_needs_the_token(anon, ports, method, path, body, header):
    headers = {"Authorization": header} if header else {}
    r = anon.request(method, path, json=body, headers=headers)
    assert r.status_code == 401, r.text
    assert r.headers["www-authenticate"] == "Bearer" and TOKEN not in r.text
    assert ports[0].sent == [] and ports[1].blocks == {} and ports[1].pauses == {}


@pytest.mark.parametrize("path", READS)
def test_reads_need_the_token_unless_opened(ports, path):
    sink, store, stats, metrics = ports
    closed = TestClient(create_app(sink, store, stats, metrics, token=TOKEN))
    opened = TestClient(create_app(sink, store, stats, metrics, token=TOKEN, open_reads=True))
    assert closed.get(path).status_code == 401
    assert opened.get(path).status_code in (200, 404)
    assert opened.post("/v1/pause", json={}).status_code == 401  # open reads open no write


def test_without_a_configured_token_every_protected_call_is_refused(ports):
    sink, store, stats, metrics = ports
    c = TestClient(create_app(sink, store, stats, metrics, token=None), headers={"Authorization": "Bearer "})
    r = c.post("/v1/pause", json={})
    assert r.status_code == 401 and "no API token configured" in r.json()["detail"]
    assert c.get("/healthz").status_code == 200 and c.get("/ui/").status_code == 200


def test_the_token_is_never_logged(client, caplog):
    caplog.set_level(logging.DEBUG)
    client.post("/v1/seeds", json={"urls": ["http://a.com/"]})
    client.post("/v1/pause", json={"host": "a.com"}, headers={"Authorization": "Bearer not-the-token"})
    assert TOKEN not in caplog.text and "not-the-token" not in caplog.text


# ------------------------------------------------------------------------------------------ seeds


def test_seeds_all_good_are_produced_keyed_by_host(client, ports):
    sink = ports[0]
    r = client.post("/v1/seeds", json={"urls": ["HTTP://Example.COM:80/a/../b?utm_source=x", "https://b.org"],
                                       "priority": 3})
    assert r.status_code == 202
    body = r.json()
    assert (body["accepted"], body["rejected"]) == (2, 0)
    assert [x["normalized"] for x in body["results"]] == ["http://example.com/b", "https://b.org/"]
    assert [x["partition"] for x in body["results"]] == [partition_for("example.com", DEFAULT_PARTITIONS),
                                                         partition_for("b.org", DEFAULT_PARTITIONS)]
    assert {x["status"] for x in body["results"]} == {"accepted"}
    assert [k for k, _ in sink.sent] == ["example.com", "b.org"]
    msg = sink.sent[0][1]
    assert isinstance(msg, SeedMessage) and msg.url == "http://example.com/b" and msg.priority == 3


def test_seeds_report_each_url_with_its_reason(client, ports):
    asyncio.run(ports[1].put_block(".bad.com", "spam"))
    r = client.post("/v1/seeds", json={"urls": ["ftp://x.org/", "not a url", "http://user@h.com/", "http://ok.com/",
                                                "http://OK.com/", "http://a.bad.com/"]})
    assert r.status_code == 202
    reasons = [(x["url"], x["status"], x["reason"]) for x in r.json()["results"]]
    assert reasons[0] == ("ftp://x.org/", "rejected", "invalid:scheme")
    assert reasons[1][1:3] == ("rejected", reasons[1][2]) and reasons[1][2].startswith("invalid:")
    assert reasons[2] == ("http://user@h.com/", "rejected", "invalid:userinfo")
    assert reasons[3] == ("http://ok.com/", "accepted", "produced")
    assert reasons[4] == ("http://OK.com/", "rejected", "duplicate")
    assert reasons[5] == ("http://a.bad.com/", "rejected", "blocklisted")
    assert all(x["error"] for x in r.json()["results"] if x["status"] == "rejected")
    assert [k for k, _ in ports[0].sent] == ["ok.com"]


def test_seeds_none_accepted_is_422(client):
    r = client.post("/v1/seeds", json={"urls": ["ftp://x.org/"]})
    assert r.status_code == 422 and r.json()["accepted"] == 0


def test_seeds_over_the_limit_is_413_stating_it(client, ports):
    r = client.post("/v1/seeds", json={"urls": [f"http://h{i}.com/" for i in range(51)]})
    assert r.status_code == 413 and "at most 50 URLs" in r.json()["detail"]
    assert ports[0].sent == []


def test_default_limit_is_10000(ports):
    sink, store, stats, metrics = ports
    c = TestClient(create_app(sink, store, stats, metrics, token=TOKEN), headers=AUTH)
    r = c.post("/v1/seeds", json={"urls": [f"http://h{i}.com/" for i in range(10_001)]})
    assert r.status_code == 413 and "at most 10000 URLs" in r.json()["detail"]


def test_seeds_kafka_down_is_503_and_nothing_accepted(client, ports):
    ports[0].fail = True
    r = client.post("/v1/seeds", json={"urls": ["http://a.com/"]})
    assert r.status_code == 503 and "kafka" in r.json()["detail"]


def test_a_seed_kafka_did_not_acknowledge_is_rejected(client, ports):
    sink = ports[0]
    real = sink.send
    sink.send = lambda records: [None if i % 2 == 0 else "kafka: Local: Message timed out"  # type: ignore[method-assign]
                                 for i, _ in enumerate(real(records))]
    r = client.post("/v1/seeds", json={"urls": ["http://a.com/", "http://b.com/"]})
    assert r.status_code == 202
    assert [(x["status"], x["reason"]) for x in r.json()["results"]] == [("accepted", "produced"),
                                                                         ("rejected", "kafka")]
    sink.send = lambda records: ["kafka: Local: Message timed out"] * len(records)  # type: ignore[method-assign]
    assert client.post("/v1/seeds", json={"urls": ["http://c.com/"]}).status_code == 503


def test_seeds_store_down_is_503(client, ports):
    ports[1].fail = True
    r = client.post("/v1/seeds", json={"urls": ["http://a.com/"]})
    assert r.status_code == 503 and "cassandra" in r.json()["detail"]
    assert ports[0].sent == []


# ------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(("body", "headers", "status", "words"), [
    (b'{"urls": ["http://a.com/"', {}, 422, "malformed JSON"),
    (b'{"urls": ["http://a.com/"], "prio": 1}', {}, 422, "unknown field 'prio'"),
    (b'{"urls": ["http://a.com/\xff\xfe"]}', {}, 400, "not valid UTF-8"),
    (b'{"urls": "http://a.com/"}', {}, 422, "urls"),
    (b"", {}, 422, "invalid request"),
    (b"urls=http://a.com/", {"content-type": "application/x-www-form-urlencoded"}, 422, "invalid request"),
    (b'{"urls": ["http://a.com/"], "priority": NaN}', {}, 422, "priority"),
])
def test_bad_bodies_get_a_4xx_with_a_clear_message(client, ports, body, headers, status, words):
    r = client.post("/v1/seeds", content=body, headers={"content-type": "application/json", **headers})
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]
    assert ports[0].sent == []


def test_a_huge_body_is_413(ports):
    sink, store, stats, metrics = ports
    c = TestClient(create_app(sink, store, stats, metrics, token=TOKEN, max_body_bytes=1000), headers=AUTH)
    r = c.post("/v1/seeds", json={"urls": ["http://a.com/" + "x" * 2000]})
    assert r.status_code == 413 and "over 1000 bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: counted while it arrives
        for _ in range(5):
            yield b"x" * 400

    r = c.post("/v1/seeds", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


# -------------------------------------------------------------------------------------- blocklist


def test_blocklist_round_trip(client):
    assert client.get("/v1/blocklist").json() == {"patterns": []}
    r = client.put("/v1/blocklist", json={"patterns": [".Example.COM", "Bücher.de.", ".example.com"],
                                          "reason": "abuse"})
    assert r.status_code == 200
    assert [p["pattern"] for p in r.json()["patterns"]] == [".example.com", "xn--bcher-kva.de"]
    assert client.delete("/v1/blocklist/.EXAMPLE.com").status_code == 204
    assert client.delete("/v1/blocklist/.example.com").status_code == 404
    assert [p["pattern"] for p in client.get("/v1/blocklist").json()["patterns"]] == ["xn--bcher-kva.de"]


@pytest.mark.parametrize("bad", ["..x.com", ".", "a.com/path", "a.com:80", "user@a.com", "", "-bad-.com", "a b"])
def test_blocklist_put_rejects_bad_patterns_atomically(client, ports, bad):
    r = client.put("/v1/blocklist", json={"patterns": ["good.com", bad]})
    assert r.status_code == 422 and "none stored" in r.json()["detail"]
    assert ports[1].blocks == {}


# ------------------------------------------------------------------------------------- overrides


def test_override_round_trip(client):
    assert client.get("/v1/hosts/a.com/override").status_code == 404
    body = {"min_delay_s": 0.25, "delay_factor": 2.0, "page_budget": 1000, "note": "agreed with ops"}
    r = client.put("/v1/hosts/A.com./override", json=body)
    assert r.status_code == 200 and r.json()["host"] == "a.com"
    assert {k: r.json()[k] for k in body} == body
    assert client.put("/v1/hosts/a.com/override", json={"page_budget": 5}).json()["min_delay_s"] is None
    assert client.delete("/v1/hosts/a.com/override").status_code == 204
    assert client.delete("/v1/hosts/a.com/override").status_code == 404


@pytest.mark.parametrize("body", [
    {"min_delay_s": 0.05}, {"min_delay_s": -1}, {"delay_factor": 1000}, {"page_budget": -1}, {"note": "x"}, {},
    {"min_delay_s": 1, "unknown": 2}, {"min_delay_s": "fast"},
])
def test_override_validation(client, ports, body):
    assert client.put("/v1/hosts/a.com/override", json=body).status_code == 422
    assert ports[1].overrides == {}


@pytest.mark.parametrize("host", ["a.com:8080", "a%25b", "-x-.com", "a..com", "u@a.com"])
def test_bad_host_is_422(client, host):
    assert client.get(f"/v1/hosts/{host}").status_code == 422
    assert client.put(f"/v1/hosts/{host}/override", json={"min_delay_s": 1}).status_code == 422
    assert client.post("/v1/pause", json={"host": host}).status_code == 422


# -------------------------------------------------------------------------------- pause, resume


def test_pause_and_resume_globally_and_per_host(client, ports):
    assert client.get("/v1/pauses").json()["all"] is False
    r = client.post("/v1/pause", json={"reason": "maintenance"})
    assert r.status_code == 200 and r.json()["all"] is True and r.json()["applied_within_s"] == 5.0
    r = client.post("/v1/pause", json={"host": "Slow.EXAMPLE"})
    assert [h["scope"] for h in r.json()["hosts"]] == ["slow.example"]
    assert set(ports[1].pauses) == {"*", "slow.example"}
    r = client.post("/v1/resume", json={})  # lifts the global pause only
    assert r.json()["all"] is False and [h["scope"] for h in r.json()["hosts"]] == ["slow.example"]
    assert client.post("/v1/resume", json={"host": "slow.example"}).json()["hosts"] == []
    assert client.post("/v1/resume", json={"host": "slow.example"}).status_code == 200  # idempotent


# ------------------------------------------------------------------------------------ host view


def test_host_view(client, ports):
    store = ports[1]
    assert client.get("/v1/hosts/never.com").status_code == 404
    h = "seen.com"
    part = partition_for(h, DEFAULT_PARTITIONS)
    store.host_states[h] = {"host": h, "robots_status": 200, "robots_fetched_at": "2030-01-01T00:00:00+00:00",
                            "backoff_level": 2, "next_allowed_at": "2030-01-01T00:00:05+00:00",
                            "lease_url": f"http://{h}/leased", "lease_expires_at": "2030-01-01T00:02:00+00:00",
                            "dns_ip": "127.0.0.9", "dns_expires_at": "2030-01-01T00:05:00+00:00",
                            "last_fetch_ms": 12.5, "last_fetch_end": "2030-01-01T00:00:00+00:00"}
    store.queue[h] = [QueuedUrl(part, h, i, f"http://{h}/{i}", 5 - (i % 2), "discovery", 0.0, 1, 100.0 + i)
                      for i in range(14)]
    store.outcomes[h] = [FetchOutcome(1e9 + i, f"http://{h}/o{i}", "fetched", 200, 3.0) for i in range(12)]
    asyncio.run(store.put_pause(h, None))
    body = client.get("/v1/hosts/SEEN.com").json()
    assert body["host"] == h and body["partition"] == part and body["paused"] is True
    assert body["queue"]["length"] == 14 and len(body["queue"]["first"]) == 10
    assert [q["priority"] for q in body["queue"]["first"]][:7] == [4] * 7  # the frontier's order
    assert body["lease"]["url"] == f"http://{h}/leased" and body["backoff_level"] == 2
    assert body["robots"]["status"] == 200 and body["dns"]["ip"] == "127.0.0.9"
    assert body["dns"]["expires_at"].startswith("2030-01-01T00:05")
    assert body["last_fetch_ms"] == 12.5
    assert [o["url"] for o in body["recent_outcomes"]] == [f"http://{h}/o{i}" for i in range(11, 1, -1)]
    client.put("/v1/hosts/other.com/override", json={"min_delay_s": 3})
    other = client.get("/v1/hosts/other.com").json()
    assert other["override"]["min_delay_s"] == 3 and other["lease"] is None and other["queue"]["length"] == 0


def test_store_down_is_503(client, ports):
    ports[1].fail = True
    for method, path, body in [("get", "/v1/hosts/a.com", None), ("get", "/v1/blocklist", None),
                               ("post", "/v1/pause", {})]:
        assert client.request(method, path, json=body).status_code == 503


# ---------------------------------------------------------------------------------- probes, metrics


def test_readyz_and_healthz(client, ports):
    assert client.get("/readyz").json() == {"status": "ok", "checks": {"kafka": "ok", "cassandra": "ok"}}
    ports[1].fail = True
    r = client.get("/readyz")
    assert r.status_code == 503 and "cassandra" in r.json()["checks"]["cassandra"]
    assert client.get("/healthz").status_code == 200


def test_metrics_never_carry_urls_or_hosts(client):
    client.post("/v1/seeds", json={"urls": ["http://secret-host.com/p", "ftp://x/"]})
    client.get("/v1/hosts/secret-host.com")
    text = client.get("/metrics").text
    assert "secret-host" not in text
    assert 'streamcrawl_control_seeds_total{outcome="accepted"} 1.0' in text
    assert 'route="/v1/hosts/{host}"' in text


def test_openapi_has_every_endpoint_under_v1_with_models(client):
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {"/v1/seeds", "/v1/blocklist", "/v1/blocklist/{pattern}", "/v1/hosts/{host}", "/v1/hosts/{host}/override",
            "/v1/pause", "/v1/resume", "/v1/pauses", "/v1/stats"} <= paths
    assert all(p.startswith("/v1/") for p in paths - {"/healthz", "/readyz"})
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            if path.startswith("/v1/") and ("200" in op["responses"] or "202" in op["responses"]):
                ok = op["responses"].get("200") or op["responses"]["202"]
                assert "$ref" in str(ok), f"{method} {path} has no response model"


def test_dashboard_is_served(client):
    page = client.get("/", follow_redirects=True)
    assert page.status_code == 200 and 'id="seed-form"' in page.text and 'id="chart"' in page.text
    assert client.get("/ui/app.js").status_code == 200
    assert client.get("/ui/host.html").status_code == 200
