"""Poison messages on every topic a service consumes, against the real services, broker, Cassandra and S3.

A fuzzer produces, to each consumed topic: malformed JSON, a newer `schema_version`, a payload with a
required field missing, a 900 KB value (an oversized URL field), a valid payload under another host's key
and one with no key. Then the services crawl a small synthetic web. Every poison record must land in the
dead-letter topic once per consuming service, with its reason, source topic, partition and offset; every
consumer must keep going (the crawl completes, no service exits) and its committed offsets must reach the
end of every partition it reads, poison records included.

Seeds are the exception by contract: a seed may arrive unkeyed or under any key (users produce them), and
the frontier re-routes it to its host's partition instead of dead-lettering it; the test checks the re-route.
So is the archive topic (dedup → WARC writer), keyed by exchange id, not host: a key there promises no
placement, so its records get the four payload cases only.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Message, TopicPartition
from streamcrawl_contracts.topics import (
    ARCHIVE,
    DEAD_LETTER,
    FETCH_REQUESTS,
    FETCH_RESULTS,
    PARSED,
    SEEDS,
    URL_CANDIDATES,
    URLS,
)
from streamcrawl_core.partition import partition_for
from streamcrawl_launcher.crawl import GROUPS, Crawl, CrawlOptions
from streamcrawl_launcher.faults import ReadyzWatcher, free_port, readyz_ports
from streamcrawl_launcher.verdict import first_fetches
from streamcrawl_runtime.kafka_output import DEAD_LETTER_PAYLOAD_BYTES
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.log import load_log
from streamcrawl_synthweb.model import PROFILES

pytestmark = pytest.mark.integration

HOST = "poison.test"  # not in the synthetic web: its DNS answers NXDOMAIN
OTHER = "other.poison.test"
BIG = 900 * 1024

CONSUMERS = {  # topic → the services that read it
    SEEDS.name: ("frontier",),
    URLS.name: ("frontier",),
    URL_CANDIDATES.name: ("dedup",),
    FETCH_REQUESTS.name: ("fetcher",),
    FETCH_RESULTS.name: ("frontier", "parser", "recrawl"),
    PARSED.name: ("dedup",),
    ARCHIVE.name: ("warc",),
}

URL = f"http://{HOST}/p"
VALID: dict[str, dict[str, Any]] = {
    SEEDS.name: {"url": URL},
    URLS.name: {"url": URL, "host": HOST, "url_fp": 7},
    URL_CANDIDATES.name: {"host": HOST, "depth": 1, "source_url": "seed:fuzz", "urls": [URL], "url_fps": [7]},
    FETCH_REQUESTS.name: {"url": URL, "host": HOST, "url_fp": 7, "lease_id": "fuzz", "lease_expires_at": 1.0},
    FETCH_RESULTS.name: {"url": URL, "host": HOST, "url_fp": 7, "lease_id": "fuzz", "outcome": "fetched",
                         "started_at": 1.0, "status": 200, "content_hash": "00", "storage_key": "pages/00"},
    PARSED.name: {"url": URL, "host": HOST, "url_fp": 7, "fetched_at": "2025-01-01T00:00:00Z", "http_status": 200,
                  "content_hash": "00", "storage_key": "pages/00"},
    ARCHIVE.name: {"url": URL, "host": HOST, "url_fp": 7, "fetched_at": 1.0, "outcome": "fetched",
                   "exchange": {"id": "fuzz", "ip": "127.0.0.1", "request_head": "GET /p HTTP/1.1\r\n\r\n",
                                "response_head": "HTTP/1.1 200 OK\r\n\r\n"}},
}
#: A field each topic's payload cannot do without.
REQUIRED = {SEEDS.name: "url", URLS.name: "url_fp", URL_CANDIDATES.name: "urls", FETCH_REQUESTS.name: "lease_id",
            FETCH_RESULTS.name: "outcome", PARSED.name: "content_hash", ARCHIVE.name: "exchange"}
#: The archive topic is keyed by exchange id, which promises no placement (a replay lands where its first
#: copy did): a valid archive record under another key or none is a valid record, not poison.
KEY_FREE = {ARCHIVE.name}


def _cases(topic: str) -> dict[str, tuple[str | None, bytes, str]]:
    """case → (key, value, what its dead letter's reason must contain)."""
    valid = VALID[topic]
    dump: Callable[[dict[str, Any]], bytes] = lambda d: json.dumps(d).encode()  # noqa: E731
    missing = {k: v for k, v in valid.items() if k != REQUIRED[topic]}
    big = {**valid, "url": f"http://{HOST}/" + "a" * BIG} if "url" in valid else \
        {**valid, "source_url": f"http://{HOST}/" + "a" * BIG}
    misplaced = "is not the payload's host"
    cases: dict[str, tuple[str | None, bytes, str]] = {
        "malformed_json": (HOST, dump(valid)[:-7], "Invalid JSON"),
        "newer_schema_version": (HOST, dump({**valid, "schema_version": 2}), "schema_version 2 is newer"),
        "missing_field": (HOST, dump(missing), "Field required"),
        "value_900kb": (HOST, dump(big), "at most 81920 characters"),
        "wrong_key": (OTHER, dump(valid), misplaced),
        "null_key": (None, dump(valid), "no key"),
    }
    if topic in KEY_FREE:
        del cases["wrong_key"], cases["null_key"]
    return cases


REROUTED = {"wrong_key", "null_key"}  # on the seeds topic: valid seeds, re-routed by the frontier


def _produce_fuzz(bootstrap: str) -> dict[tuple[str, int, int], tuple[str, str]]:
    """Produce every case to every consumed topic; (topic, partition, offset) → (case, expected reason)."""
    prod = host_keyed_producer(bootstrap)
    placed: dict[tuple[str, int, int], tuple[str, str]] = {}
    failures: list[str] = []

    for topic in CONSUMERS:
        for case, (key, value, reason) in _cases(topic).items():
            def done(err: KafkaError | None, msg: Message, case: str = case, reason: str = reason) -> None:
                if err is not None:
                    failures.append(f"{msg.topic()} {case}: {err}")
                else:
                    placed[(msg.topic() or "", msg.partition() or 0, msg.offset() or 0)] = (case, reason)
            prod.produce(topic, key=key.encode() if key else None, value=value, on_delivery=done)
    assert prod.flush(30) == 0 and not failures, failures
    assert len(placed) == sum(len(_cases(t)) for t in CONSUMERS)
    return placed


def _read_all(bootstrap: str, topic: str, timeout_s: float = 20.0) -> list[Message]:
    """Every record of ``topic`` up to its end offsets as of now."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"poison-read-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in meta.partitions}
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        out: list[Message] = []
        seen = dict.fromkeys(ends, 0)
        deadline = time.time() + timeout_s
        while any(seen[p] < ends[p] for p in ends) and time.time() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    out.append(m)
                    seen[m.partition() or 0] = (m.offset() or 0) + 1
        return out
    finally:
        c.close()


def _json(raw: bytes | None) -> dict[str, Any]:
    try:
        doc = json.loads(raw or b"")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _lagging_groups(bootstrap: str, partitions: int) -> dict[str, list[tuple[str, int, int, int]]]:
    """Per service: (topic, partition, committed, end) of every partition it reads whose committed offset
    is not the partition's end."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "poison-probe", "enable.auto.commit": False})
    lag: dict[str, list[tuple[str, int, int, int]]] = {}
    try:
        for service in sorted({s for services in CONSUMERS.values() for s in services}):
            topics = [t for t, services in CONSUMERS.items() if service in services]
            tps = [TopicPartition(t, p) for t in topics for p in range(SEEDS.partitions(partitions))]
            group = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUPS[service], "enable.auto.commit": False})
            try:
                committed = group.committed(tps, timeout=10)
            finally:
                group.close()
            for tp in committed:
                end = probe.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=10)[1]
                if max(tp.offset, 0) != end:  # an empty partition has nothing to commit (-1001)
                    lag.setdefault(service, []).append((tp.topic, tp.partition, tp.offset, end))
    finally:
        probe.close()
    return lag


@pytest.mark.timeout(600)
def test_poison_on_every_topic_is_dead_lettered_and_every_consumer_keeps_going(tmp_path: Path) -> None:
    hosts, web_seed = 6, 4  # normal, robots_disallow, dup_exact, dns_nxdomain and robots_ua_group hosts
    ports = readyz_ports()
    crawl = Crawl(CrawlOptions(workdir=tmp_path, hosts=hosts, web_seed=web_seed, http_port=free_port(),
                               dns_port=free_port(), log_level="WARNING",
                               synthweb_args=["--profile", "fast", "--robots-timeout", "3"]))
    bootstrap = crawl.settings.kafka_bootstrap
    watcher = ReadyzWatcher(ports)
    crawl.start()
    try:
        watcher.start()
        deadline = time.time() + 60
        while not watcher.all_ready() and time.time() < deadline:
            time.sleep(0.5)
        assert watcher.all_ready(), watcher.not_ready_now()
        placed = _produce_fuzz(bootstrap)
        crawl.seed(crawl.manifest["seeds"])
        crawl.wait_idle(idle_s=10, timeout_s=300, every_s=3, report=False)
        assert not crawl.dead_services()
        lagging = _lagging_groups(bootstrap, crawl.settings.partitions)
        ready_at_end = watcher.all_ready()
    finally:
        watcher.stop()
        crawl.stop()
        crawl.close()

    # every consumer kept going: the crawl of the web completed after the poison...
    web = generate(hosts, web_seed, PROFILES["fast"], port=crawl.opt.http_port)
    truth = web.ground_truth(web.seeds())
    fetched = first_fetches(load_log(tmp_path / "requests.jsonl"), truth.pages)
    assert set(fetched) == truth.pages, sorted(truth.pages - set(fetched))[:5]
    # ...its offsets advanced over every record, poison included, and it is ready
    assert not lagging, lagging
    assert ready_at_end, watcher.not_ready_now()

    dead = [json.loads(m.value()) for m in _read_all(bootstrap, DEAD_LETTER.name)]
    got: dict[tuple[str, str, int, int], list[dict[str, Any]]] = {}
    for d in dead:
        got.setdefault((d["service"], d["source_topic"], d["partition"], d["offset"]), []).append(d)
    missing, wrong_reason = [], []
    for (topic, part, offset), (case, reason) in placed.items():
        if topic == SEEDS.name and case in REROUTED:
            continue
        for service in CONSUMERS[topic]:
            letters = got.pop((service, topic, part, offset), [])
            if len(letters) != 1:
                missing.append((service, topic, case, len(letters)))
            elif reason not in letters[0]["reason"]:
                wrong_reason.append((service, topic, case, letters[0]["reason"][:200]))
            else:
                letter = letters[0]
                payload = base64.b64decode(letter["payload_b64"])
                assert len(payload) <= DEAD_LETTER_PAYLOAD_BYTES
                assert letter["payload_truncated"] == (letter["payload_bytes"] > DEAD_LETTER_PAYLOAD_BYTES)
    assert not missing, f"poison records without exactly one dead letter per consumer: {missing}"
    assert not wrong_reason, wrong_reason
    # nothing else was dead-lettered: the crawl itself produced no poison
    assert not got, sorted(got)[:5]

    # the seeds under a wrong key or none were re-routed to their host's partition, under its key
    rerouted = [m for m in _read_all(bootstrap, SEEDS.name) if (m.key() or b"") == HOST.encode()
                and _json(m.value()).get("url") == URL and _json(m.value()).get("schema_version") == 1]
    assert len(rerouted) == len(REROUTED)
    assert {m.partition() for m in rerouted} == {partition_for(HOST, SEEDS.partitions(crawl.settings.partitions))}
    # and followed to their end: the host does not resolve, so the fetcher reported a DNS error
    results = [_json(m.value()) for m in _read_all(bootstrap, FETCH_RESULTS.name)]
    assert [r["outcome"] for r in results if r.get("host") == HOST and r.get("lease_id") != "fuzz"] == ["dns_error"]
