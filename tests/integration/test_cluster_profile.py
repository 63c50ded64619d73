"""The 3-node stack profile itself (stack/cluster.env, stack/stack_cluster.py): three brokers in one Kafka
cluster, three Cassandra nodes in one ring, and topics with the replicas the settings ask for, also after a
crawl reset (``Crawl.reset``, which `make run`, the e2e tests and the crawl benchmarks start with), seen
by every broker as soon as the reset returns.

These run only on the 3-node profile, and the reset one clears that stack's crawl (topics, crawl tables):
never point them at a stack whose crawl matters."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]
from streamcrawl_contracts.topics import ALL_TOPICS
from streamcrawl_launcher.crawl import Crawl, CrawlOptions
from streamcrawl_runtime.acsylla_session import AcsyllaSession, BlockingSession
from streamcrawl_runtime.settings import StackSettings

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.environ.get("STREAMCRAWL_STACK_PROFILE") != "cluster",
                       reason="needs the 3-node stack (source stack/cluster.env); CI runs the single-node one"),
]


def _local_and_peers(stack: StackSettings, host: str) -> tuple[str, set[str]]:
    """What node ``host`` says of the ring: its own address and its peers' (system.local, system.peers_v2)."""
    session = BlockingSession(AcsyllaSession([host], stack.cassandra_port, stack.cassandra_keyspace,
                                             pin_hosts=True))
    try:
        local = session.one("SELECT listen_address FROM system.local")
        peers = session.execute("SELECT peer FROM system.peers_v2")
        return str(local.listen_address), {str(row.peer) for row in peers}
    finally:
        session.close()


def test_three_brokers_and_a_ring_of_three_cassandra_nodes(stack):
    brokers = AdminClient({"bootstrap.servers": stack.kafka_bootstrap}).list_topics(timeout=10).brokers
    assert sorted(b.host for b in brokers.values()) == ["127.0.0.1", "127.0.0.2", "127.0.0.3"]
    hosts = stack.cassandra_host_list
    assert len(hosts) == 3
    for host in hosts:
        local, peers = _local_and_peers(stack, host)
        assert local == host and peers == set(hosts) - {host}


def _replication(admin: AdminClient) -> dict[str, tuple[set[int], str]]:
    """Each project topic's replica counts (over its partitions) and its min.insync.replicas."""
    meta = admin.list_topics(timeout=10).topics
    names = [t.name for t in ALL_TOPICS]
    configs = admin.describe_configs([ConfigResource("topic", n) for n in names])
    out = {}
    for resource, fut in configs.items():
        min_isr = fut.result(timeout=10)["min.insync.replicas"].value
        out[resource.name] = ({len(p.replicas) for p in meta[resource.name].partitions.values()}, min_isr)
    return out


def _topics_seen_by(broker: str) -> set[str]:
    """The topics one broker lists (a fresh client's metadata can come from another broker: asked again)."""
    for _ in range(20):
        meta = AdminClient({"bootstrap.servers": broker, "log_level": 0}).list_topics(timeout=10)
        if meta.orig_broker_name.split("/")[0] == broker:
            return set(meta.topics)
    raise AssertionError(f"no metadata answer from {broker} itself")


def test_a_crawl_reset_recreates_the_topics_with_the_settings_replication(stack, tmp_path: Path):
    assert stack.kafka_replication_factor == 3 and stack.kafka_min_insync_replicas == 2
    Crawl(CrawlOptions(workdir=tmp_path, synthweb=False), stack).reset()
    # At once, each broker asked alone lists every topic (a service started now asks any one of them).
    for broker in stack.kafka_bootstrap.split(","):
        assert {t.name for t in ALL_TOPICS} <= _topics_seen_by(broker)
    admin = AdminClient({"bootstrap.servers": stack.kafka_bootstrap})
    assert _replication(admin) == {t.name: ({3}, "2") for t in ALL_TOPICS}
