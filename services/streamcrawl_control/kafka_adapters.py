"""The control plane's Kafka adapters: the seed sink (SEEDS, keyed by host) and the offsets-and-lag
source of GET /stats. Blocking calls: the API runs them in worker threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import ALL_TOPICS, SEEDS, TopicSpec
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_runtime.ports.control import KafkaStats, PortError


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

    def send(self, records: Sequence[tuple[str, SeedMessage]]) -> None:
        errors: list[str] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(str(err))

        with self._lock:  # one request's flush must not report another request's failures
            for key, message in records:
                payload = message.model_dump_json().encode()
                while True:
                    try:
                        self.producer.produce(self.topic.name, payload, key.encode(), on_delivery=delivered)
                        break
                    except BufferError:
                        self.producer.poll(0.1)
                    except KafkaException as exc:
                        raise PortError(f"kafka: produce failed: {exc}") from exc
            remaining = self.producer.flush(self.flush_timeout_s)
        if remaining:
            raise PortError(f"kafka: {remaining} seed records unacknowledged after {self.flush_timeout_s}s")
        if errors:
            raise PortError(f"kafka: {len(errors)} seed records failed: {errors[0]}")

    def ping(self) -> None:
        try:
            self._admin.list_topics(topic=self.topic.name, timeout=3.0)
        except KafkaException as exc:
            raise PortError(f"kafka: unreachable: {exc}") from exc

    def close(self) -> None:
        self.producer.flush(self.flush_timeout_s)


class KafkaStatsSource:
    """End offsets of every registry topic, and lag of the consumer groups whose id has the prefix."""

    def __init__(self, bootstrap: str, group_prefix: str = "streamcrawl-", timeout_s: float = 5.0,
                 topics: Sequence[TopicSpec] = ALL_TOPICS) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.group_prefix = group_prefix
        self.timeout_s = timeout_s
        self.topics = tuple(topics)

    def _offsets(self, spec: Callable[[], OffsetSpec]) -> dict[tuple[str, int], int]:
        meta = self.admin.list_topics(timeout=self.timeout_s)
        request = {
            TopicPartition(t.name, p): spec()
            for t in self.topics if t.name in meta.topics
            for p in meta.topics[t.name].partitions
        }
        if not request:
            return {}
        futures = self.admin.list_offsets(request, request_timeout=self.timeout_s)
        t = self.timeout_s
        return {(tp.topic, tp.partition): f.result(timeout=t).offset for tp, f in futures.items()}

    def _groups(self) -> list[str]:
        future = self.admin.list_consumer_groups(request_timeout=self.timeout_s)
        result = future.result(timeout=self.timeout_s)
        return sorted(g.group_id for g in result.valid if g.group_id.startswith(self.group_prefix))

    def kafka_stats(self) -> KafkaStats:
        try:
            latest = self._offsets(OffsetSpec.latest)
            earliest = self._offsets(OffsetSpec.earliest)
            ends: dict[str, int] = {t.name: 0 for t in self.topics}
            for (topic, _p), off in latest.items():
                ends[topic] += max(off, 0)
            lag: dict[str, dict[str, int]] = {}
            for group in self._groups():
                futures = self.admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=self.timeout_s)
                committed = futures[group].result(timeout=self.timeout_s).topic_partitions or []
                per_topic: dict[str, int] = {}
                for tp in committed:
                    key = (tp.topic, tp.partition)
                    if key not in latest:
                        continue
                    start = tp.offset if tp.offset >= 0 else earliest.get(key, 0)
                    per_topic[tp.topic] = per_topic.get(tp.topic, 0) + max(latest[key] - start, 0)
                lag[group] = per_topic
            return KafkaStats(end_offsets=ends, group_lag=lag)
        except KafkaException as exc:
            raise PortError(f"kafka: admin call failed: {exc}") from exc
        except TimeoutError as exc:
            raise PortError("kafka: admin call timed out") from exc
