"""The chart's replication and consistency settings agree with each other and with the code: every level
the chart sets is one the services accept, QUORUM-class levels sit on a replication factor that survives a
replica down, the LOCAL_ levels go with NetworkTopologyStrategy, and Kafka's min.insync.replicas leaves a
broker to spare."""

from __future__ import annotations

import ast

import pytest
from streamcrawl_runtime.settings import StackSettings

from tests.unit.deploy.helmrun import PRODUCTION, full, one, render

CLASSES = ("LEASES", "CLAIMS", "STATE", "CONTROL", "STATS")


@pytest.fixture(scope="module", params=["default", "production"])
def shared(request: pytest.FixtureRequest) -> dict[str, str]:
    docs = render() if request.param == "default" else render(PRODUCTION)
    return dict(one(docs, "ConfigMap", full("shared"))["data"])


def _replicas(replication: str) -> tuple[str, list[int]]:
    spec = ast.literal_eval(replication)
    cls = str(spec.pop("class")).rsplit(".", 1)[-1]
    factors = [int(v) for k, v in spec.items() if k != "replication_factor"] if cls == "NetworkTopologyStrategy" \
        else [int(spec["replication_factor"])]
    return cls, factors


def test_the_services_accept_every_level_the_chart_sets(shared: dict[str, str], monkeypatch) -> None:
    for name, value in shared.items():
        monkeypatch.setenv(name, value)
    s = StackSettings()
    policy = s.consistency()
    assert [getattr(policy, c.lower()) for c in CLASSES] == [shared[f"STREAMCRAWL_CASSANDRA_CONSISTENCY_{c}"]
                                                              for c in CLASSES]
    assert s.kafka_replication_factor == int(shared["STREAMCRAWL_KAFKA_REPLICATION_FACTOR"])


def test_quorum_levels_sit_on_a_replication_factor_that_survives_a_replica_down(shared: dict[str, str]) -> None:
    cls, factors = _replicas(shared["STREAMCRAWL_CASSANDRA_REPLICATION"])
    levels = {shared[f"STREAMCRAWL_CASSANDRA_CONSISTENCY_{c}"] for c in CLASSES}
    serial = shared["STREAMCRAWL_CASSANDRA_SERIAL_CONSISTENCY"]
    assert all(f >= 3 for f in factors), "QUORUM of fewer than 3 replicas stops at the first one down"
    assert shared["STREAMCRAWL_CASSANDRA_CONSISTENCY_LEASES"] in ("QUORUM", "LOCAL_QUORUM")
    assert shared["STREAMCRAWL_CASSANDRA_CONSISTENCY_CLAIMS"] in ("QUORUM", "LOCAL_QUORUM")
    local = {lv for lv in levels if lv.startswith("LOCAL_")} | ({serial} if serial.startswith("LOCAL_") else set())
    if cls == "SimpleStrategy":  # no datacenters: the LOCAL_ levels mean nothing there
        assert not local
    else:
        assert len(factors) == 1 or local == levels | {serial}, "several DCs: every level should be LOCAL_"


def test_kafka_keeps_a_broker_to_spare(shared: dict[str, str]) -> None:
    rf = int(shared["STREAMCRAWL_KAFKA_REPLICATION_FACTOR"])
    insync = int(shared["STREAMCRAWL_KAFKA_MIN_INSYNC_REPLICAS"])
    assert rf >= 3 and 1 < insync < rf
