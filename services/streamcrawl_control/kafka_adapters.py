"""The control plane's Kafka adapters: the seed sink (SEEDS, keyed by host) and the offsets-and-lag
source of GET /stats. Blocking calls: the API runs them in worker threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import SEEDS, TopicSpec
from streamcrawl_runtime.kafka_offsets import KafkaStatsSource
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_runtime.ports.control import PortError

__all__ = ["KafkaSeedSink", "KafkaStatsSource"]


class KafkaSeedSink:
    """Produces SeedMessages to SEEDS keyed by host, with the Java-compatible partitioner, so a seed for
    host h lands on partition_for(h, n) like every other host-keyed record."""

    def __init__(self, bootstrap: str, flush_timeout_s: float = 15.0, topic: TopicSpec = SEEDS,
                 producer: Producer | None = None) -> None:
        self.topic = topic
        self.flush_timeout_s = flush_timeout_s
        self.producer = producer or host_keyed_producer(bootstrap, acks="all",
                                                        **{"message.timeout.ms": int(flush_timeout_s * 1000)})
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._lock = threading.Lock()

    def send(self, records: Sequence[tuple[str, SeedMessage]]) -> list[str | None]:
        """Produce every record and wait for the broker's acknowledgement (acks=all): per record, None once
        acknowledged or why not. PortError if the broker refuses the batch outright."""
        results: list[str | None] = ["not acknowledged"] * len(records)

        def delivered(index: int) -> Callable[[KafkaError | None, Message], None]:
            def report(err: KafkaError | None, _msg: Message) -> None:
                results[index] = None if err is None else f"kafka: {err.str()}"
            return report

        with self._lock:  # one request's flush must not report another request's deliveries
            for i, (key, message) in enumerate(records):
                payload = message.model_dump_json().encode()
                while True:
                    try:
                        self.producer.produce(self.topic.name, payload, key.encode(), on_delivery=delivered(i))
                        break
                    except BufferError:
                        self.producer.poll(0.1)
                    except KafkaException as exc:
                        raise PortError(f"kafka: produce failed: {exc}") from exc
            remaining = self.producer.flush(self.flush_timeout_s)
        if remaining:
            results = [r if r != "not acknowledged" else
                       f"kafka: not acknowledged within {self.flush_timeout_s:g}s" for r in results]
        return results

    def ping(self) -> None:
        try:
            self._admin.list_topics(topic=self.topic.name, timeout=3.0)
        except KafkaException as exc:
            raise PortError(f"kafka: unreachable: {exc}") from exc

    def close(self) -> None:
        self.producer.flush(self.flush_timeout_s)
