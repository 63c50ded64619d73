"""CassandraCrawlState._exec keeps each statement's deadline on the asyncio loop, not in the driver."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from streamcrawl_runtime.crawl_state import CassandraCrawlState
from streamcrawl_runtime.errors import TransientError


class FakeFuture:
    has_more_pages = False

    def __init__(self) -> None:
        self.ok: Callable[[Any], None] | None = None
        self.err: Callable[[BaseException], None] | None = None

    def add_callbacks(self, ok: Callable[[Any], None], err: Callable[[BaseException], None]) -> None:
        self.ok, self.err = ok, err


class FakeSession:
    default_timeout = 0.2

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.futures: list[FakeFuture] = []

    def prepare(self, query: str) -> object:
        return type("Prepared", (), {"query": query})()

    def execute_async(self, stmt: Any, params: Any, **kw: Any) -> FakeFuture:
        self.calls.append(kw)
        self.futures.append(FakeFuture())
        return self.futures[-1]


def test_no_driver_timer_and_rows_arrive() -> None:
    session = FakeSession()
    state = CassandraCrawlState(session)  # type: ignore[arg-type]

    async def go() -> list[Any]:
        task = asyncio.ensure_future(state._exec("stmt", ()))
        await asyncio.sleep(0.01)
        fut = session.futures[-1]
        assert fut.ok is not None
        threading.Thread(target=fut.ok, args=([("a",), ("b",)],)).start()  # the driver's reactor thread
        return await task

    assert asyncio.run(go()) == [("a",), ("b",)]
    assert session.calls == [{"timeout": None}]


def test_a_statement_without_answer_fails_as_transient_after_the_deadline() -> None:
    session = FakeSession()
    state = CassandraCrawlState(session)  # type: ignore[arg-type]
    t0 = time.monotonic()
    with pytest.raises(TransientError, match=r"no answer within 0\.2 s"):
        asyncio.run(state._exec("stmt", ()))
    assert 0.15 < time.monotonic() - t0 < 2.0
