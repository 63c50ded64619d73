"""read_partition (the dedup's Bloom replay) against the real broker: a partition's range is read in
order, and a partition the client cannot find is a transient error (the assignment is retried), not one
that stops the service."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from streamcrawl_runtime.kafka_replay import read_partition
from streamcrawl_runtime.ports.errors import TransientError, is_transient

from tests.integration.kafka_helpers import make_topics

pytestmark = pytest.mark.integration


def test_reads_the_range_from_start_to_the_log_end(stack, unique):
    topic = f"t-replay-{unique}"
    make_topics(stack.kafka_bootstrap, topic, partitions=1)
    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap})
    for i in range(10):
        prod.produce(topic, value=str(i).encode(), partition=0)
    assert prod.flush(30) == 0
    got = list(read_partition(stack.kafka_bootstrap, topic, 0, start=4, timeout_s=10))
    assert got == [(i, str(i).encode()) for i in range(4, 10)]


def test_a_partition_the_client_cannot_find_is_transient(stack, unique):
    with pytest.raises(TransientError) as err:
        list(read_partition(stack.kafka_bootstrap, f"t-replay-missing-{unique}", 0, start=0, timeout_s=3))
    assert is_transient(err.value)
