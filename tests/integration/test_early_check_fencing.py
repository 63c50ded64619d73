"""The early lease check's two write-then-read sequences on the real Cassandra (streamcrawl_core.lease):
the frontier fences host_state's lease and reads the marks again (`FrontierDispatch._early_check`); a
request starting at or after its `confirm_after` writes its started mark and reads the lease again
(`FetcherHandler.fetch`). Each side has its own CassandraCrawlState on its own session, at the product's
consistency levels (host_state: the leases class, QUORUM), with the write coalescer in the path; the
frontier and fetcher code is the services' own. Only the network is a stand-in: a fetcher whose DNS
answers at once and whose HTTP client records the request instead of sending it (robots.txt and the
soft-404 answer are in host_state already, so the lease's one request is the page).

What must hold: never both the frontier putting the URL back (the lease recovered) and the fetcher sending
its request; a recovered lease leaves host_state fenced; a lease the frontier keeps has its started mark
and is in host_state again; a fetcher that sends nothing answers lease_expired (that result ends a kept
lease, as any result: the frontier's unit tests)."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from streamcrawl_contracts.messages import FetchRequest, FetchResult
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.lease import Lease, confirm_after, early_check_at, grant
from streamcrawl_core.politeness import PolitenessConfig
from streamcrawl_core.robots import RobotsConfig
from streamcrawl_fetcher.handler import FetcherHandler
from streamcrawl_fetcher.ports import HttpResponse
from streamcrawl_fetcher.robots_cache import NO_SOFT404, RobotsCache
from streamcrawl_frontier.handler import FrontierHandler
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.connect import crawl_cql_session
from streamcrawl_runtime.memory import MemoryBlobStore
from streamcrawl_runtime.settings import StackSettings

pytestmark = pytest.mark.integration

LEASE_S, CHECK_S = 60.0, 20.0


class Resolver:
    async def resolve(self, host: str) -> str:
        return "127.0.0.1"


class RecordingHttp:
    """The fetcher's HTTP client, minus the network: each GET is recorded (the request the lease paid for)
    and answered 404 (an http_error: nothing to store)."""

    def __init__(self) -> None:
        self.resolver = Resolver()
        self.sent: list[str] = []

    async def get(self, url: str, max_bytes: int, headers: dict[str, str] | None = None) -> HttpResponse:
        self.sent.append(url)
        return HttpResponse(404, httpx.Headers(), b"", False, 0.001)

    async def aclose(self) -> None:
        return None


async def _no_robots_fetch(url: str, hops: Any) -> tuple[int | None, bytes | None]:
    raise AssertionError(f"robots.txt is in host_state already; fetched {url}")


@dataclass
class Round:
    host: str
    lease: Lease
    req: FetchRequest


@dataclass
class Verdict:
    recovered: bool  # the frontier ended the lease at its early check: the URL goes back
    sent: bool  # the fetcher sent the request under the lease
    result: FetchResult
    lease_id: str | None  # host_state's lease afterwards
    started_lease: str | None

    @property
    def kind(self) -> tuple[str, str]:
        return ("recovered" if self.recovered else "kept", "sent" if self.sent else "not sent")


class Sides:
    """A frontier and a fetcher, each on a session of its own."""

    def __init__(self, stack: StackSettings, wrap: Callable[[str, CassandraCrawlState], Any] | None = None) -> None:
        self.fstate = CassandraCrawlState(crawl_cql_session(stack))
        self.gstate = CassandraCrawlState(crawl_cql_session(stack))
        wrap = wrap or (lambda side, state: state)
        self.frontier = FrontierHandler(wrap("F", self.fstate), PolitenessConfig(), lease_s=LEASE_S,
                                        lease_check_s=CHECK_S)
        self.http = RecordingHttp()
        gstate = wrap("G", self.gstate)
        self.fetcher = FetcherHandler(self.http, RobotsCache(gstate, _no_robots_fetch, RobotsConfig()),  # type: ignore[arg-type]
                                      gstate, MemoryBlobStore())

    async def close(self) -> None:
        await self.fstate.s.close()  # type: ignore[attr-defined]
        await self.gstate.s.close()  # type: ignore[attr-defined]

    async def lease(self, host: str) -> Round:
        """A lease granted CHECK_S + 1 s ago, durable in host_state and tracked by the frontier, as the
        dispatch leaves it; its request as the frontier built it; the host's robots.txt (a 404: allowed)
        and soft-404 answer known, as after its first leases."""
        now = time.time()
        url = f"http://{host}/page"
        granted_at = now - CHECK_S - 1.0
        lease = grant(url, url_fingerprint(url), 0, granted_at, LEASE_S)
        check = early_check_at(granted_at, LEASE_S, CHECK_S)
        assert check is not None and check <= now  # the frontier's check is due now
        req = FetchRequest(url=url, host=host, url_fp=lease.url_fp, lease_id=lease.lease_id,
                           lease_expires_at=lease.expires_at,
                           confirm_after=confirm_after(granted_at, LEASE_S, CHECK_S))
        assert 0.0 < req.confirm_after <= now  # a request starting now confirms its lease
        # robots.txt before the soft-404 answer: new rules clear the answer (host_put_robots)
        await self.gstate.host_put_robots(host, 404, None, now, None)
        await asyncio.gather(self.fstate.host_put_lease(host, lease.lease_id, url, lease.expires_at),
                             self.gstate.host_put_soft404(host, NO_SOFT404))
        self.frontier.leases.track(host, lease)
        return Round(host, lease, req)

    async def check(self, r: Round) -> None:
        """The frontier's early check of the lease (what `_expire` runs when its check time comes)."""
        await self.frontier._early_check(r.host, r.lease, time.time())

    async def fetch(self, r: Round) -> FetchResult:
        """The fetcher's handling of the request, as a record produced after it took its partition (no
        replay check: the confirming read is the one that sees a fence)."""
        return await self.fetcher.fetch(r.req, maybe_replay=False)

    async def verdict(self, r: Round, result: FetchResult) -> Verdict:
        marks = await self.fstate.host_lease(r.host)
        sent = [u for u in self.http.sent if u.startswith(f"http://{r.host}/")]
        assert sent in ([], [r.req.url]), sent  # at most one request, and it is the page
        return Verdict(self.frontier.leases.get(r.host) is None, bool(sent), result, marks.lease_id,
                       marks.started_lease)


def assert_rules(r: Round, v: Verdict, where: str = "") -> None:
    lid = r.lease.lease_id
    assert not (v.recovered and v.sent), f"both proceeded{where}: URL put back and the request sent"
    if v.recovered:
        assert v.lease_id is None, f"recovered but host_state's lease is {v.lease_id}{where}"
    else:  # kept: the frontier saw the start, and a rebuilt frontier would keep the host blocked too
        assert v.started_lease == lid, f"kept without a started mark{where}"
        assert v.lease_id == lid, f"kept but host_state's lease is {v.lease_id}{where}"
    if v.sent:
        assert v.started_lease == lid and v.result.outcome == "http_error", where
    else:
        assert v.result.outcome == "lease_expired", f"{v.result.outcome}{where}"
        assert "fenced" in (v.result.error or ""), f"{v.result.error}{where}"


def test_fence_first_then_a_late_fetcher_sends_nothing(stack: StackSettings, unique: str) -> None:
    async def go() -> tuple[Round, Verdict]:
        sides = Sides(stack)
        r = await sides.lease(f"fence-first-{unique}.test")
        await sides.check(r)  # fence, second read: nothing started, so the URL goes back
        assert sides.frontier.leases.get(r.host) is None
        assert (await sides.gstate.host_lease(r.host)).lease_id is None  # the fetcher's session sees the fence
        result = await sides.fetch(r)  # started mark, confirming read: fenced
        v = await sides.verdict(r, result)
        await sides.close()
        return r, v

    r, v = asyncio.run(go())
    assert v.kind == ("recovered", "not sent")
    assert v.started_lease == r.lease.lease_id  # the fenced request wrote its started mark, then read the fence
    assert_rules(r, v)


def test_start_mark_first_then_the_check_keeps_the_lease(stack: StackSettings, unique: str) -> None:
    """The started mark (and its confirming read) before the check: not fenced at all, the request sent."""
    async def go() -> tuple[Round, Verdict]:
        sides = Sides(stack)
        r = await sides.lease(f"start-first-{unique}.test")
        result = await sides.fetch(r)
        await sides.check(r)
        v = await sides.verdict(r, result)
        await sides.close()
        return r, v

    r, v = asyncio.run(go())
    assert v.kind == ("kept", "sent")
    assert_rules(r, v)


# ---------------------------------------------------------------- every sequential interleaving

@dataclass
class Script:
    """Runs the two sides' lease reads and writes in a given order, each finished before the next starts:
    `order` is a string of F (frontier) and G (fetcher), one letter per call; a side that has finished
    skips its remaining letters. The calls themselves go to the real adapter."""

    order: str
    pos: int = 0
    finished: set[str] = field(default_factory=set)
    log: list[tuple[str, str, Any]] = field(default_factory=list)
    cond: asyncio.Condition = field(default_factory=asyncio.Condition)

    def _turn(self) -> str | None:
        while self.pos < len(self.order) and self.order[self.pos] in self.finished:
            self.pos += 1
        return self.order[self.pos] if self.pos < len(self.order) else None

    async def step(self, side: str, name: str, call: Callable[[], Awaitable[Any]]) -> Any:
        async with self.cond:
            await self.cond.wait_for(lambda: self._turn() in (side, None))
        out = None
        try:
            out = await call()
            return out
        finally:
            async with self.cond:
                self.log.append((side, name, out))
                self.pos += 1
                self.cond.notify_all()

    async def run(self, side: str, work: Awaitable[Any]) -> Any:
        try:
            return await work
        finally:
            async with self.cond:
                self.finished.add(side)
                self.cond.notify_all()


class Sequenced:
    """A side's CassandraCrawlState whose lease reads and writes wait for their turn in a Script."""

    def __init__(self, state: CassandraCrawlState, side: str, script: Script) -> None:
        self._state, self._side, self._script = state, side, script

    def __getattr__(self, name: str) -> Any:
        return getattr(self._state, name)

    async def host_lease(self, host: str) -> Any:
        return await self._script.step(self._side, "read", lambda: self._state.host_lease(host))

    async def host_put_lease(self, host: str, lease_id: str | None, url: str | None,
                             expires_at: float | None) -> None:
        await self._script.step(self._side, "fence" if lease_id is None else "restore",
                                lambda: self._state.host_put_lease(host, lease_id, url, expires_at))

    async def host_put_started_lease(self, host: str, lease_id: str, started_at: float) -> None:
        await self._script.step(self._side, "start",
                                lambda: self._state.host_put_started_lease(host, lease_id, started_at))


def _expected(log: list[tuple[str, str, Any]]) -> tuple[str, str]:
    """The outcome a sequential history implies, if every read sees every write that finished before it:
    the frontier keeps the lease iff one of its reads came after the started mark; the fetcher sends iff
    its confirming read came before the fence or after the lease was written back."""
    names = [(s, n) for s, n, _ in log]
    start = names.index(("G", "start"))
    kept = any(s == "F" and n == "read" for s, n in names[start + 1:])
    confirm = names.index(("G", "read"))
    fences = sum(1 for s, n in names[:confirm] if s == "F" and n in ("fence", "restore"))
    return ("kept" if kept else "recovered", "sent" if fences % 2 == 0 else "not sent")


# The frontier makes up to 4 calls (read, fence, read, write-back), the fetcher 2 (start, confirm).
ORDERS = sorted({"".join(p) for p in itertools.permutations("FFFFGG")})


async def _sequenced(stack: StackSettings, order: str, host: str) -> tuple[Verdict, Round, Script]:
    """One lease on ``host``, the frontier's check and the fetcher's fetch run in ``order``."""
    script = Script(order)
    sides = Sides(stack, lambda side, state: Sequenced(state, side, script))
    r = await sides.lease(host)
    _, result = await asyncio.gather(script.run("F", sides.check(r)), script.run("G", sides.fetch(r)))
    v = await sides.verdict(r, result)
    await sides.close()
    return v, r, script


@pytest.mark.parametrize("order", ORDERS)
def test_each_sequential_interleaving_on_cassandra(stack: StackSettings, unique: str, order: str) -> None:
    v, r, script = asyncio.run(_sequenced(stack, order, f"seq-{order.lower()}-{unique}.test"))
    history = " ".join(f"{s}:{n}" for s, n, _ in script.log)
    where = f" ({order}: {history})"
    assert_rules(r, v, where)
    assert v.kind == _expected(script.log), where


def test_the_fence_raced_cases_named(stack: StackSettings, unique: str) -> None:
    """The two raced orders spelled out: a start between the frontier's first read and its fence is seen
    by the second read (kept, and the request sent after the write-back); a start and confirm between the
    fence and the second read: kept (started) and not sent (the fetcher saw the fence)."""
    assert ("FGFFFG" in ORDERS) and ("FFGGFF" in ORDERS)

    async def go(order: str) -> Verdict:
        v, _r, script = await _sequenced(stack, order, f"named-{order.lower()}-{unique}.test")
        assert [f"{s}:{n}" for s, n, _ in script.log] == {
            "FGFFFG": ["F:read", "G:start", "F:fence", "F:read", "F:restore", "G:read"],
            "FFGGFF": ["F:read", "F:fence", "G:start", "G:read", "F:read", "F:restore"]}[order]
        return v

    assert asyncio.run(go("FGFFFG")).kind == ("kept", "sent")
    assert asyncio.run(go("FFGGFF")).kind == ("kept", "not sent")


# ---------------------------------------------------------------- concurrent rounds

ROUNDS, WAVE = 200, 10


def test_concurrent_check_and_start_never_both_proceed(stack: StackSettings, unique: str) -> None:
    """200 rounds, each on a host of its own, in waves of 10 at once (the coalescer batches the waves'
    writes across hosts, as in the services): the frontier's early check and the fetcher's request run
    concurrently, each side held back by a random share of a round trip, so the fetcher's start lands
    before the first read, around the fence, or after the second read. Every round must end in an allowed
    state, and both the frontier and the fetcher must win some rounds (else no race was run)."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)

    async def go() -> tuple[Counter[tuple[str, str]], float]:
        sides = Sides(stack)
        probe = f"rtt-{unique}.test"
        t0 = time.perf_counter()
        for _ in range(10):
            await sides.fstate.host_lease(probe)
        rtt = (time.perf_counter() - t0) / 10

        async def later(delay: float, work: Awaitable[Any]) -> Any:
            if delay > 0:
                await asyncio.sleep(delay)
            return await work

        kinds: Counter[tuple[str, str]] = Counter()
        for wave in range(ROUNDS // WAVE):
            rounds = await asyncio.gather(*(sides.lease(f"race{wave}x{i}-{unique}.test") for i in range(WAVE)))
            # the fetcher's start goes out after one read of its own (robots), the fence after the
            # frontier's first read: an offset of 0 puts them in the same round trip
            offsets = [rng.uniform(-3.0, 5.0) * rtt for _ in rounds]

            async def one(r: Round, off: float) -> tuple[Round, FetchResult]:
                _, result = await asyncio.gather(later(-off, sides.check(r)), later(off, sides.fetch(r)))
                return r, result

            for r, result in await asyncio.gather(*(one(r, off) for r, off in zip(rounds, offsets, strict=True))):
                v = await sides.verdict(r, result)
                assert_rules(r, v, f" (round {r.host}, seed {seed})")
                kinds[v.kind] += 1
        await sides.close()
        return kinds, rtt

    t0 = time.monotonic()
    kinds, rtt = asyncio.run(go())
    took = time.monotonic() - t0
    print(f"outcomes {dict(kinds)}; read round trip {rtt * 1000:.2f} ms; {took:.1f} s; seed {seed}")
    assert sum(kinds.values()) == ROUNDS
    assert kinds[("recovered", "sent")] == 0
    assert kinds[("recovered", "not sent")] > 0 and kinds[("kept", "sent")] > 0, (kinds, seed)
