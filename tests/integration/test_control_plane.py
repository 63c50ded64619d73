"""Control plane on the real engines: seeds land on SEEDS keyed by host on partition_for(host, n);
blocklist and overrides round-trip through Cassandra; stats and health read the real Kafka."""

from __future__ import annotations

import time
import uuid
import warnings
from datetime import UTC, datetime

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import SEEDS
from streamcrawl_control.app import create_app
from streamcrawl_control.cassandra_store import CassandraControlStore
from streamcrawl_control.kafka_adapters import KafkaSeedSink, KafkaStatsSource
from streamcrawl_core.partition import partition_for
from streamcrawl_runtime.memory import InMemoryMetrics

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sink(stack):
    s = KafkaSeedSink(stack.kafka_bootstrap, flush_timeout_s=20.0)
    yield s
    s.close()


@pytest.fixture
def client(stack, crawl_cql, sink):
    app = create_app(sink, CassandraControlStore(crawl_cql, stack.partitions),
                     KafkaStatsSource(stack.kafka_bootstrap, timeout_s=10.0), InMemoryMetrics(), token="it",
                     partitions=stack.partitions)
    return TestClient(app, headers={"Authorization": "Bearer it"})


def _end_offsets(consumer: Consumer, partitions: int) -> dict[int, int]:
    return {p: consumer.get_watermark_offsets(TopicPartition(SEEDS.name, p), timeout=10)[1]
            for p in range(partitions)}


def test_seeds_land_on_the_java_compatible_partition(stack, client, unique):
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": f"test-control-{unique}",
                         "enable.auto.commit": False})
    try:
        before = _end_offsets(consumer, stack.partitions)
        hosts = [f"h{i}-{unique}.example" for i in range(12)]
        r = client.post("/v1/seeds", json={"urls": [f"http://{h.upper()}/p?utm_source=x" for h in hosts],
                                           "priority": 2})
        assert r.status_code == 202, r.text
        assert {a["host"] for a in r.json()["results"] if a["status"] == "accepted"} == set(hosts)
        # Read from the offsets recorded before producing: only our records can be there or later.
        consumer.assign([TopicPartition(SEEDS.name, p, off) for p, off in before.items()])
        found: dict[str, tuple[int, SeedMessage]] = {}
        deadline = time.monotonic() + 30
        while len(found) < len(hosts) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            key = (msg.key() or b"").decode()
            if key in hosts:
                found[key] = (msg.partition(), SeedMessage.model_validate_json(msg.value()))
        assert set(found) == set(hosts)
        for host, (partition, seed) in found.items():
            assert partition == partition_for(host, stack.partitions)
            assert seed.url == f"http://{host}/p" and seed.priority == 2
        # The API reports the same partition the broker chose.
        assert {a["host"]: a["partition"] for a in r.json()["results"]} == {h: p for h, (p, _) in found.items()}
    finally:
        consumer.close()


def test_blocklist_round_trip_in_cassandra(client, cql, unique):
    pattern = f".blk-{unique}.example"
    r = client.put("/v1/blocklist", json={"patterns": [pattern.upper()], "reason": "integration"})
    assert r.status_code == 200
    row = cql.one("SELECT pattern, reason, created_at FROM blocklist WHERE pattern = ?", (pattern,))
    assert row is not None and row.reason == "integration" and row.created_at is not None
    assert pattern in [p["pattern"] for p in client.get("/v1/blocklist").json()["patterns"]]
    r = client.post("/v1/seeds", json={"urls": [f"http://www.blk-{unique}.example/"]})
    assert r.status_code == 422 and r.json()["results"][0]["reason"] == "blocklisted"
    assert client.delete(f"/v1/blocklist/{pattern}").status_code == 204
    assert cql.one("SELECT pattern FROM blocklist WHERE pattern = ?", (pattern,)) is None
    assert client.delete(f"/v1/blocklist/{pattern}").status_code == 404


def test_override_round_trip_in_cassandra(client, cql, unique):
    host = f"ovr-{unique}.example"
    body = {"min_delay_s": 0.5, "delay_factor": 3.0, "page_budget": 77, "note": "integration"}
    assert client.put(f"/v1/hosts/{host}/override", json=body).status_code == 200
    row = cql.one("SELECT min_delay_s, delay_factor, page_budget, note FROM host_overrides WHERE host = ?", (host,))
    assert (row.min_delay_s, row.delay_factor, row.page_budget, row.note) == (0.5, 3.0, 77, "integration")
    got = client.get(f"/v1/hosts/{host}/override").json()
    assert {k: got[k] for k in body} == body
    assert client.get(f"/v1/hosts/{host}").json()["override"]["page_budget"] == 77
    assert client.delete(f"/v1/hosts/{host}/override").status_code == 204
    assert cql.one("SELECT host FROM host_overrides WHERE host = ?", (host,)) is None


def test_host_state_from_cassandra(stack, client, cql, unique):
    host = f"state-{unique}.example"
    assert client.get(f"/v1/hosts/{host}").status_code == 404
    cql.execute("INSERT INTO host_state (host, robots_status, backoff_level, next_allowed_at, dns_ip, dns_expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?)", (host, 200, 1, datetime.fromtimestamp(1_900_000_000, UTC), "127.0.0.3",
                                               datetime.fromtimestamp(1_900_000_300, UTC)))
    for i in range(3):
        cql.execute("INSERT INTO frontier_host_queue (host, priority, url_fp, url, kind, enqueued_at)"
                    " VALUES (?, ?, ?, ?, ?, ?)", (host, 5 - i, i, f"http://{host}/{i}", "discovery",
                                                   datetime.fromtimestamp(1_800_000_000 + i, UTC)))
        cql.execute("INSERT INTO host_outcomes (host, at, url, outcome, status, fetch_ms) VALUES (?, ?, ?, ?, ?, ?)",
                    (host, datetime.fromtimestamp(1_800_000_000 + i, UTC), f"http://{host}/{i}", "fetched", 200, 1.5))
    view = client.get(f"/v1/hosts/{host}").json()
    assert view["robots"]["status"] == 200 and view["backoff_level"] == 1
    assert view["next_allowed_at"].startswith("2030-03-17T17:46:40")
    assert view["dns"]["ip"] == "127.0.0.3" and view["dns"]["expires_at"].startswith("2030-03-17T17:51:40")
    assert view["queue"]["length"] == 3 and view["queue"]["first"][0]["url"] == f"http://{host}/2"
    assert [o["url"] for o in view["recent_outcomes"]] == [f"http://{host}/{i}" for i in (2, 1, 0)]
    cql.execute("DELETE FROM host_state WHERE host = ?", (host,))
    cql.execute("DELETE FROM frontier_host_queue WHERE host = ?", (host,))
    cql.execute("DELETE FROM host_outcomes WHERE host = ?", (host,))


def test_pause_and_resume_in_cassandra(client, cql, unique):
    host = f"pause-{unique}.example"
    assert client.post("/v1/pause", json={"host": host, "reason": "it"}).status_code == 200
    assert cql.one("SELECT reason FROM crawl_pauses WHERE scope = ?", (host,)).reason == "it"
    assert client.get(f"/v1/hosts/{host}").status_code == 404  # nothing known about it, pause or not
    assert host in [h["scope"] for h in client.get("/v1/pauses").json()["hosts"]]
    assert client.post("/v1/resume", json={"host": host}).status_code == 200
    assert cql.one("SELECT scope FROM crawl_pauses WHERE scope = ?", (host,)) is None


def test_stats_and_health_on_real_engines(stack, client, unique):
    # A committed group with the prefix shows up with its lag.
    group = f"streamcrawl-test-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    producer.produce(SEEDS.name, SeedMessage(url=f"http://lag-{unique}.example/").model_dump_json().encode(),
                     partition=0)
    assert producer.flush(15) == 0
    consumer = Consumer({"bootstrap.servers": stack.kafka_bootstrap, "group.id": group})
    try:
        # Committed one record behind the end: partition 0's lag is exactly 1 (plus whatever another
        # producer appends meanwhile, read below).
        end_before = consumer.get_watermark_offsets(TopicPartition(SEEDS.name, 0), timeout=10)[1]
        consumer.commit(offsets=[TopicPartition(SEEDS.name, 0, end_before - 1)], asynchronous=False)
        body = client.get("/v1/stats").json()
        end_after = consumer.get_watermark_offsets(TopicPartition(SEEDS.name, 0), timeout=10)[1]
    finally:
        consumer.close()
    assert body["engine_errors"] == {}, body["engine_errors"]
    lag = body["lag"][group.removeprefix("streamcrawl-")]
    assert 1 <= lag <= 1 + end_after - end_before
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})  # kept alive until the result arrives
    admin.delete_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    assert body["frontier"]["partitions_reporting"] <= stack.partitions
    h = client.get("/readyz")
    assert h.status_code == 200 and h.json()["checks"] == {"kafka": "ok", "cassandra": "ok"}
