"""Every statement the product runs has a stated consistency class (no table falls back to the default),
and the session gives each statement, and each batch, the level of its class."""

from __future__ import annotations

import pytest
from streamcrawl_runtime.acsylla_session import AcsyllaSession, statement_kind
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.consistency import TABLE_CLASS, ConsistencyPolicy
from streamcrawl_runtime.settings import StackSettings

from .fake_session import FakeSession


def _statements(obj: object) -> list[str]:
    return [v for v in vars(obj).values() if isinstance(v, str) and v.split(" ", 1)[0] in
            ("SELECT", "INSERT", "UPDATE", "DELETE")]


def test_every_crawl_state_statement_has_a_stated_class() -> None:
    cqls = _statements(CassandraCrawlState(FakeSession()))
    assert len(cqls) > 30
    tables = {statement_kind(c)[0] for c in cqls}
    assert tables <= set(TABLE_CLASS), sorted(tables - set(TABLE_CLASS))


def test_control_plane_statements_have_a_stated_class() -> None:
    from streamcrawl_control.cassandra_store import CassandraControlStore

    tables = {statement_kind(c)[0] for c in _statements(CassandraControlStore(FakeSession()))}
    assert tables and tables <= set(TABLE_CLASS), sorted(tables - set(TABLE_CLASS))


def test_the_classes_defaults_and_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    p = ConsistencyPolicy()
    assert (p.for_table("host_state"), p.for_table("content_index"), p.for_table("frontier_summary"),
            p.serial) == ("QUORUM", "QUORUM", "ONE", "SERIAL")
    assert p.strongest(["ONE", "QUORUM", "LOCAL_QUORUM"]) == "QUORUM"
    monkeypatch.setenv("STREAMCRAWL_CASSANDRA_CONSISTENCY_STATE", "LOCAL_QUORUM")
    monkeypatch.setenv("STREAMCRAWL_CASSANDRA_SERIAL_CONSISTENCY", "LOCAL_SERIAL")
    s = StackSettings().consistency()
    assert (s.state, s.serial, s.leases) == ("LOCAL_QUORUM", "LOCAL_SERIAL", "QUORUM")
    monkeypatch.setenv("STREAMCRAWL_CASSANDRA_CONSISTENCY_LEASES", "MOSTLY")
    with pytest.raises(ValueError):
        StackSettings()


def test_the_session_binds_each_statement_at_its_class_level() -> None:
    session = AcsyllaSession(["127.0.0.1"], 9042, "ks", consistency=ConsistencyPolicy(stats="LOCAL_ONE"))
    assert session._level("UPDATE host_state SET lease_id = ? WHERE host = ?").name == "QUORUM"
    assert session._level("INSERT INTO frontier_summary (part) VALUES (?)").name == "LOCAL_ONE"
    assert session._level("INSERT INTO content_index (a) VALUES (?) IF NOT EXISTS").name == "QUORUM"
    assert session._serial.name == "SERIAL"
