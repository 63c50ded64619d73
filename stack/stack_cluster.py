"""The optional 3-node profile of the local stack (``STREAMCRAWL_STACK_PROFILE=cluster``; see
stack/cluster.env): three Kafka 4.1.1 nodes (KRaft, each broker and controller, a 3-voter quorum) and three
Cassandra 5.0.9 nodes, on the loopback addresses 127.0.0.1, 127.0.0.2 and 127.0.0.3 (the same ports on each
address), plus the one S3 store. Topics get 3 replicas and min.insync.replicas 2, the keyspace replication
factor 3: the setting of a production cluster, on one machine, so that the QUORUM levels and the lease and
fencing checks run against real replicas, one of which can be stopped.

The node configurations are the single-node templates (stack/kafka, stack/cassandra) with the address, the
node id, the quorum voters, the seed and the token of each node filled in.
"""

from __future__ import annotations

import re
from pathlib import Path

from stack_common import (
    CASSANDRA_PORT,
    CASSANDRA_STORAGE_PORT,
    DATA,
    HERE,
    KAFKA_CONTROLLER_PORT,
    KAFKA_PORT,
    STACK,
)

NODES = 3
ADDRESSES = tuple(f"127.0.0.{i}" for i in range(1, NODES + 1))
#: One token per Cassandra node (num_tokens 1), evenly spread over Murmur3's range.
TOKENS = tuple(str(-(2**63) + i * (2**64 // NODES)) for i in range(NODES))


def kafka_config(node: int) -> tuple[Path, Path]:
    """Write node ``node``'s (1-based) server.properties; returns (its path, its data directory)."""
    addr = ADDRESSES[node - 1]
    data = DATA / f"kafka-{node}"
    voters = ",".join(f"{i}@{a}:{KAFKA_CONTROLLER_PORT}" for i, a in enumerate(ADDRESSES, start=1))
    text = (HERE / "kafka" / "server.properties.in").read_text()
    text = text.replace("@@BROKER_PORT@@", str(KAFKA_PORT)).replace("@@CONTROLLER_PORT@@", str(KAFKA_CONTROLLER_PORT))
    text = text.replace("@@DATA@@", str(data)).replace("127.0.0.1", addr)
    text = re.sub(r"(?m)^node\.id=.*$", f"node.id={node}", text)
    text = re.sub(r"(?m)^controller\.quorum\.voters=.*$", f"controller.quorum.voters={voters}", text)
    for key, value in (("offsets.topic.replication.factor", 3), ("default.replication.factor", 3),
                       ("transaction.state.log.replication.factor", 3), ("transaction.state.log.min.isr", 2),
                       ("share.coordinator.state.topic.replication.factor", 3),
                       ("share.coordinator.state.topic.min.isr", 2)):
        text = re.sub(rf"(?m)^{re.escape(key)}=.*$", f"{key}={value}", text)
    text += "min.insync.replicas=2\n"
    conf = STACK / "kafka" / f"server-{node}.properties"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(text)
    return conf, data


def cassandra_config(node: int) -> tuple[Path, Path]:
    """Write node ``node``'s cassandra.yaml; returns (its path, its data directory)."""
    addr = ADDRESSES[node - 1]
    data = DATA / f"cassandra-{node}"
    text = (HERE / "cassandra" / "cassandra.yaml.in").read_text()
    text = text.replace("@@STORAGE_PORT@@", str(CASSANDRA_STORAGE_PORT))
    text = text.replace("@@SSL_STORAGE_PORT@@", str(CASSANDRA_STORAGE_PORT + 1))
    text = text.replace("@@NATIVE_PORT@@", str(CASSANDRA_PORT)).replace("@@DATA@@", str(data))
    text = re.sub(r"(?m)^listen_address:.*$", f"listen_address: {addr}", text)
    text = re.sub(r"(?m)^rpc_address:.*$", f"rpc_address: {addr}", text)
    text = re.sub(r"(?m)^initial_token:.*$", f"initial_token: {TOKENS[node - 1]}", text)
    # A new cluster: nothing to stream, so the nodes join without bootstrapping (one after the other).
    text += "auto_bootstrap: false\n"
    conf = STACK / "cassandra" / f"cassandra-{node}.yaml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text(text)
    return conf, data
