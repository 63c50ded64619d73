"""Adapters for the control plane's ports: Kafka (seed sink, offsets and lag), Cassandra (blocklist,
overrides, host state, counts) and in-memory versions used by the unit tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

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
from streamcrawl_contracts.topics import ALL_TOPICS, HOST_PARTITIONS, SEEDS, TopicSpec

from streamcrawl_control.ports import BlockEntry, KafkaStats, Override, PortError

#: host_state columns GET /hosts/{host} reports (robots_body and the lease ids stay internal).
HOST_STATE_COLUMNS = (
    "host", "robots_status", "robots_fetched_at", "crawl_delay_s", "last_fetch_ms", "last_fetch_end",
    "next_allowed_at", "backoff_level", "dns_ip", "dns_expires_at", "cycle", "urls_this_cycle",
    "lease_url", "lease_expires_at",
)  # fmt: skip


def _utc(value: datetime | None) -> datetime | None:
    """The driver returns naive UTC datetimes; make them aware."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _now_ms() -> datetime:
    """Now, truncated to the millisecond precision a Cassandra timestamp keeps."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        aware = _utc(value)
        return aware.isoformat() if aware else None
    return value


# --------------------------------------------------------------------------------------------- Kafka


class KafkaSeedSink:
    """Produces SeedMessages to SEEDS keyed by host, with the Java-compatible partitioner, so a seed for
    host h lands on partition_for(h, n) like every other host-keyed record."""

    def __init__(self, bootstrap: str, flush_timeout_s: float = 15.0, topic: TopicSpec = SEEDS,
                 producer: Producer | None = None) -> None:
        self.topic = topic
        self.flush_timeout_s = flush_timeout_s
        self.producer = producer or Producer({
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": int(flush_timeout_s * 1000),
        })
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


# ----------------------------------------------------------------------------------------- Cassandra


class CassandraControlStore:
    """Control tables with prepared statements. `session` must be bound to the streamcrawl keyspace."""

    def __init__(self, session: Any, host_partitions: int = HOST_PARTITIONS) -> None:
        self.session = session
        self.host_partitions = host_partitions
        p = session.prepare
        self._list_blocks = p("SELECT pattern, reason, created_at FROM blocklist LIMIT 100000")
        self._get_block = p("SELECT pattern FROM blocklist WHERE pattern = ?")
        self._put_block = p("INSERT INTO blocklist (pattern, reason, created_at) VALUES (?, ?, ?)")
        self._del_block = p("DELETE FROM blocklist WHERE pattern = ?")
        self._get_override = p(
            "SELECT min_delay_s, delay_factor, page_budget, note, updated_at"
            " FROM host_overrides WHERE host = ?")
        self._put_override = p(
            "INSERT INTO host_overrides (host, min_delay_s, delay_factor, page_budget, note, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?)")
        self._del_override = p("DELETE FROM host_overrides WHERE host = ?")
        self._host_state = p(f"SELECT {', '.join(HOST_STATE_COLUMNS)} FROM host_state WHERE host = ?")
        self._count_queue = p("SELECT COUNT(*) FROM frontier_queue WHERE part = ?")
        self._count_blocks = p("SELECT COUNT(*) FROM blocklist")
        self._count_overrides = p("SELECT COUNT(*) FROM host_overrides")

    def _run(self, stmt: Any, params: Sequence[Any] = ()) -> Any:
        try:
            return self.session.execute(stmt, params)
        except Exception as exc:  # the driver raises many unrelated types; all mean "engine failed"
            raise PortError(f"cassandra: {type(exc).__name__}: {exc}") from exc

    def list_blocklist(self) -> list[BlockEntry]:
        rows = self._run(self._list_blocks)
        entries = [BlockEntry(r.pattern, r.reason, _utc(r.created_at)) for r in rows]
        return sorted(entries, key=lambda e: e.pattern)

    def put_block(self, pattern: str, reason: str | None) -> BlockEntry:
        now = _now_ms()
        self._run(self._put_block, (pattern, reason, now))
        return BlockEntry(pattern, reason, now)

    def delete_block(self, pattern: str) -> bool:
        if self._run(self._get_block, (pattern,)).one() is None:
            return False
        self._run(self._del_block, (pattern,))
        return True

    def get_override(self, host: str) -> Override | None:
        r = self._run(self._get_override, (host,)).one()
        if r is None:
            return None
        return Override(r.min_delay_s, r.delay_factor, r.page_budget, r.note, _utc(r.updated_at))

    def put_override(self, host: str, override: Override) -> Override:
        now = _now_ms()
        o = override
        self._run(self._put_override, (host, o.min_delay_s, o.delay_factor, o.page_budget, o.note, now))
        return Override(o.min_delay_s, o.delay_factor, o.page_budget, o.note, now)

    def delete_override(self, host: str) -> bool:
        if self.get_override(host) is None:
            return False
        self._run(self._del_override, (host,))
        return True

    def get_host_state(self, host: str) -> dict[str, Any] | None:
        r = self._run(self._host_state, (host,)).one()
        if r is None:
            return None
        return {col: _json_value(getattr(r, col)) for col in HOST_STATE_COLUMNS}

    def counts(self) -> dict[str, int]:
        parts = range(self.host_partitions)
        queued = sum(int(self._run(self._count_queue, (part,)).one()[0]) for part in parts)
        return {
            "frontier_queue": queued,
            "blocklist": int(self._run(self._count_blocks).one()[0]),
            "host_overrides": int(self._run(self._count_overrides).one()[0]),
        }

    def ping(self) -> None:
        self._run("SELECT release_version FROM system.local")


# ------------------------------------------------------------------------------------ in memory (tests)


class InMemorySeedSink:
    """Records what would be produced; `fail` makes send() raise like an unreachable broker."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, SeedMessage]] = []
        self.fail = False

    def send(self, records: Sequence[tuple[str, SeedMessage]]) -> None:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory sink told to fail)")
        self.sent.extend(records)

    def ping(self) -> None:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory sink told to fail)")


class InMemoryControlStore:
    def __init__(self) -> None:
        self.blocks: dict[str, BlockEntry] = {}
        self.overrides: dict[str, Override] = {}
        self.host_states: dict[str, dict[str, Any]] = {}
        self.frontier_queue = 0
        self.fail = False

    def _check(self) -> None:
        if self.fail:
            raise PortError("cassandra: unreachable (in-memory store told to fail)")

    def list_blocklist(self) -> list[BlockEntry]:
        self._check()
        return [self.blocks[k] for k in sorted(self.blocks)]

    def put_block(self, pattern: str, reason: str | None) -> BlockEntry:
        self._check()
        entry = BlockEntry(pattern, reason, datetime.now(UTC))
        self.blocks[pattern] = entry
        return entry

    def delete_block(self, pattern: str) -> bool:
        self._check()
        return self.blocks.pop(pattern, None) is not None

    def get_override(self, host: str) -> Override | None:
        self._check()
        return self.overrides.get(host)

    def put_override(self, host: str, override: Override) -> Override:
        self._check()
        o = Override(override.min_delay_s, override.delay_factor, override.page_budget, override.note,
                     datetime.now(UTC))
        self.overrides[host] = o
        return o

    def delete_override(self, host: str) -> bool:
        self._check()
        return self.overrides.pop(host, None) is not None

    def get_host_state(self, host: str) -> dict[str, Any] | None:
        self._check()
        row = self.host_states.get(host)
        return None if row is None else {k: _json_value(v) for k, v in row.items()}

    def counts(self) -> dict[str, int]:
        self._check()
        return {"frontier_queue": self.frontier_queue, "blocklist": len(self.blocks),
                "host_overrides": len(self.overrides)}

    def ping(self) -> None:
        self._check()


class InMemoryStats:
    def __init__(self, stats: KafkaStats | None = None) -> None:
        self.stats = stats or KafkaStats()
        self.fail = False

    def kafka_stats(self) -> KafkaStats:
        if self.fail:
            raise PortError("kafka: unreachable (in-memory stats told to fail)")
        return self.stats
