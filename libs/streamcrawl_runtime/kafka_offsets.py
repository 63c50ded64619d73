"""Kafka offsets and consumer-group lag from one reused admin client: what a progress view, GET /v1/stats and
idle detection read instead of opening consumers (a few admin requests, no group membership)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from streamcrawl_contracts.topics import ALL_TOPICS, TopicSpec

from streamcrawl_runtime.ports.control import KafkaStats, PortError

#: Answers a broker gives while a new partition's leadership settles.
_SETTLING = frozenset({KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                       KafkaError.UNKNOWN_TOPIC_OR_PART})


def _settling(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.code() in _SETTLING or err.retriable())


class KafkaStatsSource:
    """End offsets of every registry topic, and lag of the consumer groups whose id has the prefix."""

    def __init__(self, bootstrap: str, group_prefix: str = "streamcrawl-", timeout_s: float = 5.0,
                 topics: Sequence[TopicSpec] = ALL_TOPICS) -> None:
        self.bootstrap = bootstrap
        self.admin = self._client()
        self.group_prefix = group_prefix
        self.timeout_s = timeout_s
        self.topics = tuple(topics)

    def _client(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})

    def _renew(self) -> None:
        """A new admin client after a failed call. After a broker restart the old client's group requests
        (list_consumer_group_offsets) kept timing out for minutes while a new client answered at once (the
        engine-restart e2e test's launcher waited out its 900 s this way), so a failure costs the next call
        one bootstrap round trip rather than leaving stats stale until the process restarts."""
        self.admin = self._client()

    def _offsets(self, spec: Callable[[], OffsetSpec], attempts: int = 10) -> dict[tuple[str, int], int]:
        # Right after topics are (re)created, e.g. by a reset, the broker can answer NOT_LEADER or
        # UNKNOWN_TOPIC_OR_PART for a moment while the partitions' leadership settles (64 partitions a
        # topic make that moment longer): such retriable answers are retried on fresh metadata.
        for attempt in range(attempts):
            try:
                return self._offsets_once(spec)
            except KafkaException as exc:
                if attempt == attempts - 1 or not _settling(exc):
                    raise
                time.sleep(0.5)
        raise AssertionError("unreachable")

    def _offsets_once(self, spec: Callable[[], OffsetSpec]) -> dict[tuple[str, int], int]:
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
            held: dict[str, int] = {t.name: 0 for t in self.topics}
            for (topic, _p), off in latest.items():
                ends[topic] += max(off, 0)
                held[topic] += max(off - max(earliest.get((topic, _p), 0), 0), 0)
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
            return KafkaStats(end_offsets=ends, group_lag=lag, held=held)
        except KafkaException as exc:
            self._renew()
            raise PortError(f"kafka: admin call failed: {exc}") from exc
        except TimeoutError as exc:
            self._renew()
            raise PortError("kafka: admin call timed out") from exc
