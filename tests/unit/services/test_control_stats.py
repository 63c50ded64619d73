"""GET /v1/stats from metrics, offsets and frontier summaries (in-memory ports): every figure and where it
comes from, and a partial answer when an engine is down."""

from __future__ import annotations

import time
import warnings

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from streamcrawl_control.app import create_app
from streamcrawl_runtime.memory import InMemoryControlStore, InMemoryMetrics, InMemorySeedSink, InMemoryStats
from streamcrawl_runtime.observe import Scrape, parse_metrics
from streamcrawl_runtime.ports.control import KafkaStats
from streamcrawl_runtime.ports.state import PartitionSummary


def exposition(fetched: int, errors: int, body_bytes: int, fetch_s: list[float]) -> str:
    reg = CollectorRegistry()
    results = Counter("streamcrawl_fetcher_results", "", ["outcome"], registry=reg)
    results.labels("fetched").inc(fetched)
    results.labels("dns_error").inc(errors)
    results.labels("robots_fetched").inc(2)
    Counter("streamcrawl_fetcher_body_bytes", "", registry=reg).inc(body_bytes)
    h = Histogram("streamcrawl_fetcher_fetch_seconds", "", buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2), registry=reg)
    for v in fetch_s:
        h.observe(v)
    dns = Counter("streamcrawl_fetcher_dns_lookups", "", ["result"], registry=reg)
    dns.labels("hit").inc(90)
    dns.labels("resolved").inc(10)
    Gauge("streamcrawl_dedup_seen_urls", "", registry=reg).set(1234)
    Gauge("streamcrawl_dedup_seen_fp_ratio", "", registry=reg).set(0.001)
    urls = Counter("streamcrawl_dedup_urls", "", ["decision"], registry=reg)
    urls.labels("trap_repeated_segment").inc(3)
    urls.labels("over_budget").inc(4)
    urls.labels("new").inc(50)
    Counter("streamcrawl_dedup_pages", "", ["decision"], registry=reg).labels("duplicate").inc(6)
    Gauge("streamcrawl_recrawl_due", "", registry=reg).set(17)
    return generate_latest(reg).decode()


@pytest.fixture
def rig():
    store = InMemoryControlStore()
    kafka = InMemoryStats(KafkaStats(end_offsets={"page_fetched": 77, "streamcrawl.dead_letter": 2},
                                     group_lag={"streamcrawl-fetcher": {"streamcrawl.fetch_requests": 5},
                                                "streamcrawl-dedup": {"a": 1, "b": 2}}))
    metrics = InMemoryMetrics()
    app = create_app(InMemorySeedSink(), store, kafka, metrics, token="t", open_reads=True)
    return app, store, kafka, metrics


def test_stats_rates_quantiles_and_counts(rig):
    app, store, _kafka, _metrics = rig
    now = time.time()
    history = app.state.collector.history
    history.add(Scrape(now - 300, parse_metrics(exposition(0, 0, 0, []))))
    history.add(Scrape(now - 60, parse_metrics(exposition(400, 10, 4_000_000, [0.03] * 400))))
    history.add(Scrape(now, parse_metrics(exposition(1000, 20, 10_000_000, [0.03] * 400 + [0.3] * 600))))
    store.partition_summaries = {
        0: PartitionSummary(0, 30, 2, 5, {"big.example": 20, "mid.example": 8}, now),
        1: PartitionSummary(1, 12, 1, 3, {"other.example": 12}, now),
        2: PartitionSummary(2, 999, 9, 9, {"stale.example": 999}, now - 3600),  # an old owner's: ignored
    }
    store.pauses = {}
    s = TestClient(app).get("/v1/stats").json()
    assert s["pages_per_s"]["m1"] == pytest.approx(600 / 60)
    assert s["pages_per_s"]["m5"] == pytest.approx(1000 / 300)
    assert s["pages_per_s"]["window_s"] == pytest.approx(300)
    assert s["bytes_per_s"]["m1"] == pytest.approx(6_000_000 / 60)
    assert s["results_per_s"]["m1"] == pytest.approx(610 / 60)
    assert s["pages_fetched"] == 1000 and s["bytes_fetched"] == 10_000_000 and s["pages_published"] == 77
    assert s["outcomes"] == {"dns_error": 20, "fetched": 1000, "robots_fetched": 2}
    assert s["errors"] == {"dns_error": 20}
    assert 0.25 <= s["fetch_seconds_p50"] <= 0.5 and 0.25 <= s["fetch_seconds_p99"] <= 0.5  # the last 5 min
    assert s["dns_cache_hit_rate"] == pytest.approx(0.9) and s["dns_lookups"] == 100
    assert s["seen_set_size"] == 1234 and s["seen_set_fp_rate"] == pytest.approx(0.001)
    assert s["duplicates"] == 6 and s["traps_stopped"] == 7 and s["recrawl_backlog"] == 17
    assert s["frontier"] == {"queued": 42, "in_flight": 3, "hosts": 8, "partitions_reporting": 2,
                             "paused_all": False, "paused_hosts": 0}
    assert [h["host"] for h in s["top_hosts"]] == ["big.example", "other.example", "mid.example"]
    assert s["lag"] == {"dedup": 3, "fetcher": 5} and s["dead_letters"] == 2
    assert s["engine_errors"] == {}


def test_stats_are_partial_when_an_engine_is_down(rig):
    app, store, kafka, metrics = rig
    kafka.fail = True
    store.fail = True
    metrics.fail = True
    r = TestClient(app).get("/v1/stats")
    assert r.status_code == 200
    s = r.json()
    assert set(s["engine_errors"]) == {"kafka", "cassandra"}
    assert s["metrics_targets"] == {"memory": "unreachable (in-memory metrics told to fail)"}
    assert s["pages_per_s"]["m1"] is None and s["pages_fetched"] == 0


def test_the_sampler_runs_in_the_background(rig):
    app, _store, _kafka, metrics = rig
    metrics.sample = parse_metrics(exposition(5, 0, 0, []))
    with TestClient(app) as c:  # the lifespan starts the sampler
        deadline = time.time() + 5
        while not app.state.collector.history.scrapes and time.time() < deadline:
            time.sleep(0.05)
        assert app.state.collector.history.scrapes
        assert c.get("/v1/stats").json()["pages_fetched"] == 5
