"""WriteCoalescer against a fake session: concurrent writes of one event-loop turn share batches (within
the statement and size caps), each caller returns once its batch is applied, and a failed batch fails
every caller in it and no other."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from streamcrawl_runtime.cql_coalesce import WriteCoalescer
from streamcrawl_runtime.ports.errors import TransientError

from .fake_session import FakeSession

W = "UPDATE t SET v = ? WHERE k = ?"


class Failing(FakeSession):
    """Fails every batch that carries a write for key "bad"."""

    async def execute_unlogged(self, writes: Sequence[tuple[str, Sequence[Any]]]) -> None:
        await asyncio.sleep(0)
        if any(p[1] == "bad" for _, p in writes):
            raise TransientError("cassandra: timeout")
        await super().execute_unlogged(writes)


def _run(session: FakeSession, calls: list[list[tuple[str, tuple[Any, ...]]]], **kw: Any) -> list[Any]:
    co = WriteCoalescer(session, **kw)

    async def go() -> list[Any]:
        return await asyncio.gather(*(co.write(c) for c in calls), return_exceptions=True)

    return asyncio.run(go())


def test_concurrent_writes_share_batches_up_to_the_statement_cap() -> None:
    s = FakeSession()
    calls = [[(W, (i, f"k{i}"))] for i in range(25)]
    assert _run(s, calls, max_statements=10) == [None] * 25
    assert [len(b) for b in s.batches] == [10, 10, 5] and s.executed == []
    assert [p for b in s.batches for _, p in b] == [(i, f"k{i}") for i in range(25)]  # every write, in order


def test_a_caller_alone_costs_what_it_did_before() -> None:
    s = FakeSession()
    assert _run(s, [[(W, (1, "k"))]]) == [None]
    assert s.executed == [(W, (1, "k"))] and s.batches == []  # one statement: a plain execute
    s2 = FakeSession()
    _run(s2, [[(W, (1, "a")), (W, (2, "b"))]])
    assert s2.batches == [[(W, (1, "a")), (W, (2, "b"))]]  # a caller's own batch stays one batch


def test_big_callers_are_not_merged_past_the_caps() -> None:
    s = FakeSession()
    big = [(W, (i, "x" * 3000)) for i in range(1)]
    calls = [big, [(W, (1, "k1"))], big, [(W, (i, f"m{i}")) for i in range(12)]]
    _run(s, calls, max_statements=10, max_bytes=4096)
    # 3000 + small fit in 4 KiB; the second big one does not; the 12-statement caller goes alone.
    assert [len(b) for b in s.batches] == [2, 12] and len(s.executed) == 1


def test_a_failed_batch_fails_its_callers_only() -> None:
    s = Failing()
    calls = [[(W, (i, "bad" if i == 3 else f"k{i}"))] for i in range(15)]
    out = _run(s, calls, max_statements=10)
    assert all(isinstance(r, TransientError) for r in out[:10])  # the first batch carried the bad write
    assert out[10:] == [None] * 5 and [len(b) for b in s.batches] == [5]


def test_writes_of_later_turns_go_in_later_batches() -> None:
    s = FakeSession()
    co = WriteCoalescer(s)

    async def go() -> None:
        await asyncio.gather(co.write([(W, (1, "a"))]), co.write([(W, (2, "b"))]))
        await co.write([(W, (3, "c"))])

    asyncio.run(go())
    assert s.batches == [[(W, (1, "a")), (W, (2, "b"))]] and s.executed == [(W, (3, "c"))]
    assert co.requests == 2


def test_cancelled_caller_does_not_break_the_batch() -> None:
    s = FakeSession()
    co = WriteCoalescer(s)

    async def go() -> None:
        a = asyncio.ensure_future(co.write([(W, (1, "a"))]))
        b = asyncio.ensure_future(co.write([(W, (2, "b"))]))
        await asyncio.sleep(0)
        a.cancel()
        await asyncio.gather(a, b, return_exceptions=True)
        assert b.result() is None

    asyncio.run(go())
    assert s.batches == [[(W, (1, "a")), (W, (2, "b"))]]  # idempotent: applied even though a gave up


@pytest.mark.parametrize("n", [1, 2])
def test_one_coalescer_serves_successive_event_loops(n: int) -> None:
    s = FakeSession()
    co = WriteCoalescer(s)
    for i in range(n):
        asyncio.run(co.write([(W, (i, "k"))]))
    assert len(s.executed) == n
