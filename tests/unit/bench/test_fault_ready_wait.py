"""The fault runner's bounded wait for readiness between two faults (streamcrawl_launcher.faultrun), and
the Cassandra driver's reconnection bound that keeps that wait short (streamcrawl_runtime.connect)."""

from __future__ import annotations

import threading
import time

from streamcrawl_launcher.faultrun import _wait_ready
from streamcrawl_launcher.faults import Fault, ReadyzWatcher
from streamcrawl_runtime.connect import crawl_cql_session
from streamcrawl_runtime.settings import StackSettings


class _Crawl:
    def dead_services(self) -> list[str]:
        return []


def _watcher(states: dict[str, bool]) -> ReadyzWatcher:
    w = ReadyzWatcher({name: 0 for name in states})
    w._state = dict(states)
    return w


def test_the_next_fault_waits_for_the_engine_users_to_be_ready() -> None:
    w = _watcher({"frontier": True, "fetcher": True, "dedup": True, "recrawl": False, "warc": True})
    threading.Timer(1.2, lambda: w._state.update(recrawl=True)).start()
    name, waited, ready = _wait_ready(_Crawl(), w, Fault("cassandra", "restart"), 10.0)  # type: ignore[arg-type]
    assert (name, ready) == ("restart cassandra", True)
    assert 1.0 <= waited < 3.0


def test_the_wait_is_bounded_and_says_so() -> None:
    w = _watcher({"frontier": True, "fetcher": True, "dedup": True, "recrawl": False})
    t0 = time.time()
    assert _wait_ready(_Crawl(), w, Fault("cassandra", "restart"), 1.0)[2] is False  # type: ignore[arg-type]
    assert time.time() - t0 < 2.5


def test_a_service_not_using_the_engine_is_not_waited_for() -> None:
    w = _watcher({"frontier": True, "fetcher": True, "dedup": True, "recrawl": True, "parser": False})
    assert _wait_ready(_Crawl(), w, Fault("cassandra", "restart"), 5.0)[1:] == (0.0, True)  # type: ignore[arg-type]


def test_cassandra_reconnection_backoff_is_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    args = crawl_cql_session(StackSettings())._cluster_args
    # the driver's default would grow to 60 s between attempts
    assert (args["exponential_reconnect_base_delay_ms"], args["exponential_reconnect_max_delay_ms"]) == (1000, 4000)
    monkeypatch.setenv("STREAMCRAWL_CASSANDRA_RECONNECT_MAX_S", "10")
    assert crawl_cql_session(StackSettings())._cluster_args["exponential_reconnect_max_delay_ms"] == 10000
