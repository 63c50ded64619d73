"""Read a range of one partition outside the consumer group: used to rebuild in-memory state (the dedup
Bloom filter) for the records between a snapshot and the group's position."""

from __future__ import annotations

import time
from collections.abc import Iterator

from confluent_kafka import Consumer, TopicPartition


def read_partition(bootstrap: str, topic: str, partition: int, start: int,
                   timeout_s: float = 30.0) -> Iterator[tuple[int, bytes]]:
    """(offset, value) of `topic`/`partition` from offset `start` up to the high watermark at call time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "streamcrawl-replay-unused",
                         "enable.auto.commit": False, "log_level": 0})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout_s)
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
