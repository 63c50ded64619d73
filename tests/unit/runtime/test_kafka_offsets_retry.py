"""End offsets read while a new topic's leadership settles: NOT_LEADER answers are retried on fresh metadata
(a reset recreates every topic, and the launcher's progress check once failed an e2e crawl on the first
such answer); other errors are not retried."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin._listoffsets import OffsetSpec
from streamcrawl_contracts.topics import SEEDS
from streamcrawl_runtime.kafka_offsets import KafkaStatsSource
from streamcrawl_runtime.ports.control import PortError


class FlakyAdmin:
    def __init__(self, failures: int, code: int) -> None:
        self.failures, self.code, self.calls = failures, code, 0

    def list_topics(self, timeout: float) -> Any:
        return SimpleNamespace(topics={SEEDS.name: SimpleNamespace(partitions={0: None, 1: None})})

    def list_offsets(self, request: dict[Any, Any], request_timeout: float) -> dict[Any, Future[Any]]:
        self.calls += 1
        out: dict[Any, Future[Any]] = {}
        for i, tp in enumerate(request):
            f: Future[Any] = Future()
            if self.calls <= self.failures and i == 0:
                f.set_exception(KafkaException(KafkaError(self.code)))
            else:
                f.set_result(SimpleNamespace(offset=5))
            out[tp] = f
        return out


def _source(admin: FlakyAdmin, monkeypatch: pytest.MonkeyPatch) -> KafkaStatsSource:
    monkeypatch.setattr("streamcrawl_runtime.kafka_offsets.time.sleep", lambda s: None)
    src = KafkaStatsSource.__new__(KafkaStatsSource)
    src.admin, src.timeout_s, src.topics, src.group_prefix = admin, 1.0, (SEEDS,), "x-"  # type: ignore[assignment]
    return src


def test_not_leader_while_leadership_settles_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FlakyAdmin(failures=3, code=KafkaError.NOT_LEADER_FOR_PARTITION)
    got = _source(admin, monkeypatch)._offsets(OffsetSpec.latest)
    assert got == {(SEEDS.name, 0): 5, (SEEDS.name, 1): 5} and admin.calls == 4


def test_it_gives_up_after_its_attempts(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FlakyAdmin(failures=100, code=KafkaError.NOT_LEADER_FOR_PARTITION)
    with pytest.raises(KafkaException):
        _source(admin, monkeypatch)._offsets(OffsetSpec.latest, attempts=3)
    assert admin.calls == 3


def test_other_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = FlakyAdmin(failures=1, code=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException):
        _source(admin, monkeypatch)._offsets(OffsetSpec.latest)
    assert admin.calls == 1


class StuckGroupsAdmin(FlakyAdmin):
    """Offsets answer, the group listing never does (a client that outlived a broker restart)."""

    def list_consumer_groups(self, request_timeout: float) -> Future[Any]:
        return Future()  # never resolved: result(timeout) raises TimeoutError


def test_a_failed_call_renews_the_admin_client(monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = StuckGroupsAdmin(failures=0, code=0)
    src = _source(stuck, monkeypatch)
    fresh = FlakyAdmin(failures=0, code=0)
    monkeypatch.setattr(src, "_client", lambda: fresh)
    with pytest.raises(PortError, match="timed out"):
        src.kafka_stats()
    assert src.admin is fresh  # the next call goes through a new client
