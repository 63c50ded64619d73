"""Frontier: politeness, idempotence, priority bias without starvation, kind split, back-off,
restore, release -- plus a stateful property test against a simple model."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from streamcrawl_core.frontier import Frontier, FrontierConfig
from streamcrawl_core.politeness import HostOverride, PolitenessConfig

T = 1000.0


def drain(f: Frontier, now: float, n: int) -> list[tuple[str, int, str]]:
    """Lease and immediately finish up to n items at a fixed `now` (hosts differ)."""
    out: list[tuple[str, int, str]] = []
    for _ in range(n):
        item = f.next(now)
        if item is None:
            break
        out.append((item.host, item.priority, item.kind))
        f.done(item.host, now, 0.0, 200)
    return out


class TestPoliteness:
    def test_one_in_flight_per_host_and_timer(self) -> None:
        f = Frontier()
        assert f.add("http://a/1", "a") and f.add("http://a/2", "a")
        item = f.next(T)
        assert item is not None and item.url == "http://a/1" and f.in_flight_count == 1
        assert f.next(T + 1e6) is None  # in flight: never a second lease for that host
        allowed = f.done("a", T + 0.2, 0.2, 200)
        assert allowed == pytest.approx(T + 0.2 + 2.0)  # 10 x 0.2 s
        assert f.next(allowed - 1e-6) is None
        second = f.next(allowed)
        assert second is not None and second.url == "http://a/2"

    def test_other_hosts_are_not_blocked(self) -> None:
        f = Frontier()
        for h in "abc":
            f.add(f"http://{h}/1", h)
            f.add(f"http://{h}/2", h)
        hosts = [f.next(T) for _ in range(4)]
        assert sorted(i.host for i in hosts[:3] if i) == ["a", "b", "c"] and hosts[3] is None

    def test_crawl_delay_and_override(self) -> None:
        f = Frontier()
        f.set_host_params("a", crawl_delay_s=7.0)
        f.add("http://a/1", "a")
        f.next(T)
        assert f.done("a", T, 0.01, 200) == T + 7.0
        f.set_host_params("b", override=HostOverride(min_delay_s=0.1, delay_factor=1.0))
        f.add("http://b/1", "b")
        f.next(T)
        assert f.done("b", T, 0.05, 200) == pytest.approx(T + 0.1, abs=1e-6)
        f.add("http://c/1", "c")
        f.next(T)
        assert f.done("c", T, 0.01, 200, crawl_delay_s=100.0) == T + 30.0  # capped
        f.add("http://c/2", "c")
        assert f.next(T + 29) is None  # remembered crawl-delay

    def test_not_before_and_wakeup(self) -> None:
        f = Frontier()
        assert f.next_wakeup() is None
        f.add("http://a/later", "a", not_before=T + 50, kind="refresh")
        assert f.next(T) is None and len(f) == 1 and f.queued_for("a") == 1
        assert f.next_wakeup() == T + 50
        item = f.next(T + 50)
        assert item is not None and item.kind == "refresh" and item.not_before == T + 50
        assert f.next_wakeup() is None  # only done() can help now
        f.add("http://a/2", "a")
        f.done("a", T + 51, 0.0, 200)
        assert f.next_wakeup() == T + 52
        f.add("http://b/1", "b")
        assert f.next(T + 51.5) is not None  # b ready; a still waiting
        assert f.next_wakeup() == T + 52


class TestIdempotentAdd:
    def test_queued_and_in_flight_urls_are_rejected(self) -> None:
        f = Frontier()
        assert f.add("http://a/1", "a", priority=3)
        assert not f.add("http://a/1", "a", priority=0)
        assert not f.add("http://a/1", "zzz", kind="refresh")
        assert len(f) == 1 and f.hosts_count == 1 and f.is_known("http://a/1")
        item = f.next(T)
        assert item is not None and item.priority == 3  # the second add changed nothing
        assert not f.add("http://a/1", "a")  # in flight
        f.done("a", T, 0.0, 200)
        assert not f.is_known("http://a/1")
        assert f.add("http://a/1", "a")  # finished: may be queued again (recrawl)

    @pytest.mark.parametrize(
        ("kwargs", "exc"),
        [
            ({"url": "", "host": "a"}, ValueError),
            ({"url": "u", "host": ""}, ValueError),
            ({"url": "u", "host": "a", "priority": 10}, ValueError),
            ({"url": "u", "host": "a", "priority": -1}, ValueError),
            ({"url": "u", "host": "a", "priority": 1.5}, ValueError),
            ({"url": "u", "host": "a", "kind": "other"}, ValueError),
            ({"url": "u", "host": "a", "not_before": math.nan}, ValueError),
        ],
    )
    def test_bad_input_is_typed_error_and_no_change(self, kwargs: dict[str, object], exc: type) -> None:
        f = Frontier()
        with pytest.raises(exc):
            f.add(**kwargs)  # type: ignore[arg-type]
        assert len(f) == 0 and not f.is_known("u")


class TestSelection:
    def test_priority_within_host(self) -> None:
        f = Frontier()
        f.add("http://a/low", "a", priority=9)
        f.add("http://a/high", "a", priority=0)
        item = f.next(T)
        assert item is not None and item.url == "http://a/high"

    def test_better_url_added_while_ready_moves_host(self) -> None:
        f = Frontier()
        f.add("http://a/low", "a", priority=9)
        f.add("http://b/mid", "b", priority=5)
        assert f.next_wakeup() == 0.0
        f.add("http://c/x", "c", priority=9)
        first = f.next(T)
        assert first is not None and first.host == "b"
        f.add("http://a/high", "a", priority=0)  # a is READY in bucket 9; now belongs to 0
        second = f.next(T)
        assert second is not None and second.url == "http://a/high"

    def test_priority_bias(self) -> None:
        f = Frontier()
        for i in range(2000):
            f.add(f"http://h{i}/", f"h{i}", priority=0 if i % 2 else 9)
        picks = Counter(p for _, p, _ in drain(f, T, 440))
        assert picks[0] == 400 and picks[9] == 40  # weights 10 : 1, exactly (deterministic)

    def test_no_starvation_of_any_level(self) -> None:
        f = Frontier()
        for p in range(10):
            for i in range(300):
                f.add(f"http://p{p}h{i}/", f"p{p}h{i}", priority=p)
        order = [p for _, p, _ in drain(f, T, 55 * 5)]
        counts = Counter(order)
        assert all(counts[p] == 5 * (10 - p) for p in range(10))  # share = weight / 55
        # bounded wait: the lowest level is served at least once in every window of 55 picks
        last = [i for i, p in enumerate(order) if p == 9]
        gaps = [b - a for a, b in zip([-1, *last], last, strict=False)]
        assert max(gaps) <= 55

    def test_level_that_was_empty_does_not_burst(self) -> None:
        f = Frontier()
        for i in range(500):
            f.add(f"http://a{i}/", f"a{i}", priority=0)
        drain(f, T, 300)  # level 9 empty all along: no credit banked
        for i in range(100):
            f.add(f"http://z{i}/", f"z{i}", priority=9)
        picks = Counter(p for _, p, _ in drain(f, T, 22))
        assert picks[9] <= 3

    def test_discovery_refresh_split(self) -> None:
        f = Frontier()
        for i in range(3000):
            f.add(f"http://d{i}/", f"d{i}", kind="discovery")
            f.add(f"http://r{i}/", f"r{i}", kind="refresh")
        kinds = Counter(k for _, _, k in drain(f, T, 1000))
        assert kinds["discovery"] == 300 and kinds["refresh"] == 700

    def test_one_kind_alone_uses_everything_and_no_burst_after(self) -> None:
        f = Frontier()
        for i in range(500):
            f.add(f"http://d{i}/", f"d{i}", kind="discovery")
        assert Counter(k for _, _, k in drain(f, T, 200))["discovery"] == 200
        for i in range(500):
            f.add(f"http://r{i}/", f"r{i}", kind="refresh")
        kinds = Counter(k for _, _, k in drain(f, T, 100))
        assert 25 <= kinds["discovery"] <= 35  # back to the 30/70 split, not a refresh-only burst

    def test_next_of_one_kind_and_ready_per_kind(self) -> None:
        """What a caller that shares the split between several frontiers (the service's partitions) uses."""
        f = Frontier()
        f.add("http://a/d", "a", kind="discovery")
        f.add("http://a/r", "a", kind="refresh")
        f.add("http://b/d", "b", kind="discovery")
        f.add("http://c/r", "c", kind="refresh", not_before=T + 5)
        assert f.ready(T) == (2, 1)  # a counts for both kinds; c's refresh is not due yet
        item = f.next(T, "refresh")
        assert item is not None and (item.url, item.kind) == ("http://a/r", "refresh")
        assert f.ready(T) == (1, 0)  # a is in flight: neither of its kinds is ready
        assert f.next(T, "refresh") is None
        assert f.ready(T + 5) == (1, 1)
        item = f.next(T + 5, "discovery")
        assert item is not None and item.url == "http://b/d"

    def test_host_with_both_kinds(self) -> None:
        f = Frontier()
        f.add("http://a/d", "a", kind="discovery")
        f.add("http://a/r", "a", kind="refresh")
        got = []
        now = T
        while (item := f.next(now)) is not None or len(f):
            if item is not None:
                got.append(item.kind)
                now = f.done(item.host, now, 0.0, 200)
        assert sorted(got) == ["discovery", "refresh"]


class TestBackoffAndRecovery:
    def test_backoff_grows_then_resets(self) -> None:
        f = Frontier(FrontierConfig(seed=1))
        now = T
        delays = []
        for i in range(4):
            f.add(f"http://a/{i}", "a")
            assert f.next(now) is not None
            nxt = f.done("a", now, 0.01, 503)
            delays.append(nxt - now)
            now = nxt
        assert delays[0] == pytest.approx(5.0, rel=0.11)
        assert all(b > a for a, b in itertools.pairwise(delays))
        snap = f.host_snapshot("a")
        assert snap is not None and snap.backoff_level == 4
        f.add("http://a/ok", "a")
        f.next(now)
        assert f.done("a", now, 0.01, 200) == now + 1.0
        snap = f.host_snapshot("a")
        assert snap is not None and snap.backoff_level == 0

    def test_retry_after_honoured(self) -> None:
        f = Frontier()
        f.add("http://a/1", "a")
        f.next(T)
        assert f.done("a", T, 0.01, 429, retry_after_s=600.0) == T + 600.0

    def test_network_error_backs_off(self) -> None:
        f = Frontier()
        f.add("http://a/1", "a")
        f.next(T)
        assert f.done("a", T, 0.01, None) >= T + 4.5

    def test_restore_host(self) -> None:
        f = Frontier()
        f.restore_host("a", T + 100, 3)
        f.add("http://a/1", "a")
        assert f.next(T + 99) is None
        assert f.next(T + 100) is not None
        f.add("http://b/1", "b")
        f.restore_host("b", T + 500, 0)  # b was waiting: rescheduled later
        assert f.next(T + 400) is None
        f.add("http://c/1", "c")
        f.add("http://d/1", "d")
        assert f.next_wakeup() == 0.0  # a lower bound: c and d were due long ago
        leased = f.next(T + 401)
        assert leased is not None and leased.host == "c"  # d is now READY, waiting its turn
        assert f.next_wakeup() == T + 401
        f.restore_host("d", T + 450, 0)  # d was READY: pulled back to its restored timer
        assert f.next(T + 402) is None
        assert f.next(T + 450) is not None
        snap = f.host_snapshot("a")
        assert snap is not None and snap.in_flight and snap.backoff_level == 3
        assert f.host_snapshot("nope") is None and f.queued_for("nope") == 0
        with pytest.raises(ValueError):
            f.restore_host("a", math.inf, 0)
        with pytest.raises(ValueError):
            f.restore_host("a", T, -1)

    def test_release_returns_url_to_its_place(self) -> None:
        f = Frontier()
        f.add("http://a/1", "a", priority=2)
        f.add("http://a/2", "a", priority=2)
        item = f.next(T)
        assert item is not None and item.url == "http://a/1"
        assert not f.release("a", "http://a/2", T + 300)  # not the leased URL
        assert not f.release("zzz", "http://a/1", T + 300)
        assert f.release("a", "http://a/1", T + 300)
        assert not f.release("a", "http://a/1", T + 300)  # already released
        assert f.in_flight_count == 0 and len(f) == 2
        assert f.next(T + 300.5) is None  # min delay after a lease that may have fetched
        again = f.next(T + 301)
        assert again is not None and again.url == "http://a/1"

    def test_late_done_after_release_only_delays(self) -> None:
        f = Frontier()
        f.add("http://a/1", "a")
        f.next(T)
        f.release("a", "http://a/1", T + 300)
        assert f.done("a", T + 300.1, 5.0, 200) == pytest.approx(T + 350.1, abs=1e-6)  # later timer kept
        assert f.done("a", T + 300.2, 0.0, 200) == pytest.approx(T + 350.1, abs=1e-6)  # never earlier
        assert f.next(T + 350) is None
        assert f.next(T + 350.1) is not None
        assert f.done("ghost", T, 0.0, 200) == T + 1.0  # unknown host: remembered timer
        with pytest.raises(ValueError):
            f.done("a", math.nan, 0.0, 200)

    def test_late_done_on_ready_host_moves_it_back_to_waiting(self) -> None:
        f = Frontier()
        for h in "ab":
            f.add(f"http://{h}/1", h)
        first = f.next(T)  # a leased, b READY
        assert first is not None and first.host == "a"
        assert f.done("b", T, 0.0, 503) >= T + 4.5  # a stray report for b: b must wait now
        assert f.next(T + 1) is None
        wake = f.next_wakeup()
        assert wake is not None and wake >= T + 4.5

    def test_wakeup_skips_stale_timer_entries(self) -> None:
        f = Frontier()
        f.add("http://a/1", "a")  # timer entry at 0.0
        f.restore_host("a", T + 500, 0)  # that entry is now stale
        assert f.next_wakeup() == T + 500

    def test_release_with_fetch_s_waits_its_politeness_delay(self) -> None:
        # A request cut short by a crash may have run for up to fetch_s: the host waits 10x that (no back-off)
        f = Frontier()
        f.add("http://a/1", "a")
        f.add("http://a/2", "a")
        f.next(T)
        assert f.release("a", "http://a/1", T + 20, fetch_s=15.0)
        snap = f.host_snapshot("a")
        assert snap is not None and snap.next_allowed_at == pytest.approx(T + 170, abs=1e-6) and snap.backoff_level == 0
        assert f.next(T + 169.9) is None
        again = f.next(T + 170)
        assert again is not None and again.url == "http://a/1"  # kept its place

    def test_release_with_fetch_s_honours_crawl_delay(self) -> None:
        f = Frontier()
        f.set_host_params("a", crawl_delay_s=30.0)
        f.add("http://a/1", "a")
        f.next(T)
        assert f.release("a", "http://a/1", T + 5, fetch_s=0.5)
        assert f.next(T + 34.9) is None
        assert f.next(T + 35) is not None

    def test_hold_pushes_timer_later_only(self) -> None:
        f = Frontier()
        f.add("http://a/1", "a")
        f.add("http://b/1", "b")
        assert f.hold("a", T, 2.0) == pytest.approx(T + 20, abs=1e-6)  # waiting host: rescheduled
        assert f.hold("a", T, 0.1) == pytest.approx(T + 20, abs=1e-6)  # never earlier
        item = f.next(T + 1)
        assert item is not None and item.host == "b"
        assert f.next(T + 19.9) is None
        # a READY host (timer passed, not picked yet) is taken out of the ready buckets
        f.done("b", T + 1, 0.0, 200)
        f.add("http://b/2", "b")
        assert f.hold("b", T + 30, 1.0) == pytest.approx(T + 40, abs=1e-6)
        item = f.next(T + 30)
        assert item is not None and item.host == "a"
        assert f.next(T + 39.9) is None
        assert f.next(T + 40) is not None
        # an in-flight host stays in flight: its lease is not touched
        f.add("http://c/1", "c")
        f.add("http://c/2", "c")
        assert f.next(T + 41) is not None
        in_flight = f.in_flight_count
        f.hold("c", T + 41, 10.0)
        assert f.in_flight_count == in_flight and f.next(T + 200) is None  # nothing else was queued
        assert f.done("c", T + 42, 0.0, 200) == pytest.approx(T + 43, abs=1e-6)  # its own fetch's done sets the timer
        # an unknown host remembers the timer; a bad clock is refused
        assert f.hold("ghost", T, 1.0) == pytest.approx(T + 10, abs=1e-6)
        with pytest.raises(ValueError):
            f.hold("a", math.inf, 1.0)

    def test_release_respects_override_min_delay(self) -> None:
        f = Frontier()
        f.set_host_params("a", override=HostOverride(min_delay_s=0.25))
        f.add("http://a/1", "a")
        f.next(T)
        assert f.release("a", "http://a/1", T + 60)
        assert f.next(T + 60.2) is None
        assert f.next(T + 60.25) is not None

    def test_config_validation(self) -> None:
        for kwargs in (
            {"num_priorities": 0},
            {"priority_weights": (1, 2)},
            {"num_priorities": 2, "priority_weights": (1, 0)},
            {"num_priorities": 2, "priority_weights": (1.5, 1)},
            {"num_priorities": 1, "priority_weights": (20_000,)},
            {"discovery_share": 1.0},
            {"max_backoff_level": -1},
        ):
            with pytest.raises(ValueError):
                FrontierConfig(**kwargs)
        cfg = FrontierConfig(num_priorities=2, priority_weights=(3, 1))
        assert cfg.weights() == (3, 1)


# ---------------------------------------------------------------- stateful model test
HOSTS = ["a", "b", "c", "d"]
POL = PolitenessConfig()


class FrontierModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.f = Frontier(FrontierConfig(num_priorities=3, seed=3))
        self.now = 0.0
        self.queued: dict[str, tuple[str, int, str, float]] = {}  # url -> host, prio, kind, not_before
        self.inflight: dict[str, str] = {}  # host -> url
        self.allowed: dict[str, float] = {}  # host -> next allowed time
        self.counter = 0
        self.leased: dict[str, tuple[str, int, str, float]] = {}  # url -> metadata, for release

    @rule(
        host=st.sampled_from(HOSTS),
        prio=st.integers(0, 2),
        kind=st.sampled_from(["discovery", "refresh"]),
        delay=st.sampled_from([0.0, 0.0, 3.0, 40.0]),
        reuse=st.booleans(),
    )
    def add(self, host: str, prio: int, kind: str, delay: float, reuse: bool) -> None:
        known = list(self.queued) + list(self.inflight.values())
        if reuse and known:
            url = known[0]
        else:
            self.counter += 1
            url = f"http://{host}/{self.counter}"
        added = self.f.add(url, host, prio, self.now + delay if delay else 0.0, kind)  # type: ignore[arg-type]
        assert added == (url not in known)
        if added:
            self.queued[url] = (host, prio, kind, self.now + delay if delay else 0.0)

    @rule(dt=st.sampled_from([0.0, 0.3, 1.0, 2.5, 50.0]))
    def next(self, dt: float) -> None:
        self.now += dt
        item = self.f.next(self.now)
        due = {
            u: v for u, v in self.queued.items()
            if v[0] not in self.inflight and self.allowed.get(v[0], 0.0) <= self.now and v[3] <= self.now
        }
        if item is None:
            assert not due, f"a host was ready but next() returned None: {due}"
            return
        assert item.url in due, "leased a URL that was not due (politeness or not_before broken)"
        host, prio, kind, _ = self.leased[item.url] = self.queued.pop(item.url)
        assert (item.host, item.priority, item.kind) == (host, prio, kind)
        best = min(p for h, p, k, _ in due.values() if h == host and k == kind)
        assert prio == best
        self.inflight[host] = item.url

    @precondition(lambda self: bool(self.inflight))
    @rule(
        pick=st.integers(0, 3),
        status=st.sampled_from([200, 200, 304, 404, 429, 503, 500, 502, None]),
        fetch_s=st.sampled_from([0.0, 0.05, 0.4]),
        retry_after=st.none() | st.sampled_from([2.0, 90.0]),
    )
    def done(self, pick: int, status: int | None, fetch_s: float, retry_after: float | None) -> None:
        host = sorted(self.inflight)[pick % len(self.inflight)]
        self.now += fetch_s
        when = self.f.done(host, self.now, fetch_s, status, retry_after_s=retry_after)
        floor = max(POL.min_delay_s, POL.delay_factor * fetch_s)
        if status in (429, 502, 503, 504, None):
            floor = max(floor, POL.backoff_base_s * (1 - POL.jitter), retry_after or 0.0)
        assert when >= self.now + floor - 1e-9
        self.leased.pop(self.inflight.pop(host))
        self.allowed[host] = when

    @precondition(lambda self: bool(self.inflight))
    @rule(pick=st.integers(0, 3))
    def release(self, pick: int) -> None:
        host = sorted(self.inflight)[pick % len(self.inflight)]
        url = self.inflight.pop(host)
        assert self.f.release(host, url, self.now)
        self.queued[url] = self.leased.pop(url)
        self.allowed[host] = max(self.allowed.get(host, 0.0), self.now + POL.min_delay_s)

    @invariant()
    def counts_match(self) -> None:
        assert len(self.f) == len(self.queued)
        assert self.f.in_flight_count == len(self.inflight)
        for h in HOSTS:
            assert self.f.queued_for(h) == sum(1 for v in self.queued.values() if v[0] == h)
            snap = self.f.host_snapshot(h)
            if snap is not None:
                assert snap.in_flight == (h in self.inflight)
        wake = self.f.next_wakeup()
        if self.queued and not self.inflight:
            assert wake is not None



TestFrontierModel = FrontierModel.TestCase
TestFrontierModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


def test_busiest_lists_the_hosts_with_most_queued_urls_most_first() -> None:
    f = Frontier(FrontierConfig())
    for host, n in (("a", 3), ("b", 1), ("c", 3), ("d", 2)):
        for i in range(n):
            f.add(f"http://{host}/{i}", host, 5, not_before=1e12 if i == 0 and host == "d" else 0.0)
    item = f.next(0.0)  # one URL in flight is not queued
    assert item is not None
    expected = sorted(((h, f.queued_for(h)) for h in "abcd" if f.queued_for(h)), key=lambda t: (-t[1], t[0]))
    assert f.busiest(10) == expected
    assert f.busiest(2) == expected[:2]
    assert ("d", 2) in f.busiest(10)  # a URL not yet due counts


class TestForget:
    def test_only_an_idle_host_is_forgotten_and_it_comes_back_clean(self) -> None:
        fr = Frontier(FrontierConfig(politeness=PolitenessConfig(jitter=0.0)))
        fr.add("http://a.test/1", "a.test")
        assert fr.forget("a.test") is False  # queued
        item = fr.next(0.0)
        assert item is not None and fr.forget("a.test") is False  # in flight
        fr.done("a.test", 1.0, 0.5, 200)  # timer now 6.0; nothing queued
        assert fr.forget("a.test") is True and fr.hosts_count == 0 and fr.host_snapshot("a.test") is None
        assert fr.forget("never.test") is True
        fr.add("http://a.test/2", "a.test")  # back: a fresh record (the caller restores its timer)
        fr.restore_host("a.test", 6.0, 0)
        assert fr.next(5.9) is None and fr.next(6.0) is not None

    def test_a_forgotten_waiting_host_leaves_no_live_timer(self) -> None:
        fr = Frontier(FrontierConfig(politeness=PolitenessConfig(jitter=0.0)))
        fr.add("http://b.test/1", "b.test", not_before=50.0)
        assert fr.forget("b.test") is False  # delayed
        fr.add("http://c.test/1", "c.test")
        assert fr.next(0.0) is not None
        fr.done("c.test", 0.0, 0.0, 200)
        assert fr.forget("c.test") and fr.next_wakeup() == 50.0
