"""RecrawlHandler against the in-memory CrawlState: intervals, the due index and scans."""

from __future__ import annotations

import asyncio
import dataclasses
from email.utils import formatdate
from typing import Any

import pytest
from streamcrawl_contracts.messages import FetchResult, SeedMessage, UrlMessage
from streamcrawl_contracts.topics import URLS
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.partition import partition_for
from streamcrawl_core.recrawl import RecrawlConfig
from streamcrawl_recrawl.handler import RecrawlHandler
from streamcrawl_runtime.memory import MemoryCrawlState
from streamcrawl_runtime.ports.blobs import encode_page
from streamcrawl_runtime.ports.errors import PoisonMessage, TransientError
from streamcrawl_runtime.ports.loop import Record

T0 = 1_700_000_000.0
H = 3600.0
DAY = 86400.0
CFG = RecrawlConfig(min_interval_s=H, max_interval_s=4 * DAY, initial_interval_s=DAY)
URL = "http://a.test/p"
FP = url_fingerprint(URL)


def host_of(url: str) -> str:
    return url.split("/")[2]


class Rig:
    def __init__(self, refresh_per_scan: int = 2000, owned: tuple[int, ...] = tuple(range(8))) -> None:
        self.state = MemoryCrawlState(partitions=8)
        # Importance 1 for every depth: these tests pin the doubling rule's intervals (see the importance tests).
        self.h = RecrawlHandler(self.state, CFG, scan_interval_s=5.0, scan_lookback_s=2 * DAY,
                                refresh_per_scan=refresh_per_scan, partitions=8, importance=lambda _d: 1.0)
        self.run(self.h.on_assign(list(owned)))

    def run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    def result(self, started_at: float, content_hash: str | None = "h1", outcome: str = "fetched",
               url: str = URL, kind: str = "refresh") -> None:
        host = host_of(url)
        res = FetchResult(url=url, host=host, url_fp=url_fingerprint(url), lease_id="L", outcome=outcome,  # type: ignore[arg-type]
                          kind=kind,  # type: ignore[arg-type]
                          status=304 if outcome == "not_modified" else 200, started_at=started_at,
                          content_hash=content_hash if outcome == "fetched" else None)
        assert self.run(self.h.handle(Record("t", partition_for(host, 8), 0, host, b""), res)) == []

    def sched(self, url: str = URL) -> Any:
        return self.state.urls[(host_of(url), url_fingerprint(url))]

    def due_of(self, url: str = URL) -> list[float]:
        return sorted(t for (t, h, fp) in self.state.due if (h, fp) == (host_of(url), url_fingerprint(url)))

    def tick(self, now: float) -> list[UrlMessage]:
        outs = self.run(self.h.tick(now))
        assert all(o.topic == URLS and o.key == o.value.host for o in outs)
        return [o.value for o in outs]


# ------------------------------------------------------------------ intervals

def test_first_fetch_files_the_initial_interval() -> None:
    rig = Rig()
    rig.result(T0)
    st = rig.sched()
    assert (st.change_interval_s, st.next_visit_at, st.sched_hash, st.change_count) == (DAY, T0 + DAY, "h1", 0)
    assert rig.due_of() == [T0 + DAY]


def test_result_carrying_its_body_is_scheduled_like_any_result() -> None:
    """body_gz (the page inline, for the parser) changes nothing for the recrawl scheduler."""
    seen = []
    for body_gz in (None, encode_page(b"<p>x</p>" * 50)):
        rig = Rig()
        res = FetchResult(url=URL, host=host_of(URL), url_fp=FP, lease_id="L", outcome="fetched", status=200,
                          started_at=T0, content_hash="h1", body_gz=body_gz)
        assert rig.run(rig.h.handle(Record("t", partition_for(host_of(URL), 8), 0, host_of(URL), b""), res)) == []
        st = rig.sched()
        seen.append((st.change_interval_s, st.next_visit_at, st.sched_hash, rig.due_of()))
    assert seen[0] == seen[1] == (DAY, T0 + DAY, "h1", [T0 + DAY])


@pytest.mark.parametrize("outcome,content_hash", [("fetched", "h1"), ("not_modified", None)])
def test_unchanged_doubles_and_moves_the_due_entry(outcome: str, content_hash: str | None) -> None:
    rig = Rig()
    rig.result(T0)
    t1 = T0 + DAY
    rig.result(t1, content_hash, outcome)
    st = rig.sched()
    assert (st.change_interval_s, st.next_visit_at, st.sched_hash, st.change_count) == (2 * DAY, t1 + 2 * DAY, "h1", 0)
    assert rig.due_of() == [t1 + 2 * DAY]  # the old visit is gone


def test_changed_halves_and_counts_the_change() -> None:
    rig = Rig()
    rig.result(T0)
    t1 = T0 + DAY
    rig.result(t1, "h2")
    st = rig.sched()
    assert (st.change_interval_s, st.next_visit_at, st.sched_hash) == (DAY / 2, t1 + DAY / 2, "h2")
    assert (st.change_count, st.last_changed_at) == (1, t1)
    assert rig.due_of() == [t1 + DAY / 2]


def test_interval_is_clamped_to_max_and_min() -> None:
    rig = Rig()
    t = T0
    rig.result(t)
    for _ in range(6):  # unchanged: 2, 4, 4, 4 ... days
        t += rig.sched().change_interval_s
        rig.result(t)
    assert rig.sched().change_interval_s == 4 * DAY
    for i in range(12):  # changed every time: halves down to 1 h, then stays
        t += rig.sched().change_interval_s
        rig.result(t, f"c{i}")
    assert rig.sched().change_interval_s == H
    assert rig.due_of() == [t + H]
    assert len(rig.state.due) == 1


@pytest.mark.parametrize("outcome", ["http_error", "network_error", "redirect", "robots_disallowed",
                                     "robots_fetched", "lease_expired", "probe_fetched", "soft404_suspect",
                                     "soft_404"])
def test_other_outcomes_do_not_schedule(outcome: str) -> None:
    rig = Rig()
    rig.result(T0, None, outcome)
    assert rig.state.urls == {} and rig.state.due == {}


def test_non_result_message_is_poison() -> None:
    rig = Rig()
    with pytest.raises(PoisonMessage):
        rig.run(rig.h.handle(Record("t", 0, 0, None, b""), SeedMessage(url=URL)))


def test_replayed_result_files_the_same_visit() -> None:
    # Was: the replay read its own schedule as "unchanged" and doubled the interval again.
    rig = Rig()
    rig.result(T0)
    rig.result(T0)  # a replay of the first fetch
    assert (rig.sched().change_interval_s, rig.due_of()) == (DAY, [T0 + DAY])
    t1 = T0 + DAY
    rig.result(t1, "h2")  # changed: 12 h
    before = (rig.sched().change_interval_s, rig.sched().next_visit_at, rig.sched().change_count)
    rig.result(t1, "h2")  # the same record again (at-least-once)
    assert (rig.sched().change_interval_s, rig.sched().next_visit_at, rig.sched().change_count) == before
    assert rig.due_of() == [t1 + DAY / 2]


def test_replay_restores_a_due_entry_lost_in_a_crash() -> None:
    rig = Rig()
    rig.result(T0)
    rig.state.due.clear()  # the batch's url_state part landed, its due_index row did not
    rig.result(T0)
    assert rig.due_of() == [T0 + DAY] and rig.sched().change_interval_s == DAY


def test_one_request_per_first_visit_and_the_old_slot_deleted_before_the_new_schedule() -> None:
    rig = Rig()
    rig.result(T0, kind="discovery")
    assert rig.state.calls == [("url_put_schedule_and_due", T0 + DAY, "a.test", FP, DAY)]
    rig.state.calls.clear()
    rig.result(T0 + DAY)
    assert rig.state.calls == [("due_delete", T0 + DAY, "a.test", FP),
                               ("url_put_schedule_and_due", T0 + 3 * DAY, "a.test", FP, 2 * DAY)]


def test_a_due_row_that_landed_without_its_schedule_is_filed_again_by_the_replay() -> None:
    rig = Rig()
    rig.result(T0)
    before = dataclasses.replace(rig.sched())
    rig.result(T0 + DAY)  # unchanged: the visit moves to T0 + 3 days
    rig.state.urls[("a.test", FP)] = before  # the batch's url_state part was lost
    rig.result(T0 + DAY)  # the replay
    st = rig.sched()
    assert (st.change_interval_s, st.next_visit_at, st.change_count) == (2 * DAY, T0 + 3 * DAY, 0)
    assert rig.due_of() == [T0 + 3 * DAY]


def test_a_failed_schedule_request_fails_the_message_and_its_retry_files_the_visit() -> None:
    class Failing(MemoryCrawlState):
        fail = 1

        async def url_put_schedule_and_due(self, *args: Any) -> None:
            if self.fail:
                self.fail -= 1
                raise TransientError("cassandra: timeout")
            await super().url_put_schedule_and_due(*args)

    rig = Rig()
    rig.state = rig.h.state = Failing(partitions=8)  # type: ignore[assignment]
    with pytest.raises(TransientError):
        rig.result(T0)
    assert rig.state.urls == {} and rig.state.due == {}
    rig.result(T0)
    assert (rig.sched().change_interval_s, rig.due_of()) == (DAY, [T0 + DAY])


# ------------------------------------------------------------------ scans

def _file(rig: Rig, url: str, visit_at: float) -> None:
    rig.run(rig.state.due_put(visit_at, host_of(url), url_fingerprint(url), url))


def test_tick_emits_due_urls_of_owned_partitions_and_deletes_them_one_scan_later() -> None:
    mine, theirs = "http://a.test/1", "http://b.test/1"  # partitions 7 and 1
    rig = Rig(owned=(partition_for("a.test", 8),))
    _file(rig, mine, T0 - 10)
    _file(rig, theirs, T0 - 20)
    _file(rig, "http://a.test/later", T0 + 100)
    [msg] = rig.tick(T0)
    assert (msg.url, msg.host, msg.url_fp, msg.kind) == (mine, "a.test", url_fingerprint(mine), "refresh")
    assert rig.due_of(mine) == [T0 - 10]  # not deleted until the next scan (outputs flushed by then)
    assert rig.tick(T0 + 1) == []  # scan interval not reached
    assert rig.tick(T0 + 5) == []  # deleted, not emitted twice
    assert rig.due_of(mine) == []
    assert rig.due_of(theirs) == [T0 - 20]  # another instance's row is left alone
    # A row this process did not file (a previous owner's) and that came due after a scan is found by the
    # next full scan (every full_scan_s, 600 s): between full scans nothing is read for it.
    assert rig.h.tick_due(T0 + 200) == T0 + 600
    assert rig.tick(T0 + 200) == []
    assert [m.url for m in rig.tick(T0 + 600)] == ["http://a.test/later"]


def test_scans_read_nothing_until_a_filed_visit_is_due() -> None:
    class Counting(MemoryCrawlState):
        reads = 0

        async def due_range(self, start: float, end: float, limit: int, parts: Any = None) -> Any:
            self.reads += 1
            self.last = (start, end)
            return await super().due_range(start, end, limit, parts)

    rig = Rig()
    rig.state = rig.h.state = Counting(partitions=8)  # type: ignore[assignment]
    assert rig.tick(T0) == [] and rig.state.reads == 1  # the full scan on assignment
    assert rig.state.last == (T0 - 2 * DAY, T0)
    for t in (T0 + 5, T0 + 60, T0 + 300):
        assert rig.tick(t) == []
    assert rig.state.reads == 1  # nothing filed, no full scan due: no read
    rig.result(T0 + 10)  # files a visit at T0 + 10 + DAY
    assert rig.h.tick_due(T0 + 400) == T0 + 600  # the next full scan comes first
    rig.tick(T0 + 600)
    assert rig.state.reads == 2
    assert rig.h.tick_due(T0 + 601) == T0 + 1200
    # A scan between full scans reads only from the previous scan's end on.
    rig.h._next_visit = T0 + 700
    assert rig.h.tick_due(T0 + 601) == T0 + 700
    rig.tick(T0 + 700)
    assert rig.state.reads == 3 and rig.state.last == (T0 + 600, T0 + 700)


def test_refresh_per_scan_is_respected() -> None:
    rig = Rig(refresh_per_scan=2)
    urls = [f"http://a.test/{i}" for i in range(5)]
    for i, u in enumerate(urls):
        _file(rig, u, T0 - 100 + i)
    seen: list[str] = []
    for k in range(4):
        batch = rig.tick(T0 + 5 * k)
        assert len(batch) <= 2
        seen += [m.url for m in batch]
    assert seen == urls  # oldest first, each once
    assert rig.tick(T0 + 20) == [] and rig.state.due == {}


def test_no_owned_partitions_no_scan() -> None:
    rig = Rig(owned=())
    _file(rig, URL, T0 - 1)
    assert rig.tick(T0) == []
    rig.run(rig.h.on_assign([partition_for("a.test", 8)]))
    assert [m.url for m in rig.tick(T0 + 1)] == [URL]
    rig.run(rig.h.on_revoke([partition_for("a.test", 8)]))
    assert rig.tick(T0 + 10) == []


def test_fetch_result_after_refresh_moves_the_visit() -> None:
    rig = Rig()
    rig.result(T0)
    [msg] = rig.tick(T0 + DAY)
    assert msg.url == URL
    rig.result(T0 + DAY + 30)  # the refresh fetched, unchanged
    rig.tick(T0 + DAY + 60)  # deletes the emitted row
    assert rig.due_of() == [T0 + DAY + 30 + 2 * DAY]


def test_discovery_result_is_a_first_visit_without_a_read() -> None:
    rig = Rig()
    reads: list[str] = []
    real = rig.state.url_get

    async def spy(host: str, url_fp: int) -> Any:
        reads.append(host)
        return await real(host, url_fp)

    rig.state.url_get = spy  # type: ignore[method-assign]
    rig.result(T0, kind="discovery")
    assert reads == []
    assert rig.due_of() == [pytest.approx(T0 + rig.h.config.initial_interval_s, abs=0.002)]
    rig.result(T0 + 90_000, kind="refresh")
    assert reads == ["a.test"]


# ------------------------------------------------------------------ estimator, importance, refresh gates

RATE_CFG = RecrawlConfig(min_interval_s=10.0, max_interval_s=10_000.0, initial_interval_s=100.0,
                         estimator="change_rate", min_observations=3)


def _visits(h: RecrawlHandler, state: MemoryCrawlState, hashes: list[str], gap: float = 100.0,
            depth: int = 2) -> list[float]:
    """Fetch the URL at ``gap`` intervals with these bodies; the delay filed after each visit."""
    delays = []
    for i, ch in enumerate(hashes):
        res = FetchResult(url=URL, host="a.test", url_fp=FP, lease_id="L", outcome="fetched", depth=depth,
                          kind="discovery" if i == 0 else "refresh", status=200, started_at=T0 + i * gap,
                          content_hash=ch)
        asyncio.run(h.handle(Record("t", partition_for("a.test", 8), 0, "a.test", b""), res))
        delays.append(state.urls[("a.test", FP)].change_interval_s)
    return delays


def test_change_rate_estimator_sets_the_interval_from_the_visit_history() -> None:
    state = MemoryCrawlState(partitions=8)
    h = RecrawlHandler(state, RATE_CFG, partitions=8)  # depth 2: importance 1.0
    delays = _visits(h, state, ["a", "b", "c", "c", "d"])
    st = state.urls[("a.test", FP)]
    assert (st.sched_visits, st.change_count, st.sched_first_at) == (5, 3, T0)
    # n = 4 compared visits, X = 3 changes, over 400 s: rate = -ln((4 - 3 + .5) / 4.5) / 100
    import math
    assert delays[-1] == pytest.approx(1 / (-math.log(1.5 / 4.5) / 100.0))
    assert delays[0] == 100.0  # the first visit waits the initial interval


def test_unchanged_pages_go_to_the_longest_interval_and_changing_ones_come_back_sooner() -> None:
    same_state, busy_state = MemoryCrawlState(partitions=8), MemoryCrawlState(partitions=8)
    same = _visits(RecrawlHandler(same_state, RATE_CFG, partitions=8), same_state, ["a"] * 5)
    busy = _visits(RecrawlHandler(busy_state, RATE_CFG, partitions=8), busy_state, ["a", "b", "c", "d", "e"])
    assert same == sorted(same) and same[-1] == RATE_CFG.max_interval_s  # no change seen in 4 visits
    assert busy[-1] < busy[0] and busy[-1] < 100.0


def test_importance_shortens_the_delay_of_pages_near_the_seeds() -> None:
    near_state, far_state = MemoryCrawlState(partitions=8), MemoryCrawlState(partitions=8)
    near = _visits(RecrawlHandler(near_state, RATE_CFG, partitions=8), near_state, ["a", "b"], depth=0)
    far = _visits(RecrawlHandler(far_state, RATE_CFG, partitions=8), far_state, ["a", "b"], depth=6)
    assert near[0] == 50.0 and far[0] == 100.0 / 0.5  # importance 2.0 at depth 0, 0.5 at depth 6
    assert near[1] < far[1]


def test_refreshes_skip_blocked_hosts_and_respect_the_host_budget() -> None:
    state = MemoryCrawlState(partitions=8)
    h = RecrawlHandler(state, CFG, partitions=8, host_page_budget=2, importance=lambda _d: 1.0)
    asyncio.run(h.on_assign(list(range(8))))
    for i in range(4):
        asyncio.run(state.due_put(T0 + i, "a.test", 100 + i, f"http://a.test/{i}"))
    asyncio.run(state.due_put(T0, "bad.test", 1, "http://bad.test/"))
    state.blocklist = ["bad.test"]
    out = asyncio.run(h.tick(T0 + 10))
    assert sorted(o.value.url for o in out) == ["http://a.test/0", "http://a.test/1"]  # the budget: 2
    # the blocked host's visit is dropped; the over-budget ones move to the next cycle
    assert not [k for k in state.due if k[1] == "bad.test"]
    assert sorted(t for (t, host, _fp) in state.due if host == "a.test" and t > T0 + 10) == [86400.0 * 19676] * 2


def test_a_scan_reads_only_the_owned_partitions() -> None:
    state = MemoryCrawlState(partitions=8)
    h = RecrawlHandler(state, CFG, partitions=8)
    mine = next(f"h{i}.test" for i in range(100) if partition_for(f"h{i}.test", 8) == 3)
    other = next(f"h{i}.test" for i in range(100) if partition_for(f"h{i}.test", 8) != 3)
    asyncio.run(h.on_assign([3]))
    asyncio.run(state.due_put(T0, mine, 1, f"http://{mine}/"))
    asyncio.run(state.due_put(T0, other, 2, f"http://{other}/"))
    assert [o.value.host for o in asyncio.run(h.tick(T0 + 1))] == [mine]


# ------------------------------------------------------------------ known modification times (0041)

def _dated_visits(h: RecrawlHandler, state: MemoryCrawlState, n: int, last_modified: bool,
                  gap: float = 100.0) -> list[float]:
    """A page with a new body at every visit, changed 5 s before it (said by its Last-Modified header when
    ``last_modified``); the delay filed after each visit."""
    delays = []
    for i in range(n):
        at = T0 + i * gap
        lm = formatdate(at - 5.0, usegmt=True) if last_modified else None
        res = FetchResult(url=URL, host="a.test", url_fp=FP, lease_id="L", outcome="fetched", depth=2,
                          kind="discovery" if i == 0 else "refresh", status=200, started_at=at,
                          content_hash=f"v{i}", last_modified=lm)
        asyncio.run(h.handle(Record("t", partition_for("a.test", 8), 0, "a.test", b""), res))
        delays.append(state.urls[("a.test", FP)].change_interval_s)
    return delays


def test_last_modified_feeds_the_change_rate_estimator() -> None:
    import math
    dated_state, plain_state = MemoryCrawlState(partitions=8), MemoryCrawlState(partitions=8)
    dated = _dated_visits(RecrawlHandler(dated_state, RATE_CFG, partitions=8), dated_state, 5, True)
    plain = _dated_visits(RecrawlHandler(plain_state, RATE_CFG, partitions=8), plain_state, 5, False)
    st = dated_state.urls[("a.test", FP)]
    assert (st.lm_visits, st.lm_changes, st.lm_exposure_s, st.lm_conflicts) == (4, 4, 20.0, 0)
    # 4 changes each 5 s old: rate = (4 - 1) / 20 s, interval 6.7 s, clamped to the 10 s minimum; the visit
    # history alone sees 4 of 4 visits changed: -ln(0.5 / 4.5) / 100 s
    assert dated[-1] == RATE_CFG.min_interval_s
    assert plain[-1] == pytest.approx(100.0 / math.log(9.0))
    assert plain_state.urls[("a.test", FP)].lm_visits == 0


def test_a_sitemap_lastmod_stands_in_for_a_missing_last_modified_and_a_replay_counts_once() -> None:
    state = MemoryCrawlState(partitions=8)
    h = RecrawlHandler(state, RATE_CFG, partitions=8)
    _dated_visits(h, state, 1, False)  # the first visit at T0
    asyncio.run(state.url_put_sitemap_lastmod("a.test", FP, T0 + 60.0))  # dedup: a sitemap says T0 + 60
    res = FetchResult(url=URL, host="a.test", url_fp=FP, lease_id="L", outcome="fetched", depth=2, kind="refresh",
                      status=200, started_at=T0 + 100.0, content_hash="v1")
    for _ in range(2):  # the second is a replay of the same fetch
        asyncio.run(h.handle(Record("t", partition_for("a.test", 8), 0, "a.test", b""), res))
    st = state.urls[("a.test", FP)]
    assert (st.lm_visits, st.lm_changes, st.lm_exposure_s, st.sched_visits) == (1, 1, 40.0, 2)
