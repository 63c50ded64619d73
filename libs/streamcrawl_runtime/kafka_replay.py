"""Read a range of one partition outside the consumer group: used to rebuild in-memory state (the dedup
Bloom filter) for the records between a snapshot and the group's position."""

from __future__ import annotations

import time
from collections.abc import Iterator

from confluent_kafka import Consumer, KafkaException, TopicPartition

from streamcrawl_runtime.ports.errors import TransientError


def read_partition(bootstrap: str, topic: str, partition: int, start: int,
                   timeout_s: float = 30.0) -> Iterator[tuple[int, bytes]]:
    """(offset, value) of `topic`/`partition` from offset `start` up to the high watermark at call time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamcrawl-replay-unused",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
        except KafkaException as exc:
            # E.g. "Unknown partition" from a client whose metadata is not in yet, right after a broker
            # freeze: the dedup's assignment (which replays) stopped the service on it in an engine-fault
            # e2e run. Transient: the assignment is retried (kafka_rebalance._until_applied).
            raise TransientError(f"kafka: log end of {topic}[{partition}]: {exc}") from exc
        pos = max(start, low)
        if pos >= high:
            return
        consumer.assign([TopicPartition(topic, partition, pos)])
        deadline = time.monotonic() + timeout_s
        while pos < high:
            # Short waits: consume() returns early only once it has num_messages, and the tail of a
            # partition is usually fewer than that.
            msgs = consumer.consume(1000, timeout=0.2)
            if not msgs:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"replay of {topic}[{partition}] stalled at {pos} < {high}")
                continue
            deadline = time.monotonic() + timeout_s
            for msg in msgs:
                if msg.error() is not None:
                    continue
                off = msg.offset() or 0
                if off >= high:
                    return
                pos = off + 1
                yield off, msg.value() or b""
    finally:
        consumer.close()
