"""Pause and resume in the frontier (crawl_pauses, re-read every pauses_refresh_s), and the per-partition
summaries it writes for the control plane's stats."""

from __future__ import annotations

import pytest
from streamcrawl_runtime.memory import MemoryCrawlState

from tests.unit.services.test_frontier_handler import T0, A, B, Clock, Rig, part


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


def _hosts(reqs: list) -> set[str]:
    return {r.host for r in reqs}


def test_a_global_pause_leases_nothing_until_resumed_within_the_refresh_period(clock: Clock) -> None:
    rig = Rig(clock)
    rig.state.pauses = {"*"}
    rig.url(f"http://{A}/1")
    rig.url(f"http://{B}/1")
    assert rig.tick(T0) == []
    assert rig.tick(T0 + 30) == []
    rig.state.pauses = set()
    refresh = rig.h.pauses_refresh_s
    # Applied at the next read of the pauses: within pauses_refresh_s of the resume.
    reqs = rig.tick(T0 + 30 + refresh)
    assert _hosts(reqs) == {A, B}


def test_a_paused_host_keeps_its_url_while_other_hosts_are_crawled(clock: Clock) -> None:
    rig = Rig(clock)
    rig.state.pauses = {A}
    rig.url(f"http://{A}/1")
    rig.url(f"http://{B}/1")
    assert _hosts(rig.tick(T0)) == {B}
    assert rig.tick(T0 + 2) == []
    # The URL is still queued, in memory and durably.
    assert rig.h.frontiers[part(A)].queued_for(A) == 1
    assert any(k[1] == A for k in rig.state.queue)
    rig.state.pauses = set()
    t = T0 + 2 + rig.h.pauses_refresh_s
    reqs = rig.tick(t) or rig.tick(t + rig.h.pauses_refresh_s)
    assert [r.url for r in reqs] == [f"http://{A}/1"]


def test_a_pause_applies_within_the_refresh_period(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url(f"http://{A}/1")
    rig.url(f"http://{A}/2")
    first = rig.tick(T0)
    assert len(first) == 1
    rig.state.pauses = {A}
    rig.result(first[0], T0 + 0.1)
    # The read of T0 is still current until T0 + refresh; from then on nothing more is leased for A.
    assert rig.tick(T0 + rig.h.pauses_refresh_s) == []
    assert rig.tick(T0 + 60) == []


def test_a_pause_survives_a_restart(clock: Clock) -> None:
    state = MemoryCrawlState()
    state.pauses = {"*"}
    rig = Rig(clock, state=state)
    rig.url(f"http://{A}/1")
    assert rig.tick(T0) == []
    restarted = Rig(clock, state=state)  # a new process over the same durable state
    assert restarted.tick(T0 + 1) == []
    state.pauses = set()
    assert _hosts(restarted.tick(T0 + 1 + restarted.h.pauses_refresh_s)) == {A}


def test_nothing_is_leased_before_the_pauses_could_be_read(clock: Clock) -> None:
    state = MemoryCrawlState()
    rig = Rig(clock, state=state)
    rig.url(f"http://{A}/1")

    async def down() -> set[str]:
        raise ConnectionError("cassandra down")

    state.crawl_pauses = down  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        rig.tick(T0)
    assert rig.h.frontiers[part(A)].queued_for(A) == 1
    del state.crawl_pauses  # the class's method again
    assert _hosts(rig.tick(T0 + 0.1)) == {A}


def test_summaries_report_queue_leases_and_the_busiest_hosts(clock: Clock) -> None:
    rig = Rig(clock)
    for i in range(3):
        rig.url(f"http://{A}/{i}")
    rig.url(f"http://{B}/0")
    rig.tick(T0)  # leases one URL of each host; the summary is written before the dispatch
    rig.tick(T0 + rig.h.summary_every_s)
    sa = rig.state.summaries[part(A)]
    assert sa.top_hosts == {A: 2} and sa.queued == 2 and sa.in_flight == 1
    sb = rig.state.summaries[part(B)]
    assert sb.top_hosts == {} and sb.queued == 0 and sb.in_flight == 1
    assert set(rig.state.summaries) == set(range(8))


def test_an_unchanged_summary_is_written_again_only_as_a_heartbeat(clock: Clock) -> None:
    """Looked at every summary_every_s: a partition whose summary did not change is not written again
    until summary_heartbeat_s has passed (the control plane drops rows older than 60 s); one that changed
    is written at the next look."""
    rig = Rig(clock)
    rig.url(f"http://{A}/0")
    rig.url(f"http://{A}/1")
    rig.tick(T0)
    first = dict(rig.state.summaries)
    assert set(first) == set(range(8))
    rig.tick(T0 + rig.h.summary_every_s)  # A's lease is out: its partition changed, the others did not
    assert rig.state.summaries[part(A)].updated_at == T0 + rig.h.summary_every_s
    others = [p for p in range(8) if p != part(A)]
    assert all(rig.state.summaries[p].updated_at == T0 for p in others)
    late = T0 + rig.h.summary_heartbeat_s
    rig.tick(late)
    assert all(rig.state.summaries[p].updated_at == late for p in others)
