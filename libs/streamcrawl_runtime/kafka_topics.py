"""The topics a deployment expects, checked against the broker: every service checks them before it
consumes, and provisioning before it creates the missing ones.

The partition count of the host-keyed topics is the deployment setting STREAMCRAWL_PARTITIONS. It cannot
change under a live crawl (a host's partition is murmur2(host) mod the count, and the frontier queues, the
seen-set snapshots and the recrawl ownership are kept per partition), so a mismatch is an error with one
line that says what to do, never something to repair silently.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
from streamcrawl_contracts.topics import ALL_TOPICS, TopicSpec

#: Where the README explains the choice and the procedures (stop and reset, or keep the old count).
HOWTO = "README 'Choosing the partition count'"


class TopicMismatch(RuntimeError):
    """A topic is missing or has another partition count than the deployment's setting (one line)."""


def mismatch_message(name: str, found: int, partitions: int, spec: TopicSpec) -> str:
    want = spec.partitions(partitions)
    if spec.fixed_partitions is not None:
        return f"kafka: topic {name} has {found} partitions, the registry says {want}"
    return (f"kafka: topic {name} has {found} partitions but STREAMCRAWL_PARTITIONS is {partitions}: the count of "
            f"a live crawl cannot change; set STREAMCRAWL_PARTITIONS={found}, or stop every service and reset the "
            f"crawl to start over with {partitions} ({HOWTO})")


def partition_counts(admin: AdminClient, timeout_s: float) -> dict[str, int]:
    """Every topic on the broker with its partition count (one metadata request)."""
    meta = admin.list_topics(timeout=timeout_s)
    return {name: len(t.partitions) for name, t in meta.topics.items()}


def check_counts(counts: dict[str, int], partitions: int, specs: Iterable[TopicSpec] = ALL_TOPICS,
                 require: bool = True) -> None:
    """Raise TopicMismatch for the first topic of ``specs`` whose count differs (or, with ``require``,
    that does not exist)."""
    for spec in specs:
        found = counts.get(spec.name)
        if found is None:
            if require:
                raise TopicMismatch(f"kafka: topic {spec.name} does not exist: run the provisioning "
                                    f"(streamcrawl-provision, or `make stack-up` locally) first")
            continue
        if found != spec.partitions(partitions):
            raise TopicMismatch(mismatch_message(spec.name, found, partitions, spec))


def check_topics(bootstrap: str, partitions: int, specs: Iterable[TopicSpec] = ALL_TOPICS,
                 timeout_s: float = 120.0) -> None:
    """A service's start check: every registry topic exists with the deployment's partition count. A broker
    that does not answer is waited for (up to ``timeout_s``: a pod may start before Kafka is up)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            counts = partition_counts(admin, 10.0)
            break
        except KafkaException as exc:
            if time.monotonic() >= deadline:
                raise TopicMismatch(f"kafka: {bootstrap} did not answer a metadata request in {timeout_s:.0f}s "
                                    f"({exc})") from exc
            time.sleep(1.0)
    check_counts(counts, partitions, specs)
