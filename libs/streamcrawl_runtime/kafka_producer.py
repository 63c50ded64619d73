"""The one factory of producers for host-keyed topics. Every producer of the project comes from here, so
every host-keyed record lands where `streamcrawl_core.partition.partition_for(host, n)` says."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Producer


def host_keyed_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """The producer settings: Java-compatible murmur2 placement of keys (unkeyed records spread at
    random), idempotent delivery, a short linger and lz4 batches. ``overrides`` win: the services' run
    loops pass their linger.ms (StackSettings.kafka_linger_ms, 20 ms); the control plane and tests keep 5."""
    return {
        "bootstrap.servers": bootstrap,
        "partitioner": "murmur2_random",  # partition_for(host, n) in streamcrawl_core.partition
        "enable.idempotence": True,
        "linger.ms": 5,
        "compression.type": "lz4",
        **overrides,
    }


def host_keyed_producer(bootstrap: str, **overrides: Any) -> Producer:
    return Producer(host_keyed_config(bootstrap, **overrides))
