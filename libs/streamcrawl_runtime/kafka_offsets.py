"""Kafka offsets and consumer-group lag from one reused admin client: what a progress view, GET /v1/stats and
idle detection read instead of opening consumers (a few admin requests, no group membership)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from streamcrawl_contracts.topics import ALL_TOPICS, TopicSpec

from streamcrawl_runtime.ports.control import KafkaStats, PortError


class KafkaStatsSource:
    """End offsets of every registry topic, and lag of the consumer groups whose id has the prefix."""

    def __init__(self, bootstrap: str, group_prefix: str = "streamcrawl-", timeout_s: float = 5.0,
                 topics: Sequence[TopicSpec] = ALL_TOPICS) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
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
