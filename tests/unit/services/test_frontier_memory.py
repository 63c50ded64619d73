"""The frontier's bounded memory: a window of each host's queue, at most max_hosts hosts, the rest read
back from the durable queue (the in-memory CrawlState, with the Cassandra layout's semantics) as room
frees up; a gained partition is read from its own index only."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from streamcrawl_contracts.messages import FetchRequest, FetchResult, UrlMessage
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.partition import partition_for
from streamcrawl_core.politeness import PolitenessConfig
from streamcrawl_frontier.handler import FrontierHandler
from streamcrawl_runtime.memory import MemoryCrawlState
from streamcrawl_runtime.ports.loop import Record
from streamcrawl_runtime.ports.state import HostState, QueuedUrl

T0 = 1_700_000_000.0
P = 8


class Rig:
    def __init__(self, state: MemoryCrawlState | None = None, parts: list[int] | None = None, **kw: Any) -> None:
        self.t = T0
        self.state = state or MemoryCrawlState()
        self.h = FrontierHandler(self.state, PolitenessConfig(jitter=0.0), partitions=P, lookahead_s=0.0,
                                 margin_s=0.0, clock=lambda: self.t, **kw)
        asyncio.run(self.h.on_assign(list(range(P)) if parts is None else parts))
        self.most_hosts = 0

    def url(self, url: str, priority: int = 5) -> None:
        host = url.split("/")[2]
        msg = UrlMessage(url=url, host=host, url_fp=url_fingerprint(url), priority=priority)
        asyncio.run(self.h.handle(Record("urls", partition_for(host, P), 0, host, b""), msg))
        self.most_hosts = max(self.most_hosts, len(self.h.windows))

    def crawl(self, until: float = 600.0) -> list[str]:
        """Tick every 0.5 s, answering each request 0.1 s later: the URLs fetched, in order."""
        fetched: list[str] = []
        while self.t < T0 + until:
            reqs = [o.value for o in asyncio.run(self.h.tick(self.t))]
            self.most_hosts = max(self.most_hosts, len(self.h.windows))
            for req in reqs:
                assert isinstance(req, FetchRequest)
                fetched.append(req.url)
                res = FetchResult(url=req.url, host=req.host, url_fp=req.url_fp, lease_id=req.lease_id,
                                  outcome="fetched", status=200, started_at=self.t, fetch_s=0.01,
                                  ended_at=self.t + 0.01)
                asyncio.run(self.h.handle(Record("results", partition_for(req.host, P), 0, req.host, b""), res))
            if not reqs and not self.state.queue and not self.h.leases:
                break
            self.t += 0.5
        return fetched


def test_a_long_queue_is_held_as_a_window_and_read_back_in_order() -> None:
    rig = Rig(host_window=4)
    urls = [f"http://a.test/{i}" for i in range(30)]
    for i, u in enumerate(urls):
        rig.url(u, priority=1 + i // 10)  # three depths
    assert rig.h.stats()["queued"] == 4 and len(rig.state.queue) == 30  # 4 in memory, all 30 durable
    fetched = rig.crawl()
    assert sorted(fetched) == sorted(urls) and len(fetched) == 30  # each once
    assert [int(u.rsplit("/", 1)[1]) // 10 for u in fetched] == sorted(int(u.rsplit("/", 1)[1]) // 10 for u in fetched)
    assert rig.state.queue == {} and rig.state.queue_index == set() and rig.h.windows == {}


def _answer(rig: Rig, req: FetchRequest) -> None:
    res = FetchResult(url=req.url, host=req.host, url_fp=req.url_fp, lease_id=req.lease_id, outcome="fetched",
                      status=200, started_at=rig.t, fetch_s=0.01, ended_at=rig.t)
    asyncio.run(rig.h.handle(Record("results", partition_for(req.host, P), 0, req.host, b""), res))


def test_a_url_that_sorts_before_the_window_joins_it() -> None:
    rig = Rig(host_window=2)
    for i in range(6):
        rig.url(f"http://a.test/{i}", priority=5)
    for _ in range(2):  # the first window drains; the refill reads the next two rows from the durable queue
        [req] = [o.value for o in asyncio.run(rig.h.tick(rig.t))]
        assert isinstance(req, FetchRequest)
        _answer(rig, req)
        rig.t += 1.5
    assert rig.h.stats()["queued"] == 2 and rig.h.windows["a.test"].after is not None
    rig.url("http://a.test/urgent", priority=0)  # sorts before the rows read: the next refill would miss it
    assert rig.h.frontiers[partition_for("a.test", P)].is_known("http://a.test/urgent")
    assert [o.value.url for o in asyncio.run(rig.h.tick(rig.t))] == ["http://a.test/urgent"]  # type: ignore[attr-defined]


def test_at_most_max_hosts_are_in_memory_and_every_url_is_fetched() -> None:
    rig = Rig(max_hosts=5, host_window=2, load_per_tick=3)
    urls = [f"http://h{h}.test/{i}" for h in range(20) for i in range(3)]
    for u in urls:
        rig.url(u)
    assert len(rig.h.windows) == 5 and len(rig.state.queue) == 60
    fetched = rig.crawl(until=900)
    assert sorted(fetched) == sorted(urls)
    assert rig.most_hosts <= 5
    assert rig.state.queue == {} and rig.state.queue_index == set()


def test_politeness_survives_a_host_leaving_memory_and_coming_back() -> None:
    rig = Rig(max_hosts=1, host_window=1)
    for u in ("http://a.test/1", "http://a.test/2", "http://b.test/1", "http://b.test/2"):
        rig.url(u)
    times: dict[str, list[float]] = {}
    real = rig.h.tick

    async def tick(now: float) -> Any:
        out = await real(now)
        for o in out:
            times.setdefault(o.value.host, []).append(now)  # type: ignore[attr-defined]
        return out

    rig.h.tick = tick  # type: ignore[method-assign]
    rig.crawl()
    for host, ts in times.items():
        assert all(b - a >= 1.0 for a, b in itertools.pairwise(ts)), (host, ts)
    assert sorted(times) == ["a.test", "b.test"] and all(len(ts) == 2 for ts in times.values())


def _queued(state: MemoryCrawlState, url: str) -> None:
    host = url.split("/")[2]
    asyncio.run(state.queue_put(QueuedUrl(partition_for(host, P), host, url_fingerprint(url), url, 5, "discovery",
                                          0.0, 0, T0 - 10)))


def test_a_gained_partition_reads_only_its_own_index_and_hosts() -> None:
    state = MemoryCrawlState()
    hosts = [f"h{i}.test" for i in range(40)]
    for h in hosts:
        _queued(state, f"http://{h}/1")
    mine = [h for h in hosts if partition_for(h, P) == 3]
    reads: list[tuple[str, Any]] = []
    for name in ("queue_hosts", "queue_head", "host_get"):
        real = getattr(state, name)

        def spy(*a: Any, _n: str = name, _f: Any = real, **k: Any) -> Any:
            reads.append((_n, a[0]))
            return _f(*a, **k)
        setattr(state, name, spy)
    rig = Rig(state, parts=[3])
    assert {a for n, a in reads if n == "queue_hosts"} == {3}
    assert {a for n, a in reads if n != "queue_hosts"} == set(mine)
    assert sorted(rig.h.windows) == sorted(mine)


def test_an_index_row_left_by_a_crash_is_dropped_when_read() -> None:
    state = MemoryCrawlState()
    _queued(state, "http://gone.test/1")
    state.queue.clear()  # the URL was finished, but the crash came before its host left the index
    rig = Rig(state)
    assert state.queue_index == set() and rig.h.windows == {}


def test_a_restored_lease_that_already_expired_is_settled_by_the_next_tick() -> None:
    state = MemoryCrawlState()
    _queued(state, "http://a.test/1")
    state.hosts["a.test"] = HostState("a.test", lease_id="L0", lease_url="http://a.test/1", lease_expires_at=T0 - 5)
    rig = Rig(state)
    assert asyncio.run(rig.h.tick(rig.t)) == []  # settled now (no request went out under L0): released
    assert state.hosts["a.test"].lease_id is None
    rig.t += 1.0
    assert [o.value.url for o in asyncio.run(rig.h.tick(rig.t))] == ["http://a.test/1"]  # type: ignore[attr-defined]


def _index_of(state: MemoryCrawlState) -> set[str]:
    return {h for _, _, h in state.queue_index}


def _leased_state(finished: bool) -> MemoryCrawlState:
    """What a crashed frontier left of a.test: its index row and a live lease L0 (until T0 + 30) for
    http://a.test/1, whose queue row is gone if ``finished``."""
    state = MemoryCrawlState()
    _queued(state, "http://a.test/1")
    if finished:
        state.queue.clear()
    state.hosts["a.test"] = HostState("a.test", lease_id="L0", lease_url="http://a.test/1", lease_expires_at=T0 + 30)
    return state


def test_a_rebuilt_host_whose_leased_url_was_finished_leaves_the_index_when_its_lease_expires() -> None:
    # The crash came after the URL's finish and before its result's politeness write: the index row and
    # the lease are left, the queue row is not. No result will ever come for the lease.
    state = _leased_state(finished=True)
    rig = Rig(state)
    assert "a.test" in rig.h.windows and "a.test" in rig.h.restored  # blocked until the lease expires
    rig.t += 31.0
    assert asyncio.run(rig.h.tick(rig.t)) == []
    assert _index_of(state) == set() and rig.h.windows == {} and rig.h.restored == {}


def test_a_replayed_copy_skipped_at_dispatch_takes_its_host_out_of_the_index() -> None:
    # Rebuilt with its URL still queued and a live lease for it; the lease's result (replayed) finishes
    # the URL, so the queued copy is cancelled. Once that copy is skipped the host has nothing left.
    state = _leased_state(finished=False)
    rig = Rig(state)
    res = FetchResult(url="http://a.test/1", host="a.test", url_fp=url_fingerprint("http://a.test/1"), lease_id="L0",
                      outcome="fetched", status=200, started_at=T0 - 1, fetch_s=0.01, ended_at=T0 - 0.9)
    asyncio.run(rig.h.handle(Record("results", partition_for("a.test", P), 0, "a.test", b""), res))
    assert "http://a.test/1" in rig.h.cancelled
    for _ in range(6):
        rig.t += 0.5
        assert asyncio.run(rig.h.tick(rig.t)) == []  # the copy is not fetched again
    assert state.queue == {} and _index_of(state) == set() and rig.h.windows == {}


def test_the_index_sweep_drops_rows_left_behind_for_hosts_with_nothing_queued() -> None:
    rig = Rig(index_sweep_s=300.0)
    rig.url("http://a.test/1")
    rig.crawl()
    assert _index_of(rig.state) == set()
    part = partition_for("b.test", P)
    asyncio.run(rig.state.queue_index_host(part, "b.test"))  # a row some crash left, after the gain scan
    rig.t += 10.0
    asyncio.run(rig.h.tick(rig.t))
    assert _index_of(rig.state) == {"b.test"}  # not read again before the sweep is due
    rig.t += 300.0
    assert rig.h.tick_due(rig.t) <= rig.t  # an idle frontier wakes for the sweep
    ticks = 0
    while rig.h.tick_due(rig.t) <= rig.t and ticks < 50:
        asyncio.run(rig.h.tick(rig.t))
        ticks += 1
    # 8 partitions × 64 buckets, at most 64 index pages per tick: the pass is spread over 8 ticks
    assert ticks == 8 and _index_of(rig.state) == set()
    assert rig.h.windows == {}


def test_a_host_whose_new_url_is_being_written_keeps_its_index_row() -> None:
    # A rebuilt host with nothing queued waits for its restored lease; a new URL's queue write (which does
    # not write the index row: the host is indexed) is in flight when the lease expires. The host must keep
    # its index row, or a crash would leave its queued URL out of the index.
    state = _leased_state(finished=True)
    rig = Rig(state)
    real_put = state.queue_put
    gate = asyncio.Event()

    async def slow_put(item: QueuedUrl, index_host: bool = True) -> None:
        await gate.wait()
        await real_put(item, index_host)

    async def run() -> None:
        state.queue_put = slow_put  # type: ignore[method-assign]
        msg = UrlMessage(url="http://a.test/2", host="a.test", url_fp=url_fingerprint("http://a.test/2"))
        enqueue = asyncio.create_task(rig.h.handle(Record("urls", partition_for("a.test", P), 0, "a.test", b""), msg))
        await asyncio.sleep(0)
        rig.t += 31.0
        await rig.h.tick(rig.t)  # the lease expires while the write runs
        assert _index_of(state) == {"a.test"} and "a.test" in rig.h.windows
        gate.set()
        await enqueue
    asyncio.run(run())
    assert _index_of(state) == {"a.test"} and rig.h.stats()["queued"] == 1
    assert [r.url for r in state.queue.values()] == ["http://a.test/2"]


class _SlowQueueReads(MemoryCrawlState):
    """Queue-head reads that return late, with the rows as they were when the read was sent (a Cassandra
    read in flight while another write lands)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: asyncio.Event | None = None
        self.read_sent: asyncio.Event | None = None

    async def queue_head(self, host: str, after: Any, limit: int) -> list[QueuedUrl]:
        rows = await super().queue_head(host, after, limit)
        if self.gate is not None and self.read_sent is not None:
            self.read_sent.set()
            await self.gate.wait()
        return rows


def test_a_result_that_arrives_while_its_host_is_loading_waits_for_the_load() -> None:
    # Seen in the scale e2e: a partition moved; the new owner's tick loaded a host (its lease from
    # host_state, then its queue head) while the result of that lease arrived. The result finished the URL
    # between the two reads; the queue-head read, sent before the finish, then put the URL back in memory
    # and it was fetched a second time a few seconds later.
    source = _leased_state(finished=False)
    state = _SlowQueueReads()
    state.queue, state.queue_index, state.hosts = source.queue, source.queue_index, source.hosts
    part = partition_for("a.test", P)
    rig = Rig(state, parts=[])
    url = "http://a.test/1"
    res = FetchResult(url=url, host="a.test", url_fp=url_fingerprint(url), lease_id="L0", outcome="fetched",
                      status=200, started_at=T0 - 1, fetch_s=0.01, ended_at=T0 - 0.9)

    async def run() -> None:
        state.gate, state.read_sent = asyncio.Event(), asyncio.Event()
        assign = asyncio.create_task(rig.h.on_assign([part]))
        await state.read_sent.wait()  # the host's lease is read, its queue head is on its way
        result = asyncio.create_task(rig.h.handle(Record("results", part, 0, "a.test", b""), res))
        await asyncio.sleep(0.01)
        state.gate.set()
        await asyncio.gather(assign, result)
        state.gate = None

    asyncio.run(run())
    fetched = []
    for _ in range(20):
        rig.t += 0.5
        fetched += [o.value.url for o in asyncio.run(rig.h.tick(rig.t))]  # type: ignore[attr-defined]
    assert fetched == []  # the result finished it: never fetched again
    assert state.queue == {} and rig.h.windows == {}


def test_a_revoke_keeps_the_cancelled_copies_of_the_partitions_still_owned() -> None:
    # A rebuilt host's queued copy of a URL its lease's result finished is skipped at dispatch; a revoke of
    # another partition used to forget every such mark (they were pruned by a map the finish had already
    # dropped them from), and the copy was fetched again.
    state = _leased_state(finished=False)
    rig = Rig(state)
    part = partition_for("a.test", P)
    res = FetchResult(url="http://a.test/1", host="a.test", url_fp=url_fingerprint("http://a.test/1"), lease_id="L0",
                      outcome="fetched", status=200, started_at=T0 - 1, fetch_s=0.01, ended_at=T0 - 0.9)
    asyncio.run(rig.h.handle(Record("results", part, 0, "a.test", b""), res))
    assert "http://a.test/1" in rig.h.cancelled
    other = (part + 1) % P
    asyncio.run(rig.h.on_revoke([other]))
    assert "http://a.test/1" in rig.h.cancelled
    fetched = []
    for _ in range(6):
        rig.t += 0.5
        fetched += [o.value.url for o in asyncio.run(rig.h.tick(rig.t))]  # type: ignore[attr-defined]
    assert fetched == []
    asyncio.run(rig.h.on_revoke([part]))
    assert rig.h.cancelled == {}
