"""The frontier's early lease check (streamcrawl_core.lease): a lease whose request never started is fenced
and its URL put back at grant + lease_check_s, not at the lease's expiry; a request started before the
fence, or between the fence and the second read, keeps the host blocked and its result is accepted."""

from __future__ import annotations

from typing import Any

import pytest
from streamcrawl_core.lease import CONFIRM_MARGIN_S
from streamcrawl_runtime.memory import MemoryCrawlState
from streamcrawl_runtime.ports.state import HostState

from tests.unit.services.test_frontier_handler import (
    LEASE_S,
    T0,
    A,
    Clock,
    Rig,
    _persisted,
    clock,  # noqa: F401 (the fixture)
)

CHECK_S = 20.0


def rig_with_check(clock: Clock, state: MemoryCrawlState | None = None) -> Rig:  # noqa: F811
    rig = Rig(clock, state, assign=False)
    rig.h.lease_check_s = CHECK_S
    rig.run(rig.h.on_assign(list(range(8))))
    return rig


def test_request_carries_confirm_after_and_a_stuck_one_is_recovered_at_the_early_check(clock: Clock) -> None:  # noqa: F811
    rig = rig_with_check(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    assert req.confirm_after == T0 + CHECK_S - CONFIRM_MARGIN_S
    assert rig.tick(T0 + CHECK_S - 0.1) == []  # before the check: still leased
    # The request never reached a fetcher (stuck in an engine): at the check the lease is fenced (host_state's
    # lease cleared) and the URL put back: leased again after the minimum delay, not at T0 + 60.
    assert rig.tick(T0 + CHECK_S) == []
    assert rig.state.hosts[A].lease_id is None
    [again] = rig.tick(T0 + CHECK_S + 1)
    assert again.url == req.url and again.lease_id != req.lease_id
    assert rig.state.hosts[A].lease_id == again.lease_id
    # The stuck request, delivered at last, is answered lease_expired by the fetcher: nothing changes.
    rig.result(req, T0 + 25, outcome="lease_expired", status=None)
    assert rig.h.leases.get(A) is not None and rig.h.leases.get(A).lease_id == again.lease_id  # type: ignore[union-attr]
    rig.result(again, T0 + 26)
    assert rig.state.queue == {}


def test_started_request_is_left_to_the_expiry_check(clock: Clock) -> None:  # noqa: F811
    rig = rig_with_check(clock)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [req] = rig.tick(T0)
    rig.run(rig.state.host_put_started_lease(A, req.lease_id, T0 + 10))
    assert rig.tick(T0 + CHECK_S) == []
    assert rig.state.hosts[A].lease_id == req.lease_id  # not fenced
    assert rig.tick(T0 + LEASE_S) == []  # expiry: started, so extended as before
    rig.result(req, T0 + 61)
    [nxt] = rig.tick(T0 + 64)
    assert nxt.url == "http://a.test/2"


def test_finished_work_without_a_request_is_not_fenced(clock: Clock) -> None:  # noqa: F811
    # A dns_error or a robots_disallowed: no started mark, but fetched_lease says its result is on its way.
    rig = rig_with_check(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.run(rig.state.host_put_fetched_lease(A, req.lease_id))
    assert rig.tick(T0 + CHECK_S) == []
    assert rig.state.hosts[A].lease_id == req.lease_id


def _fetcher_starts_during_fence(rig: Rig, lease_id: str, at: float) -> None:
    """The fetcher's started mark lands right after the frontier's fence (between its two reads)."""
    state = rig.state
    put = state.host_put_lease

    async def racing_put(host: str, lease: str | None, url: str | None, expires_at: float | None) -> None:
        await put(host, lease, url, expires_at)
        if lease is None:
            await state.host_put_started_lease(host, lease_id, at)

    state.host_put_lease = racing_put  # type: ignore[method-assign]


def test_fetcher_starting_between_fence_and_reread_keeps_host_blocked_and_its_result_is_accepted(
        clock: Clock) -> None:  # noqa: F811
    rig = rig_with_check(clock)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [req] = rig.tick(T0)
    _fetcher_starts_during_fence(rig, req.lease_id, T0 + CHECK_S)
    assert rig.tick(T0 + CHECK_S) == []  # fenced, but the second read sees the start: still leased
    # host_state's lease is written back, so a rebuilt frontier keeps the host blocked too
    assert rig.state.hosts[A].lease_id == req.lease_id
    assert rig.h.leases.get(A) is not None
    assert rig.tick(T0 + 40) == []
    # The fetcher read its lease before the fence landed and sent the request: its result is accepted.
    rig.result(req, T0 + 41)
    [nxt] = rig.tick(T0 + 44)
    assert nxt.url == "http://a.test/2"
    rig.result(nxt, T0 + 45)
    assert rig.state.queue == {}  # /1 finished once, not lost, not queued again
    assert rig.tick(T0 + 200) == []


def test_fenced_fetcher_answers_lease_expired_and_the_url_goes_back(clock: Clock) -> None:  # noqa: F811
    rig = rig_with_check(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    _fetcher_starts_during_fence(rig, req.lease_id, T0 + CHECK_S)
    assert rig.tick(T0 + CHECK_S) == []
    # The fetcher saw the fence when it confirmed: no request, lease_expired. The URL is leased again.
    rig.result(req, T0 + CHECK_S + 0.1, outcome="lease_expired", status=None)
    [again] = rig.tick(T0 + CHECK_S + 2)
    assert again.url == req.url and again.lease_id != req.lease_id


def test_failed_reread_after_the_fence_retries_and_restores_a_started_lease(clock: Clock) -> None:  # noqa: F811
    rig = rig_with_check(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    state = rig.state
    reads: list[int] = []
    real = state.host_lease

    async def flaky(host: str) -> Any:
        reads.append(1)
        if len(reads) == 2:  # the read after the fence
            await state.host_put_started_lease(host, req.lease_id, T0 + CHECK_S)
            raise ConnectionError("cassandra unavailable")
        return await real(host)

    state.host_lease = flaky  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        rig.tick(T0 + CHECK_S)
    assert state.hosts[A].lease_id is None  # fenced
    assert rig.tick(T0 + CHECK_S + 1) == []  # retried: started now, so the lease is written back
    assert state.hosts[A].lease_id == req.lease_id
    assert rig.h.leases.get(A) is not None


def test_rebuilt_host_gets_the_early_check_from_its_stored_lease(clock: Clock) -> None:  # noqa: F811
    # A frontier rebuilt 5 s after a lease was granted (expiry T0 + 55: granted at T0 - 5) whose request was
    # lost with the crashed frontier's producer: at grant + 20 s the host is free, not at T0 + 55.
    state = MemoryCrawlState()
    _persisted(state, "http://a.test/1")
    state.hosts[A] = HostState(A, next_allowed_at=T0 - 6, lease_id="L1", lease_url="http://a.test/1",
                               lease_expires_at=T0 + LEASE_S - 5)
    rig = rig_with_check(clock, state)
    assert rig.tick(T0) == []
    assert rig.tick(T0 + CHECK_S - 5.1) == []
    [req] = rig.tick(T0 + CHECK_S - 5)
    assert req.url == "http://a.test/1" and req.lease_id != "L1"
    assert A not in rig.h.restored


def test_start_delay_moves_the_early_check_later_under_load(clock: Clock) -> None:  # noqa: F811
    rig = rig_with_check(clock)
    rig.h.start_delay_s = 15.0  # requests have been waiting ~15 s for a fetcher: check at 2 x 15 s
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    assert req.confirm_after == T0 + CHECK_S - CONFIRM_MARGIN_S  # the fetcher confirms from the earliest check
    assert rig.tick(T0 + 29.9) == []
    assert rig.tick(T0 + 30) == []
    [again] = rig.tick(T0 + 31)
    assert again.url == req.url


def test_results_feed_the_start_delay(clock: Clock) -> None:  # noqa: F811
    rig = rig_with_check(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.result(req, T0 + 10, fetch_s=0.05)  # started at T0 + 9.95
    assert 0.0 < rig.h.start_delay_s < 1.0
