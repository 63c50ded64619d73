"""Control-plane HTTP API over in-memory ports: every endpoint, good and bad input."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

import asyncio

from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import SEEDS
from streamcrawl_control.app import create_app
from streamcrawl_core.blocklist import Blocklist, canonical_pattern
from streamcrawl_core.partition import partition_for
from streamcrawl_runtime.memory import InMemoryControlStore, InMemorySeedSink, InMemoryStats
from streamcrawl_runtime.ports.control import KafkaStats


@pytest.fixture
def ports():
    stats = InMemoryStats(KafkaStats(end_offsets={SEEDS.name: 42},
                                     group_lag={"streamcrawl-frontier": {SEEDS.name: 5, "streamcrawl.urls": 7}}))
    return InMemorySeedSink(), InMemoryControlStore(), stats


@pytest.fixture
def client(ports):
    sink, store, stats = ports
    return TestClient(create_app(sink, store, stats, max_seeds_per_request=50))


# ---------------------------------------------------------------------------------------- /seeds


def test_seeds_all_good_are_produced_keyed_by_host(client, ports):
    sink, _, _ = ports
    r = client.post("/seeds", json={"urls": ["HTTP://Example.COM:80/a/../b?utm_source=x", "https://b.org"],
                                    "priority": 3})
    assert r.status_code == 202
    body = r.json()
    assert body["rejected"] == []
    assert [a["normalized"] for a in body["accepted"]] == ["http://example.com/b", "https://b.org/"]
    assert [a["host"] for a in body["accepted"]] == ["example.com", "b.org"]
    assert [a["partition"] for a in body["accepted"]] == [partition_for("example.com", SEEDS.partitions),
                                                          partition_for("b.org", SEEDS.partitions)]
    assert [k for k, _ in sink.sent] == ["example.com", "b.org"]
    msg = sink.sent[0][1]
    assert isinstance(msg, SeedMessage) and msg.url == "http://example.com/b" and msg.priority == 3


def test_seeds_mixed_returns_422_with_per_url_errors_and_still_accepts_good(client, ports):
    sink, _, _ = ports
    r = client.post("/seeds", json={"urls": ["ftp://x.org/", "not a url", "http://user@h.com/",
                                             "http://ok.com/", "http://OK.com/"]})
    assert r.status_code == 422
    body = r.json()
    assert [a["normalized"] for a in body["accepted"]] == ["http://ok.com/"]
    reasons = {x["url"]: x["reason"] for x in body["rejected"]}
    assert reasons["ftp://x.org/"] == "invalid:scheme"
    assert reasons["not a url"].startswith("invalid:")
    assert reasons["http://user@h.com/"] == "invalid:userinfo"
    assert reasons["http://OK.com/"] == "duplicate"
    assert all(x["error"] for x in body["rejected"])
    assert [k for k, _ in sink.sent] == ["ok.com"]


def test_seeds_blocklisted_are_rejected(client, ports):
    sink, store, _ = ports
    asyncio.run(store.put_block(".bad.com", "spam"))
    asyncio.run(store.put_block("exact.org", None))
    r = client.post("/seeds", json={"urls": ["http://a.bad.com/", "http://bad.com/x", "http://notbad.com/",
                                             "http://exact.org/", "http://sub.exact.org/"]})
    assert r.status_code == 422
    body = r.json()
    assert {x["url"] for x in body["rejected"] if x["reason"] == "blocklisted"} == {
        "http://a.bad.com/", "http://bad.com/x", "http://exact.org/"}
    assert sorted(k for k, _ in sink.sent) == ["notbad.com", "sub.exact.org"]


@pytest.mark.parametrize("payload", [
    {}, {"urls": []}, {"urls": "http://a.com/"}, {"urls": [1, 2]}, {"urls": ["http://a.com/"], "priority": 10},
    {"urls": ["http://a.com/"], "priority": -1}, {"urls": ["http://a.com/"], "extra": 1},
])
def test_seeds_bad_body_is_422_and_nothing_sent(client, ports, payload):
    r = client.post("/seeds", json=payload)
    assert r.status_code == 422
    assert ports[0].sent == []


def test_seeds_too_many(client, ports):
    r = client.post("/seeds", json={"urls": [f"http://h{i}.com/" for i in range(51)]})
    assert r.status_code == 422 and "at most 50" in r.json()["detail"]
    assert ports[0].sent == []


def test_seeds_sink_down_is_503(client, ports):
    ports[0].fail = True
    r = client.post("/seeds", json={"urls": ["http://a.com/"]})
    assert r.status_code == 503 and "kafka" in r.json()["detail"]


def test_seeds_store_down_is_503(client, ports):
    ports[1].fail = True
    r = client.post("/seeds", json={"urls": ["http://a.com/"]})
    assert r.status_code == 503 and "cassandra" in r.json()["detail"]
    assert ports[0].sent == []


# ------------------------------------------------------------------------------------- /blocklist


def test_blocklist_round_trip(client):
    assert client.get("/blocklist").json() == {"patterns": []}
    r = client.put("/blocklist", json={"patterns": [".Example.COM", "Bücher.de.", ".example.com"], "reason": "abuse"})
    assert r.status_code == 200
    assert [p["pattern"] for p in r.json()["patterns"]] == [".example.com", "xn--bcher-kva.de"]
    listed = client.get("/blocklist").json()["patterns"]
    assert [p["pattern"] for p in listed] == [".example.com", "xn--bcher-kva.de"]
    assert all(p["reason"] == "abuse" and p["created_at"] for p in listed)
    assert client.delete("/blocklist", params={"pattern": ".EXAMPLE.com"}).status_code == 204
    assert client.delete("/blocklist", params={"pattern": ".example.com"}).status_code == 404
    assert [p["pattern"] for p in client.get("/blocklist").json()["patterns"]] == ["xn--bcher-kva.de"]


@pytest.mark.parametrize("bad", ["..x.com", ".", "a.com/path", "a.com:80", "user@a.com", "", "-bad-.com", "a b"])
def test_blocklist_put_rejects_bad_patterns_atomically(client, ports, bad):
    r = client.put("/blocklist", json={"patterns": ["good.com", bad]})
    assert r.status_code == 422
    assert ports[1].blocks == {}


def test_blocklist_put_lists_invalid_patterns(client):
    r = client.put("/blocklist", json={"patterns": ["ok.com", "a/b", "x:1"]})
    assert r.status_code == 422
    assert [e["pattern"] for e in r.json()["detail"]["invalid_patterns"]] == ["a/b", "x:1"]


def test_blocklist_bad_requests(client):
    assert client.put("/blocklist", json={"patterns": []}).status_code == 422
    assert client.put("/blocklist", json={}).status_code == 422
    assert client.delete("/blocklist").status_code == 422  # pattern is required
    assert client.delete("/blocklist", params={"pattern": "a/b"}).status_code == 422


def test_glob_patterns_are_stored_and_block_seeds(client, ports):
    """The control plane and dedup share streamcrawl_core.blocklist: a glob blocks seeds here exactly as it
    blocks discovered URLs in dedup (before, the control plane had no globs and dedup did)."""
    assert client.put("/blocklist", json={"patterns": ["*.Ads.Example.net"]}).status_code == 200
    assert [e.pattern for e in ports[1].blocks.values()] == ["*.ads.example.net"]
    r = client.post("/seeds", json={"urls": ["http://x.ads.example.net/", "http://example.net/"]})
    assert r.status_code == 422
    assert [x["reason"] for x in r.json()["rejected"]] == ["blocklisted"]
    assert [a["host"] for a in r.json()["accepted"]] == ["example.net"]
    assert Blocklist([canonical_pattern("*.Ads.Example.net")]).blocked_by("x.ads.example.net") == "*.ads.example.net"


# -------------------------------------------------------------------------------- /hosts/{host}


def test_override_round_trip(client):
    assert client.get("/hosts/a.com/override").status_code == 404
    body = {"min_delay_s": 0.25, "delay_factor": 2.0, "page_budget": 1000, "note": "agreed with ops"}
    r = client.put("/hosts/A.com./override", json=body)
    assert r.status_code == 200
    out = r.json()
    assert out["host"] == "a.com" and out["updated_at"]
    assert {k: out[k] for k in body} == body
    assert client.get("/hosts/a.com/override").json()["page_budget"] == 1000
    r = client.put("/hosts/a.com/override", json={"page_budget": 5})
    assert r.json()["min_delay_s"] is None  # replaced whole
    assert client.delete("/hosts/a.com/override").status_code == 204
    assert client.delete("/hosts/a.com/override").status_code == 404
    assert client.get("/hosts/a.com/override").status_code == 404


@pytest.mark.parametrize("body", [
    {"min_delay_s": 0.05}, {"min_delay_s": -1}, {"min_delay_s": 1e9}, {"delay_factor": -0.5},
    {"delay_factor": 1000}, {"page_budget": -1}, {"page_budget": 1.5}, {"note": "only a note"}, {},
    {"min_delay_s": 1, "unknown": 2}, {"min_delay_s": "fast"}, {"min_delay_s": 1, "note": "x" * 1001},
])
def test_override_validation(client, ports, body):
    r = client.put("/hosts/a.com/override", json=body)
    assert r.status_code == 422
    assert ports[1].overrides == {}


def test_override_non_finite_rejected(client, ports):
    r = client.put("/hosts/a.com/override", content=b'{"min_delay_s": NaN}',
                   headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert ports[1].overrides == {}


@pytest.mark.parametrize("host", ["a.com:8080", "a%25b", "-x-.com", "a..com", "u@a.com"])
def test_bad_host_path_is_422(client, host):
    assert client.get(f"/hosts/{host}/override").status_code == 422
    assert client.put(f"/hosts/{host}/override", json={"min_delay_s": 1}).status_code == 422
    assert client.delete(f"/hosts/{host}/override").status_code == 422
    assert client.get(f"/hosts/{host}").status_code == 422


def test_host_state(client, ports):
    store = ports[1]
    assert client.get("/hosts/never.com").status_code == 404
    store.host_states["seen.com"] = {"host": "seen.com", "robots_status": 200, "backoff_level": 2,
                                     "next_allowed_at": datetime(2030, 1, 1, tzinfo=UTC)}
    r = client.get("/hosts/SEEN.com")
    assert r.status_code == 200
    body = r.json()
    assert body["host"] == "seen.com"
    assert body["partition"] == partition_for("seen.com", SEEDS.partitions)
    assert body["state"]["robots_status"] == 200 and body["state"]["backoff_level"] == 2
    assert body["state"]["next_allowed_at"].startswith("2030-01-01T00:00:00")
    assert body["override"] is None
    client.put("/hosts/other.com/override", json={"min_delay_s": 3})
    r = client.get("/hosts/other.com")
    assert r.status_code == 200 and r.json()["state"] is None and r.json()["override"]["min_delay_s"] == 3


def test_hosts_store_down_is_503(client, ports):
    ports[1].fail = True
    assert client.get("/hosts/a.com").status_code == 503
    assert client.put("/hosts/a.com/override", json={"min_delay_s": 1}).status_code == 503
    assert client.get("/blocklist").status_code == 503


# ------------------------------------------------------------------------- /stats /healthz /metrics


def test_stats(client, ports):
    ports[1].frontier_queue = 17
    asyncio.run(ports[1].put_block(".x.com", None))
    body = client.get("/stats").json()
    assert body["errors"] == {}
    assert body["kafka"]["topics"][SEEDS.name] == {"partitions": SEEDS.partitions, "end_offset": 42}
    assert body["kafka"]["topics"]["page_fetched"]["end_offset"] == 0
    g = body["kafka"]["consumer_groups"]["streamcrawl-frontier"]
    assert g["total_lag"] == 12 and g["lag"][SEEDS.name] == 5
    assert body["cassandra"] == {"frontier_queue": 17, "blocklist": 1, "host_overrides": 0}


def test_stats_partial_when_an_engine_is_down(client, ports):
    ports[2].fail = True
    r = client.get("/stats")
    assert r.status_code == 200
    body = r.json()
    assert body["kafka"] is None and "kafka" in body["errors"] and body["cassandra"] is not None
    ports[2].fail, ports[1].fail = False, True
    body = client.get("/stats").json()
    assert body["cassandra"] is None and "cassandra" in body["errors"] and body["kafka"] is not None


def test_readyz_and_healthz(client, ports):
    r = client.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "ok", "checks": {"kafka": "ok", "cassandra": "ok"}}
    ports[1].fail = True
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["status"] == "unavailable"
    assert r.json()["checks"]["kafka"] == "ok" and "cassandra" in r.json()["checks"]["cassandra"]
    assert client.get("/healthz").status_code == 200  # alive, only not ready


def test_metrics_names_and_labels_never_carry_urls_or_hosts(client):
    client.post("/seeds", json={"urls": ["http://secret-host.com/p", "ftp://x/"]})
    client.get("/hosts/secret-host.com")
    text = client.get("/metrics").text
    assert "secret-host" not in text
    assert 'streamcrawl_control_seeds_total{outcome="accepted"} 1.0' in text
    assert 'streamcrawl_control_seeds_total{outcome="invalid"} 1.0' in text
    assert 'route="/hosts/{host}"' in text
    for line in text.splitlines():
        if line.startswith("# TYPE"):
            name, kind = line.split()[2:4]
            if kind == "counter":
                assert name.endswith("_total") or not name.startswith("streamcrawl")


def test_two_apps_do_not_share_a_registry():
    a = create_app(InMemorySeedSink(), InMemoryControlStore(), InMemoryStats())
    b = create_app(InMemorySeedSink(), InMemoryControlStore(), InMemoryStats())
    assert a.state.metrics_registry is not b.state.metrics_registry


def test_openapi_lists_every_endpoint(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/seeds", "/blocklist", "/hosts/{host}/override", "/hosts/{host}", "/stats", "/healthz",
            "/readyz"} <= set(paths)
    assert {"get", "put", "delete"} <= set(paths["/blocklist"]) and {"get", "put", "delete"} <= set(
        paths["/hosts/{host}/override"])
