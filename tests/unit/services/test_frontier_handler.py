"""FrontierHandler against the in-memory CrawlState: seeds, leases, politeness, retries, expiry, rebuild.

The handler reads its injected clock for results and enqueues; `clock` is a controllable one, so that
result times and the `now` given to tick() share one timeline."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from streamcrawl_contracts.messages import FetchRequest, FetchResult, SeedMessage, UrlCandidates, UrlMessage
from streamcrawl_contracts.topics import FETCH_REQUESTS, SEEDS, URL_CANDIDATES
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.partition import partition_for
from streamcrawl_core.politeness import HostOverride, PolitenessConfig
from streamcrawl_frontier.handler import FrontierHandler
from streamcrawl_frontier.results import MAX_ATTEMPTS
from streamcrawl_runtime.memory import MemoryCrawlState
from streamcrawl_runtime.ports.blobs import encode_page
from streamcrawl_runtime.ports.errors import PoisonMessage, TransientError
from streamcrawl_runtime.ports.loop import Output, Record
from streamcrawl_runtime.ports.state import HostState, QueuedUrl

T0 = 1_700_000_000.0
LEASE_S = 60.0
A, B = "a.test", "b.test"  # partitions 7 and 1 of 8


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def time(self) -> float:
        return self.t


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


def part(host: str) -> int:
    return partition_for(host, 8)


def rec(host: str | None, partition: int | None = None) -> Record:
    p = partition if partition is not None else part(host or "")
    return Record("t", p, 0, host, b"")


class Rig:
    def __init__(self, clock: Clock, state: MemoryCrawlState | None = None, assign: bool = True,
                 lookahead_s: float = 0.0, margin_s: float = 0.0) -> None:
        self.clock = clock
        self.state = state or MemoryCrawlState()
        # No lookahead by default: the timer tests read exact dispatch times (lookahead has its own tests).
        self.h = FrontierHandler(self.state, PolitenessConfig(jitter=0.0), lease_s=LEASE_S, partitions=8,
                                 lookahead_s=lookahead_s, margin_s=margin_s, clock=clock.time)
        if assign:
            self.run(self.h.on_assign(list(range(8))))

    def run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    def url(self, url: str, depth: int = 0, priority: int = 5, kind: str = "discovery") -> None:
        host = url.split("/")[2]
        msg = UrlMessage(url=url, host=host, url_fp=url_fingerprint(url), depth=depth, priority=priority,
                         kind=kind)  # type: ignore[arg-type]
        assert self.run(self.h.handle(rec(host), msg)) == []

    def tick(self, at: float) -> list[FetchRequest]:
        self.clock.t = at
        outs: Sequence[Output] = self.run(self.h.tick(at))
        assert all(o.topic == FETCH_REQUESTS and o.key == o.value.host for o in outs)  # type: ignore[attr-defined]
        return [o.value for o in outs]  # type: ignore[misc]

    def result(self, req: FetchRequest, at: float, outcome: str = "fetched", status: int | None = 200,
               fetch_s: float = 0.05, lease_id: str | None = None, **kw: Any) -> None:
        self.clock.t = at
        res = FetchResult(url=req.url, host=req.host, url_fp=req.url_fp, depth=req.depth, kind=req.kind,
                          lease_id=lease_id or req.lease_id, outcome=outcome, status=status,  # type: ignore[arg-type]
                          started_at=at - fetch_s, fetch_s=fetch_s, **kw)
        assert self.run(self.h.handle(rec(req.host), res)) == []


# ------------------------------------------------------------------ seeds

@pytest.mark.parametrize("key,partition", [(None, 0), ("A.TEST", part(A)), (A, (part(A) + 1) % 8)])
def test_seed_on_wrong_key_or_partition_is_rerouted_normalized(clock: Clock, key: str | None, partition: int) -> None:
    rig = Rig(clock)
    seed = SeedMessage(url="HTTP://A.Test:80/x/../y?b=1&a=2#f", priority=2)
    outs = rig.run(rig.h.handle(rec(key, partition), seed))
    assert len(outs) == 1
    assert outs[0].topic == SEEDS and outs[0].key == A
    assert outs[0].value.url == "http://a.test/y?a=2&b=1" and outs[0].value.priority == 2


def test_seed_on_owning_partition_becomes_candidate(clock: Clock) -> None:
    rig = Rig(clock)
    outs = rig.run(rig.h.handle(rec(A), SeedMessage(url="http://a.test/y?b=1&a=2", source="ui")))
    assert len(outs) == 1 and outs[0].topic == URL_CANDIDATES and outs[0].key == A
    cand = outs[0].value
    assert isinstance(cand, UrlCandidates)
    assert (cand.urls, cand.host, cand.depth, cand.source_url) == (["http://a.test/y?a=2&b=1"], A, 0, "seed:ui")
    assert cand.url_fps == [url_fingerprint(cand.urls[0])]
    assert rig.state.queue == {}  # seeds go through dedup; nothing queued yet


@pytest.mark.parametrize("bad", ["not a url", "http://", "ftp://a.test/x", "http://exa mple.com/"])
def test_malformed_seed_is_poison(clock: Clock, bad: str) -> None:
    rig = Rig(clock)
    with pytest.raises(PoisonMessage):
        rig.run(rig.h.handle(rec(None, 0), SeedMessage(url=bad)))


# ------------------------------------------------------------------ dispatch and leases

def test_url_is_queued_then_dispatched_with_a_durable_lease(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1", depth=3)
    assert (part(A), A, url_fingerprint("http://a.test/1")) in rig.state.queue
    [req] = rig.tick(T0)
    assert (req.url, req.host, req.depth, req.kind) == ("http://a.test/1", A, 3, "discovery")
    assert req.url_fp == url_fingerprint(req.url) and req.lease_expires_at == T0 + LEASE_S
    hs = rig.state.hosts[A]
    assert (hs.lease_id, hs.lease_url, hs.lease_expires_at) == (req.lease_id, req.url, T0 + LEASE_S)


def test_failed_lease_write_returns_nothing_for_that_host(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    rig.url("http://b.test/1")
    real = rig.state.host_put_lease

    async def a_down(host: str, *a: Any) -> None:
        if host == A:
            raise TransientError("cassandra down")
        await real(host, *a)

    rig.state.host_put_lease = a_down  # type: ignore[method-assign]
    reqs = rig.tick(T0)  # the tick's leases go out together; one failing loses no other
    assert [r.url for r in reqs] == ["http://b.test/1"]
    assert rig.h.stats()["in_flight"] == 1 and rig.h.stats()["queued"] == 1  # a.test's URL stays queued
    rig.state.host_put_lease = real  # type: ignore[method-assign]
    assert [r.url for r in rig.tick(T0 + 1.0)] == ["http://a.test/1"]  # released behind min_delay_s


def test_host_recovers_after_a_failed_lease_write(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    real = rig.state.host_put_lease

    async def down(*_a: Any) -> None:
        raise TransientError("cassandra down")

    rig.state.host_put_lease = down  # type: ignore[method-assign]
    assert rig.tick(T0) == []
    rig.state.host_put_lease = real  # type: ignore[method-assign]
    # Was: the host stayed leased in the Frontier with no Lease to expire, so it was never dispatched again.
    reqs = rig.tick(T0 + 1.0)  # released behind min_delay_s
    assert [r.url for r in reqs] == ["http://a.test/1"]
    assert rig.state.hosts[A].lease_id == reqs[0].lease_id


def test_one_lease_per_host_until_its_result(clock: Clock) -> None:
    rig = Rig(clock)
    for u in ("http://a.test/1", "http://a.test/2", "http://b.test/1"):
        rig.url(u)
    first = rig.tick(T0)
    assert sorted(r.host for r in first) == [A, B]
    assert rig.tick(T0 + 30) == []  # both leases live, no result yet
    ra = next(r for r in first if r.host == A)
    rig.result(ra, T0 + 31, fetch_s=0.05)
    [nxt] = rig.tick(T0 + 32.5)
    assert nxt.url == "http://a.test/2" and nxt.lease_id != ra.lease_id
    assert rig.state.hosts[A].lease_id == nxt.lease_id
    assert (part(A), A, ra.url_fp) not in rig.state.queue  # done: the queue row is gone


def test_result_carrying_its_body_frees_the_host_like_any_result(clock: Clock) -> None:
    """body_gz (the page inline, for the parser) changes nothing for the frontier."""
    seen = []
    for body_gz in (None, encode_page(b"<p>x</p>" * 50)):
        clock.t = T0
        rig = Rig(clock)
        rig.url("http://a.test/1")
        rig.url("http://a.test/2")
        [r1] = rig.tick(T0)
        rig.result(r1, T0 + 2, body_gz=body_gz)
        hs = rig.state.hosts[A]
        seen.append((hs.lease_id, hs.next_allowed_at, sorted(rig.state.queue)))
        assert [r.url for r in rig.tick(T0 + 3)] == ["http://a.test/2"]
    assert seen[0] == seen[1]


@pytest.mark.parametrize("fetch_s,crawl_delay,truncated,wait",
                         [(0.01, None, False, 1.0), (0.5, None, False, 5.0), (0.2, 8.0, False, 8.0),
                          (0.4, None, True, 8.0)])  # a truncated exchange counts twice its measured time
def test_politeness_delay_after_a_fetch(clock: Clock, fetch_s: float, crawl_delay: float | None,
                                        truncated: bool, wait: float) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [r1] = rig.tick(T0)
    done_at = T0 + 2
    rig.result(r1, done_at, fetch_s=fetch_s, crawl_delay_s=crawl_delay, truncated=truncated)
    assert rig.state.hosts[A].next_allowed_at == pytest.approx(done_at + wait, abs=0.002)
    assert rig.state.hosts[A].lease_id is None
    assert rig.tick(done_at + wait - 0.01) == []
    assert [r.url for r in rig.tick(done_at + wait)] == ["http://a.test/2"]


def test_429_with_retry_after_is_retried_with_backoff_at_most_max_attempts(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    t, fetched = T0, 0
    while True:
        reqs = rig.tick(t)
        if not reqs:
            break
        [req] = reqs
        assert req.url == "http://a.test/1"
        fetched += 1
        rig.result(req, t + 1, outcome="http_error", status=429, retry_after_s=30.0)
        assert rig.state.hosts[A].backoff_level == fetched
        assert rig.tick(t + 1 + 29.9) == []  # Retry-After is honoured
        t += 1 + 3600.0  # far beyond any back-off
    assert fetched == MAX_ATTEMPTS
    assert rig.state.queue == {}  # given up: the row is deleted


def test_network_error_then_success_resets_backoff(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.result(req, T0 + 1, outcome="network_error", status=None)
    assert rig.state.hosts[A].backoff_level == 1
    assert rig.tick(T0 + 1 + 4.0) == []  # backoff_base_s = 5
    [again] = rig.tick(T0 + 1 + 5.0)
    rig.result(again, T0 + 7)
    assert rig.state.hosts[A].backoff_level == 0 and rig.state.queue == {}


@pytest.mark.parametrize("outcome", ["robots_fetched", "probe_fetched", "soft404_suspect"])
def test_robots_or_probe_fetched_requeues_the_page_behind_politeness(clock: Clock, outcome: str) -> None:
    """robots.txt or the soft-404 probe was the lease's one request (or the page was held back until its host
    is probed): the page itself is still to fetch."""
    rig = Rig(clock)
    rig.url("http://a.test/page", depth=2)
    [req] = rig.tick(T0)
    rig.result(req, T0 + 1, outcome=outcome, status=200, fetch_s=0.05)
    assert (part(A), A, req.url_fp) in rig.state.queue
    assert rig.tick(T0 + 1.5) == []
    [again] = rig.tick(T0 + 2.0)
    assert (again.url, again.depth) == ("http://a.test/page", 2) and again.lease_id != req.lease_id


# ------------------------------------------------------------------ expiry and stale results

def test_expired_lease_releases_and_redispatches_and_stale_result_is_ignored(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [old] = rig.tick(T0)
    assert rig.tick(T0 + LEASE_S - 1) == []
    assert rig.tick(T0 + LEASE_S) == []  # expired and released, but min_delay (1 s) applies
    assert rig.state.hosts[A].lease_id is None
    [new] = rig.tick(T0 + LEASE_S + 1)
    assert new.url == "http://a.test/1" and new.lease_id != old.lease_id
    # The late result of the expired lease must not free the host: the new lease is live.
    rig.result(old, T0 + LEASE_S + 2)
    assert rig.tick(T0 + LEASE_S + 20) == []
    assert rig.state.hosts[A].lease_id == new.lease_id
    rig.result(new, T0 + LEASE_S + 21)
    assert [r.url for r in rig.tick(T0 + LEASE_S + 23)] == ["http://a.test/2"]


def test_expired_lease_whose_request_is_running_stays_in_force_until_its_result(clock: Clock) -> None:
    """Seen in a benchmark: the fetcher started a robots.txt request just before the lease expired, the
    frontier freed the host at the expiry, and the next lease's request reached the host 0.75 s after the
    first one's response. A started lease now stays in force while its request may run (max_request_s)."""
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.run(rig.state.host_put_started_lease(A, req.lease_id, T0 + LEASE_S - 6))
    assert rig.tick(T0 + LEASE_S) == [] and rig.tick(T0 + LEASE_S + 30) == []
    assert rig.state.hosts[A].lease_id == req.lease_id  # still leased
    rig.result(req, T0 + LEASE_S + 31, outcome="robots_fetched", status=200, fetch_s=2.0, ended_at=T0 + LEASE_S + 31)
    assert rig.state.hosts[A].lease_id is None
    assert rig.tick(T0 + LEASE_S + 50.9) == []  # 10x the 2 s robots fetch after its end
    [again] = rig.tick(T0 + LEASE_S + 51)
    assert again.url == req.url


def test_started_lease_without_a_result_after_the_longest_request_holds_the_host(clock: Clock) -> None:
    """No result even after the longest request could have run: the fetcher died or hangs. The host may have
    been busy with us since the start, so it waits 10x that; no back-off."""
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.run(rig.state.host_put_started_lease(A, req.lease_id, T0 + 1))
    assert rig.tick(T0 + LEASE_S) == []
    assert rig.state.hosts[A].lease_id == req.lease_id
    longest = T0 + 1 + rig.h.max_request_s
    assert rig.tick(longest - 0.1) == []
    assert rig.tick(longest) == []
    hs = rig.state.hosts[A]
    held = longest + 10 * rig.h.max_request_s
    assert hs.lease_id is None and hs.backoff_level == 0 and hs.next_allowed_at == pytest.approx(held, abs=1e-3)
    assert rig.tick(held - 0.1) == []
    [again] = rig.tick(held)
    assert again.url == req.url and again.lease_id != req.lease_id


def test_expiry_whose_lease_read_fails_is_tried_again_on_the_next_tick(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    real = rig.state.host_lease

    async def down(host: str) -> Any:
        raise TransientError("cassandra down")

    rig.state.host_lease = down  # type: ignore[method-assign]
    with pytest.raises(TransientError):
        rig.tick(T0 + LEASE_S)
    assert rig.h.stats()["in_flight"] == 1  # still leased, not lost
    rig.state.host_lease = real  # type: ignore[method-assign]
    assert rig.tick(T0 + LEASE_S + 0.5) == []  # expired now: the 1 s minimum runs from here
    [again] = rig.tick(T0 + LEASE_S + 1.5)
    assert again.url == req.url


@pytest.mark.parametrize("mark", ["finished", "other_lease"])
def test_expired_lease_without_an_unfinished_request_frees_the_host_after_the_minimum(clock: Clock,
                                                                                     mark: str) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.run(rig.state.host_put_started_lease(A, req.lease_id if mark == "finished" else "OLD", T0 + 1))
    if mark == "finished":  # its result is on the way, late: that result's politeness applies when it comes
        rig.run(rig.state.host_put_fetched_lease(A, req.lease_id))
    assert rig.tick(T0 + LEASE_S) == []
    [again] = rig.tick(T0 + LEASE_S + 1)
    assert again.url == req.url


def test_fetcher_reported_lease_expired_requeues_without_politeness_penalty(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.result(req, T0 + 1, outcome="lease_expired", status=None)
    assert rig.state.hosts[A].lease_id is None and rig.state.hosts[A].backoff_level == 0
    assert [r.url for r in rig.tick(T0 + 2)] == ["http://a.test/1"]


def test_interrupted_request_requeues_the_url_and_holds_the_host_ten_times_as_long_without_back_off(
        clock: Clock) -> None:
    """The fetcher died while the host served /1 (started at T0 + 1); its replay at T0 + 13 makes no request
    and reports `interrupted`: the host may have been busy with us for 12 s, so it waits 120 s after that."""
    rig = Rig(clock)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2", priority=6)
    [req] = rig.tick(T0)
    rig.result(req, T0 + 13, outcome="interrupted", status=None, fetch_s=12.0, ended_at=T0 + 13)
    hs = rig.state.hosts[A]
    assert hs.lease_id is None and hs.backoff_level == 0 and hs.next_allowed_at == pytest.approx(T0 + 133, abs=1e-6)
    assert (part(A), A, req.url_fp) in rig.state.queue  # not finished: it is fetched again
    assert rig.tick(T0 + 132.9) == []
    [again] = rig.tick(T0 + 133)
    assert again.url == "http://a.test/1"  # kept its place ahead of /2
    rig.result(again, T0 + 134)
    assert (part(A), A, req.url_fp) not in rig.state.queue


def test_interrupted_request_of_a_host_with_a_known_fetch_time_waits_ten_times_that_from_now(clock: Clock) -> None:
    """After a kill -9 the replay reports `interrupted` 26 s after the request started (the session timeout
    and the rebalance, not the host, took that long). The host answered its last page in 0.2 s: it waits
    the usual delay, max(1 s, 10 x 0.2 s), from now, not 260 s."""
    rig = Rig(clock)
    for i in range(1, 4):
        rig.url(f"http://a.test/{i}", priority=4 + i)
    [first] = rig.tick(T0)
    rig.result(first, T0 + 1, fetch_s=0.2)
    [req] = rig.tick(T0 + 3)
    rig.result(req, T0 + 30, outcome="interrupted", status=None, fetch_s=26.0, ended_at=T0 + 30)
    hs = rig.state.hosts[A]
    assert hs.next_allowed_at == pytest.approx(T0 + 32, abs=1e-6) and hs.last_fetch_ms == pytest.approx(200.0)
    [again] = rig.tick(T0 + 32)
    assert again.url == req.url


def test_interrupted_result_of_a_pre_restart_lease_holds_the_host_and_keeps_the_url(clock: Clock) -> None:
    rig, state, req = _rebuilt_with_live_lease(clock)
    # the rebuilt frontier blocked the host until the lease's expiry (T0 + 50): the hold is later still
    rig.result(req, T0 + 5, outcome="interrupted", status=None, fetch_s=10.0, ended_at=T0 + 5)
    assert state.hosts[A].lease_id is None and state.hosts[A].next_allowed_at == pytest.approx(T0 + 105, abs=1e-6)
    assert rig.tick(T0 + 104.9) == []
    [again] = rig.tick(T0 + 105)
    assert again.url == req.url and again.lease_id != "L1"


def test_replayed_interrupted_result_of_a_url_finished_since_does_not_queue_it_again(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.result(req, T0 + 2, outcome="interrupted", status=None, fetch_s=1.0, ended_at=T0 + 2)
    [again] = rig.tick(T0 + 12)
    rig.result(again, T0 + 13)  # fetched and finished
    assert rig.state.queue == {}
    rig.result(req, T0 + 14, outcome="interrupted", status=None, fetch_s=1.0, ended_at=T0 + 2)  # replayed
    assert rig.h.stats()["queued"] == 0 and rig.tick(T0 + 100) == []


def test_stale_interrupted_result_does_not_touch_a_live_lease(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    stale = req.model_copy(update={"lease_id": "OLD"})
    rig.result(stale, T0 + 1, outcome="interrupted", status=None, fetch_s=50.0, ended_at=T0 + 1)
    assert rig.state.hosts[A].lease_id == req.lease_id
    rig.result(req, T0 + 2, fetch_s=0.05)
    assert rig.state.hosts[A].next_allowed_at == pytest.approx(T0 + 3, abs=1e-6)


# ------------------------------------------------------------------ rebalance

def _persisted(state: MemoryCrawlState, url: str, depth: int = 0, priority: int = 5) -> None:
    host = url.split("/")[2]
    fp = url_fingerprint(url)
    asyncio.run(state.queue_put(QueuedUrl(part(host), host, fp, url, priority, "discovery", 0.0, depth, T0 - 100)))


def test_on_assign_rebuilds_queue_and_keeps_live_lease_blocked(clock: Clock) -> None:
    state = MemoryCrawlState()
    _persisted(state, "http://a.test/1", depth=4)
    _persisted(state, "http://b.test/1")
    _persisted(state, "http://c.test/1")
    state.hosts[A] = HostState(A, next_allowed_at=T0 - 5, lease_id="L1", lease_url="http://a.test/1",
                               lease_expires_at=T0 + 30)
    state.hosts[B] = HostState(B, next_allowed_at=T0 + 10, backoff_level=2)
    rig = Rig(clock, state)
    assert sorted(r.host for r in rig.tick(T0)) == ["c.test"]
    assert rig.tick(T0 + 9.9) == []
    assert [r.host for r in rig.tick(T0 + 10)] == [B]
    assert rig.tick(T0 + 29.9) == []
    [ra] = rig.tick(T0 + 30)
    assert (ra.url, ra.depth) == ("http://a.test/1", 4)


def test_stale_result_after_rebuild_does_not_free_a_live_persisted_lease(clock: Clock) -> None:
    state = MemoryCrawlState()
    _persisted(state, "http://a.test/1")
    state.hosts[A] = HostState(A, lease_id="L1", lease_url="http://a.test/1", lease_expires_at=T0 + 50)
    rig = Rig(clock, state)
    stale = FetchRequest(url="http://a.test/1", host=A, url_fp=url_fingerprint("http://a.test/1"),
                         lease_id="OLDER", lease_expires_at=T0 - 100)
    rig.result(stale, T0 + 1)
    assert rig.tick(T0 + 10) == []


def _rebuilt_with_live_lease(clock: Clock, url: str = "http://a.test/1") -> tuple[Rig, MemoryCrawlState, FetchRequest]:
    """A frontier rebuilt after a crash: `url` is queued and its pre-crash lease L1 is still live."""
    state = MemoryCrawlState()
    _persisted(state, url)
    state.hosts[A] = HostState(A, lease_id="L1", lease_url=url, lease_expires_at=T0 + 50)
    rig = Rig(clock, state)
    req = FetchRequest(url=url, host=A, url_fp=url_fingerprint(url), lease_id="L1", lease_expires_at=T0 + 50)
    return rig, state, req


def test_result_of_pre_restart_lease_completes_the_url(clock: Clock) -> None:
    rig, state, req = _rebuilt_with_live_lease(clock)
    rig.result(req, T0 + 1)
    assert state.queue == {}
    assert rig.tick(T0 + 100) == []


def test_late_result_of_a_restored_lease_does_not_release_the_rebuilt_copy_during_its_write(clock: Clock) -> None:
    """Seen in the scale e2e after a 1 -> 3 scale-out (10 repeats of 924): the new owner rebuilt /1 into
    its queue with the old owner's lease restored; the lease's result came in 5 s after the fetch ended, so
    the host's next time from that fetch was already past, and a tick that ran while the result's finish
    was being written leased the rebuilt copy of /1 again: it was cancelled only once the write was back."""
    rig, state, req = _rebuilt_with_live_lease(clock)
    real = state.host_politeness_and_finish

    async def scenario() -> list[str]:
        gate = asyncio.Event()
        writing = asyncio.Event()

        async def slow(*a: Any) -> None:
            writing.set()
            await gate.wait()
            await real(*a)

        state.host_politeness_and_finish = slow  # type: ignore[method-assign]
        clock.t = T0 + 5.0  # handled 5 s after the fetch ended at T0 + 1: its delay (1 s) is over
        res = FetchResult(url=req.url, host=A, url_fp=req.url_fp, lease_id="L1", outcome="fetched", status=200,
                          started_at=T0 + 0.95, ended_at=T0 + 1.0, fetch_s=0.05)
        handled = asyncio.create_task(rig.h.handle(rec(A), res))
        await writing.wait()
        during = [o.value.url for o in await rig.h.tick(T0 + 5.0)]  # type: ignore[attr-defined]
        gate.set()
        await handled
        return during

    assert asyncio.run(scenario()) == []
    assert state.queue == {} and state.hosts[A].lease_id is None
    assert [r.url for t in (6.0, 7.0, 100.0) for r in rig.tick(T0 + t)] == []


def test_result_of_pre_restart_lease_keeps_the_hosts_agreed_rate(clock: Clock) -> None:
    """The result of a lease restored from host_state reaches a host that is not in flight in the rebuilt
    frontier; its next time must still use the host's override (it once used the global 1 s minimum)."""
    rig, state, req = _rebuilt_with_live_lease(clock, "http://a.test/1")
    _persisted(state, "http://a.test/2")
    state.overrides[A] = HostOverride(min_delay_s=7.0)
    rig.run(rig.h.refresh_overrides(T0))
    rig.run(rig.h.on_revoke(list(range(8))))
    rig.run(rig.h.on_assign(list(range(8))))  # rebuilt with /2 queued and L1 live
    rig.result(req, T0 + 1, fetch_s=0.05)
    assert state.hosts[A].next_allowed_at == pytest.approx(T0 + 1 + 7.0, abs=0.002)
    assert rig.tick(T0 + 7.5) == []  # 1 s (the global minimum) has long passed: the override holds the host
    # At T0 + 8 the rebuilt queue's copy of /1 (finished) is skipped, which costs the host one delay.
    assert [r.url for t in (8.01, 15.02, 22.03) for r in rig.tick(T0 + t)] == ["http://a.test/2"]


def test_replayed_discovery_of_a_finished_url_leaves_no_durable_row(clock: Clock) -> None:
    # Seen in CI after kill -9: the rebuilt queue held /1, its pre-restart lease's result finished it, then
    # dedup's replay re-emitted /1. Memory skipped it at dispatch but the re-written row stayed for ever,
    # so the durable queue never drained.
    rig, state, req = _rebuilt_with_live_lease(clock)
    rig.result(req, T0 + 1)
    rig.url("http://a.test/1", depth=1)  # the replayed discovery: /1 is still in memory, nothing is written
    assert rig.tick(T0 + 100) == []
    assert state.queue == {}
    assert rig.h.stats()["queued"] == 0


def _live_lease_on_2_and_stale_request_for_1(clock: Clock) -> tuple[Rig, MemoryCrawlState, FetchRequest]:
    """Rebuilt after a crash: /1 and /2 queued, lease L2 (for /2) live, and a request for /1 under L0, a
    lease from before the crash."""
    state = MemoryCrawlState()
    _persisted(state, "http://a.test/1")
    _persisted(state, "http://a.test/2")
    state.hosts[A] = HostState(A, lease_id="L2", lease_url="http://a.test/2", lease_expires_at=T0 + 50)
    rig = Rig(clock, state)
    old = FetchRequest(url="http://a.test/1", host=A, url_fp=url_fingerprint("http://a.test/1"),
                       lease_id="L0", lease_expires_at=T0 - 10)
    return rig, state, old


def test_stale_lease_result_that_fetched_the_page_finishes_the_url(clock: Clock) -> None:
    rig, state, old = _live_lease_on_2_and_stale_request_for_1(clock)
    rig.result(old, T0 + 1)  # fetched under a lease from before the crash
    req2 = FetchRequest(url="http://a.test/2", host=A, url_fp=url_fingerprint("http://a.test/2"),
                        lease_id="L2", lease_expires_at=T0 + 50)
    rig.result(req2, T0 + 2)
    assert rig.tick(T0 + 100) == []  # /1 is not fetched a second time
    assert state.queue == {}


def test_replayed_discovery_of_a_url_the_frontier_finished_is_dropped(clock: Clock) -> None:
    # Seen in the kill -9 e2e: dedup re-sent ~80 seed discoveries after its restart and they were fetched a
    # second time. The frontier marks finished URLs in url_state and drops replays of them.
    rig = Rig(clock)
    url = "http://a.test/1"
    rig.run(rig.state.url_insert_discovered(A, url_fingerprint(url), url, 0, T0, "ev1"))
    rig.url(url)
    [req] = rig.tick(T0)
    rig.result(req, T0 + 0.1)
    assert rig.state.urls[(A, url_fingerprint(url))].frontier_done_at is not None
    replay = UrlMessage(url=url, host=A, url_fp=url_fingerprint(url), replayed=True)
    assert rig.run(rig.h.handle(rec(A), replay)) == []
    assert rig.state.queue == {} and rig.tick(T0 + 100) == []
    # A replay of a URL not finished yet is queued as usual (its first copy may never have arrived).
    url2 = "http://a.test/2"
    rig.run(rig.state.url_insert_discovered(A, url_fingerprint(url2), url2, 0, T0, "ev2"))
    rig.run(rig.h.handle(rec(A), UrlMessage(url=url2, host=A, url_fp=url_fingerprint(url2), replayed=True)))
    assert [r.url for r in rig.tick(T0 + 200)] == [url2]


@pytest.mark.parametrize("outcome", ["robots_fetched", "probe_fetched", "soft404_suspect"])
def test_stale_lease_result_that_fetched_no_page_keeps_the_url(clock: Clock, outcome: str) -> None:
    rig, _, old = _live_lease_on_2_and_stale_request_for_1(clock)
    rig.result(old, T0 + 1, outcome=outcome, status=404)  # only robots.txt / the probe was requested
    req2 = FetchRequest(url="http://a.test/2", host=A, url_fp=url_fingerprint("http://a.test/2"),
                        lease_id="L2", lease_expires_at=T0 + 50)
    rig.result(req2, T0 + 2)
    [again] = rig.tick(T0 + 100)  # /1 still has to be fetched
    assert again.url == "http://a.test/1"


def test_lookahead_dispatches_early_with_the_hosts_time_as_not_before(clock: Clock) -> None:
    rig = Rig(clock, lookahead_s=0.3)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [r1] = rig.tick(T0)
    assert r1.not_before == 0.0  # a fresh host may be contacted now
    # The fetcher reports the end of the exchange on its clock; the result reaches us 40 ms later.
    rig.result(r1, T0 + 0.54, fetch_s=0.05, ended_at=T0 + 0.5)
    assert rig.state.hosts[A].next_allowed_at == pytest.approx(T0 + 1.5, abs=0.002)
    assert rig.tick(T0 + 1.19) == []  # more than lookahead_s ahead
    [r2] = rig.tick(T0 + 1.21)
    assert r2.url == "http://a.test/2" and r2.not_before == pytest.approx(T0 + 1.5, abs=0.002)


def test_margin_is_added_to_the_fetchers_end_time(clock: Clock) -> None:
    rig = Rig(clock, margin_s=0.05)
    rig.url("http://a.test/1")
    [r1] = rig.tick(T0)
    rig.result(r1, T0 + 0.54, fetch_s=0.05, ended_at=T0 + 0.5)
    assert rig.state.hosts[A].next_allowed_at == pytest.approx(T0 + 1.55, abs=0.002)


def test_result_without_ended_at_times_the_delay_from_arrival(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [r1] = rig.tick(T0)
    rig.result(r1, T0 + 0.54, fetch_s=0.05, ended_at=None)
    assert rig.state.hosts[A].next_allowed_at == pytest.approx(T0 + 1.54, abs=0.002)


def test_an_ended_at_from_a_clock_far_ahead_is_capped(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [r1] = rig.tick(T0)
    rig.result(r1, T0 + 1, fetch_s=0.05, ended_at=T0 + 3600)
    assert rig.state.hosts[A].next_allowed_at == pytest.approx(T0 + 1 + 5 + 1, abs=0.002)


def test_on_revoke_drops_the_partition(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    rig.url("http://b.test/1")
    rig.run(rig.h.on_revoke([part(A)]))
    assert part(A) not in rig.h.frontiers
    assert [r.host for r in rig.tick(T0)] == [B]
    assert rig.h.stats()["queued"] == 0 and list(rig.h.leases) == [B]
    n = len(rig.state.queue)
    rig.url("http://a.test/2")  # arrives after the revoke: ignored, the new owner replays it
    assert len(rig.state.queue) == n
    # Re-assigning rebuilds from the durable rows.
    rig.run(rig.h.on_assign([part(A)]))
    assert [r.url for r in rig.tick(T0 + 1)] == ["http://a.test/1"]


def test_revoked_partition_leases_are_not_expired_by_this_instance(clock: Clock) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.run(rig.h.on_revoke([part(A)]))
    rig.tick(T0 + LEASE_S + 5)
    assert rig.state.hosts[A].lease_id == req.lease_id  # the new owner decides; we do not clear it


def test_control_plane_override_sets_the_host_rate(clock: Clock) -> None:
    """An agreed slower rate (min delay 5 s) from host_overrides spaces that host's fetches; others keep 1 s."""
    from streamcrawl_core.politeness import HostOverride

    state = MemoryCrawlState()
    state.overrides[A] = HostOverride(min_delay_s=5.0, delay_factor=None, page_budget=None)
    rig = Rig(clock, state)
    for u in ("http://a.test/1", "http://a.test/2", "http://b.test/1", "http://b.test/2"):
        rig.url(u)
    first = {r.host: r for r in rig.tick(T0)}
    assert set(first) == {A, B}
    for r in first.values():
        rig.result(r, T0 + 0.1, fetch_s=0.01)
    assert [r.host for r in rig.tick(T0 + 1.2)] == [B]       # B: max(1 s, 10 x 0.01 s)
    assert rig.tick(T0 + 5.0) == []                          # A: not before 5 s after its fetch ended
    assert [r.host for r in rig.tick(T0 + 5.2)] == [A]


def test_outstanding_leases_are_capped(clock: Clock) -> None:
    state = MemoryCrawlState()
    rig = Rig(clock, state)
    rig.h.max_leases = 1
    rig.url("http://a.test/1")
    rig.url("http://b.test/1")
    first = rig.tick(T0)
    assert len(first) == 1 and rig.tick(T0 + 0.5) == []   # the other host waits for a free lease
    rig.result(first[0], T0 + 1.0)
    [second] = rig.tick(T0 + 1.1)
    assert second.host != first[0].host


def test_fenced_replay_result_does_not_move_the_host_timer(clock: Clock) -> None:
    """A lease_expired result for a lease the frontier no longer holds (a fetcher replay it fenced) made
    no request: it must neither free nor re-time the host."""
    rig = Rig(clock)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [r1] = rig.tick(T0)
    rig.result(r1, T0 + 0.1, status=429, fetch_s=0.01, retry_after_s=30.0)  # back-off: >= 30 s
    stale = r1.model_copy(update={"lease_id": "OLD"})
    rig.result(stale, T0 + 0.2, outcome="lease_expired", status=None, fetch_s=0.0)
    assert rig.tick(T0 + 2.0) == []
    assert rig.tick(T0 + 29.0) == []


# ------------------------------------------------------------------ Cassandra requests per result

def test_a_finished_fetch_writes_politeness_and_finish_in_one_request(clock: Clock) -> None:
    rig = Rig(clock)
    url = "http://a.test/1"
    rig.run(rig.state.url_insert_discovered(A, url_fingerprint(url), url, 0, T0, "ev"))
    rig.url(url)
    rig.url("http://a.test/2")
    [req] = rig.tick(T0)
    assert req.url == url
    rig.state.calls.clear()
    rig.result(req, T0 + 1, fetch_s=0.05)
    assert rig.state.calls == [("host_politeness_and_finish", A, pytest.approx(T0 + 2, abs=1e-6), 0, req.url_fp)]
    # The host's last URL: its row leaves the partition's index too (once per host, not per page).
    [req2] = rig.tick(T0 + 2)
    rig.state.calls.clear()
    rig.result(req2, T0 + 3, fetch_s=0.05)
    assert [c[0] for c in rig.state.calls] == ["host_politeness_and_finish", "queue_unindex"]
    hs = rig.state.hosts[A]
    assert (hs.lease_id, hs.lease_expires_at, hs.last_fetch_ms) == (None, None, pytest.approx(50.0))
    assert rig.state.queue == {} and rig.state.urls[(A, req.url_fp)].frontier_done_at == T0 + 1
    assert url not in rig.h.meta and url not in rig.h.cancelled
    assert rig.state.queue_index == set() and A not in rig.h.known_hosts  # drained: out of memory too


@pytest.mark.parametrize("outcome,status", [("http_error", 503), ("network_error", None), ("robots_fetched", 200),
                                            ("probe_fetched", 404)])
def test_a_result_that_keeps_the_url_writes_only_politeness(clock: Clock, outcome: str, status: int | None) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.state.calls.clear()
    rig.result(req, T0 + 1, outcome=outcome, status=status)
    assert [c[0] for c in rig.state.calls] == ["host_put_politeness"]
    assert (part(A), A, req.url_fp) in rig.state.queue and req.url in rig.h.meta


def test_a_redirect_chain_travels_from_the_url_message_to_the_fetch_request(clock: Clock) -> None:
    """The hop count (the chain) survives the queue, a retry and a rebuild from Cassandra."""
    rig = Rig(clock)
    url = "http://a.test/hop3"
    msg = UrlMessage(url=url, host=A, url_fp=url_fingerprint(url), redirect_chain=[1, 2, 3])
    assert rig.run(rig.h.handle(rec(A), msg)) == []
    assert rig.state.queue[(part(A), A, msg.url_fp)].redirect_chain == (1, 2, 3)
    [req] = rig.tick(T0)
    assert req.redirect_chain == [1, 2, 3]
    rig.result(req, T0 + 1, outcome="network_error", status=None, redirect_chain=[1, 2, 3])  # retried
    [again] = rig.tick(T0 + 60)
    assert again.url == url and again.redirect_chain == [1, 2, 3]
    rebuilt = Rig(clock, rig.state)  # a new owner rebuilds the queue from the durable rows
    rebuilt.state.hosts[A].lease_expires_at = None
    [after] = rebuilt.tick(T0 + 200)
    assert after.url == url and after.redirect_chain == [1, 2, 3]


@pytest.mark.parametrize("outcome", ["redirect", "redirect_loop", "redirect_limit", "redirect_refused"])
def test_every_redirect_outcome_finishes_the_url(clock: Clock, outcome: str) -> None:
    rig = Rig(clock)
    rig.url("http://a.test/r")
    [req] = rig.tick(T0)
    rig.result(req, T0 + 1, outcome=outcome, status=301)
    assert rig.state.queue == {} and rig.tick(T0 + 60) == []


@pytest.mark.parametrize("outcome", ["blocked_address", "dns_error"])
def test_a_refused_or_unresolvable_url_is_finished_not_retried(clock: Clock, outcome: str) -> None:
    """blocked_address (the SSRF guard refused the address): no connection was made and none will be; the
    URL is done for the cycle, like a dns_error, and never handed out again."""
    rig = Rig(clock)
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.result(req, T0 + 1, outcome=outcome, status=None)
    assert (part(A), A, req.url_fp) not in rig.state.queue and req.url not in rig.h.meta
    assert rig.tick(T0 + 60) == []


def test_a_failed_politeness_and_finish_request_is_repaired_by_the_retry(clock: Clock) -> None:
    class Failing(MemoryCrawlState):
        fail = 1

        async def host_politeness_and_finish(self, *args: Any) -> None:
            if self.fail:
                self.fail -= 1
                raise TransientError("cassandra: timeout")
            await super().host_politeness_and_finish(*args)

    rig = Rig(clock, Failing())
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [req] = rig.tick(T0)
    with pytest.raises(TransientError):
        rig.result(req, T0 + 1)
    assert rig.state.hosts[A].lease_id == req.lease_id and (part(A), A, req.url_fp) in rig.state.queue
    assert req.url in rig.h.meta  # nothing forgotten before the write
    rig.result(req, T0 + 1)  # the loop's retry: the lease is gone from memory, the result still finishes
    assert rig.state.hosts[A].lease_id is None and (part(A), A, req.url_fp) not in rig.state.queue
    assert req.url not in rig.h.meta
    assert [r.url for r in rig.tick(T0 + 2)] == ["http://a.test/2"]


def test_a_finish_that_landed_without_its_politeness_is_repaired_by_the_replay(clock: Clock) -> None:
    # The unlogged batch is not atomic: the queue delete and frontier_done_at landed, the host_state write
    # (next_allowed_at, lease cleared) did not, then the frontier crashed before committing the result.
    rig = Rig(clock)
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    [req] = rig.tick(T0)
    leased = dataclasses.replace(rig.state.hosts[A])
    rig.result(req, T0 + 1)
    rig.state.hosts[A] = leased
    again = Rig(clock, rig.state)  # rebuilt from Cassandra
    assert again.tick(T0 + 2) == []  # the live lease keeps the host blocked
    again.result(req, T0 + 3)  # the replayed result
    # Its politeness written: the lease cleared, and the host timed from this result, no longer held until
    # the restored lease's expiry (T0 + LEASE_S), which only stood in for a request that might be running.
    hs = again.state.hosts[A]
    assert (hs.lease_id, hs.lease_expires_at, hs.next_allowed_at) == (None, None, T0 + 3 + 1.0)
    assert (part(A), A, req.url_fp) not in again.state.queue
    # /1 is not fetched again: its rebuilt copy is skipped (one delay), then /2 goes.
    assert [r.url for t in (4.0, 5.01, 6.02) for r in again.tick(T0 + t)] == ["http://a.test/2"]


def test_a_result_arriving_while_the_leases_are_written_does_not_lose_the_picked_url(clock: Clock) -> None:
    """After a restart, replayed results arrive while a tick's lease writes are in flight. One for a host
    just picked must be handled as stale (the host is leased), not complete the host in the Frontier: that
    forgot the picked URL, and when the fetcher then fenced its request (lease_expired) the URL could not
    go back to the queue: it was never fetched and its durable row never drained (seen in a kill -9 e2e)."""
    rig = Rig(clock)
    rig.url("http://a.test/1")
    real = rig.state.host_put_lease

    async def scenario() -> tuple[list[FetchRequest], int]:
        gate = asyncio.Event()
        started = asyncio.Event()

        async def slow(host: str, *a: Any) -> None:
            started.set()
            await gate.wait()
            await real(host, *a)

        rig.state.host_put_lease = slow  # type: ignore[method-assign]
        tick = asyncio.create_task(rig.h.tick(T0))
        await started.wait()
        old = "http://a.test/0"
        stale = FetchResult(url=old, host=A, url_fp=url_fingerprint(old), lease_id="BEFORE-RESTART",
                            outcome="fetched", status=200, started_at=T0 - 1, fetch_s=0.05)
        assert await rig.h.handle(rec(A), stale) == []
        gate.set()
        reqs = [o.value for o in await tick]
        [req] = reqs
        assert isinstance(req, FetchRequest)
        fenced = FetchResult(url=req.url, host=A, url_fp=req.url_fp, lease_id=req.lease_id,
                             outcome="lease_expired", status=None, started_at=T0, fetch_s=0.0)
        await rig.h.handle(rec(A), fenced)
        return reqs, rig.h.stats()["queued"]  # type: ignore[return-value]

    reqs, queued = asyncio.run(scenario())
    assert [r.url for r in reqs] == ["http://a.test/1"]
    assert queued == 1  # the fenced URL is back in the queue
    assert [r.url for r in rig.tick(T0 + 2.0)] == ["http://a.test/1"]


def test_tick_due_follows_the_next_host_timer_not_a_fixed_period(clock: Clock) -> None:
    """The run loop sleeps until tick_due: nothing queued, the next work is the overrides refresh; a
    ready host is due at once; a host waiting on its delay is due at its timer less the lookahead."""
    rig = Rig(clock, lookahead_s=0.3)
    assert rig.h.tick_due(T0) == T0  # the pauses were never read: nothing is leased before they are
    rig.tick(T0)  # reads the overrides and pauses, writes the summaries: the next is the soonest of those
    assert rig.h.tick_due(T0) == T0 + min(rig.h.pauses_refresh_s, rig.h.summary_every_s, 30.0) == T0 + 5.0
    # out of the way of the lease below
    rig.h.overrides_refresh_s = rig.h.pauses_refresh_s = rig.h.summary_every_s = rig.h.index_sweep_s = 1000.0
    rig.url("http://a.test/1")
    rig.url("http://a.test/2")
    assert rig.h.tick_due(T0) <= T0
    [req] = rig.tick(T0)
    # In flight: the host's next time comes from its result; the lease's expiry check is the next work.
    assert rig.h.tick_due(T0) == req.lease_expires_at
    rig.result(req, T0 + 0.5)
    assert rig.h.tick_due(T0 + 0.5) == pytest.approx(T0 + 0.5 + 1.0 - 0.3)
    assert rig.tick(T0 + 1.0) == []  # before tick_due: nothing to do
    [nxt] = rig.tick(T0 + 1.2)
    assert nxt.url == "http://a.test/2"
    rig.h.paused = frozenset({"*"})  # everything paused: no host timer counts, only the next read of the pauses
    rig.result(nxt, T0 + 1.3)
    assert rig.h.tick_due(T0 + 1.3) == T0 + 1000.0


class _PolitenessFailsOnce(MemoryCrawlState):
    """host_state's politeness write fails once (Cassandra restarting), then works."""
    fail = 1

    async def host_put_politeness(self, *args: Any, **kw: Any) -> None:
        if self.fail:
            self.fail -= 1
            raise TransientError("cassandra: CassErrorLibNoHostsAvailable")
        await super().host_put_politeness(*args, **kw)


@pytest.mark.parametrize(("outcome", "status"), [("probe_fetched", 404), ("robots_fetched", 200),
                                                  ("http_error", 503), ("network_error", None)])
def test_a_url_kept_by_its_result_survives_a_failed_write_and_a_lease_granted_before_the_retry(
        clock: Clock, outcome: str, status: int | None) -> None:
    """A result that keeps its URL (only the probe or robots.txt was fetched, or a retry) and whose write
    fails: before the loop's retry, a tick may lease the host's next URL (the first attempt had freed the
    host). The retry then reads as stale, and the kept URL must already be back in the queue. It was not:
    the URL was lost from memory with its durable row left behind (an engine-restart e2e run lost
    /p/1.html of a host whose probe answer came back while Cassandra restarted)."""
    rig = Rig(clock, _PolitenessFailsOnce())
    rig.url("http://a.test/1", priority=1)
    rig.url("http://a.test/2", priority=2)
    [req] = rig.tick(T0)
    assert req.url == "http://a.test/1"
    with pytest.raises(TransientError):
        rig.result(req, T0 + 1, outcome=outcome, status=status)
    [nxt] = rig.tick(T0 + 1 + 60)  # the host's next turn (after any back-off): a URL of it is leased
    rig.result(req, T0 + 62, outcome=outcome, status=status)  # the retry, while that lease is live
    rig.result(nxt, T0 + 63)
    fetched = [nxt.url]
    for t in range(64, 400):
        for r in rig.tick(T0 + t):
            fetched.append(r.url)
            rig.result(r, T0 + t + 0.1)
    assert sorted(fetched) == ["http://a.test/1", "http://a.test/2"]
    assert rig.state.queue == {}


class _HostReadFailsOnce(MemoryCrawlState):
    fail = 0  # how many host_state reads fail from now

    async def host_get(self, host: str) -> Any:
        if self.fail:
            self.fail -= 1
            raise TransientError("cassandra: timeout")
        return await super().host_get(host)


def test_an_interrupted_result_whose_host_read_fails_puts_the_url_back_before_the_retry(clock: Clock) -> None:
    """The interrupted path reads the host's last fetch time, and the first attempt had already ended the
    lease: the retry is a lease-less result, which moves only the timer. The host stayed in flight with no
    lease left to expire, and its URL was never fetched."""
    rig = Rig(clock, _HostReadFailsOnce())
    rig.url("http://a.test/1")
    [req] = rig.tick(T0)
    rig.state.fail = 1  # type: ignore[attr-defined]
    with pytest.raises(TransientError):
        rig.result(req, T0 + 13, outcome="interrupted", status=None, fetch_s=12.0, ended_at=T0 + 13)
    rig.result(req, T0 + 14, outcome="interrupted", status=None, fetch_s=12.0, ended_at=T0 + 13)  # the retry
    hs = rig.state.hosts[A]
    assert hs.lease_id is None and hs.next_allowed_at == pytest.approx(T0 + 133, abs=1e-6)
    assert rig.tick(T0 + 132.9) == []  # held the 10x of the whole interrupted fetch
    [again] = rig.tick(T0 + 133)
    assert again.url == req.url and again.lease_id != req.lease_id
    rig.result(again, T0 + 134)
    assert rig.state.queue == {}
