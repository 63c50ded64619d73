"""Client CPU per Cassandra statement, by driver and by how statements are issued.

    make stack-up && .venv/bin/python bench/cql_cost.py --statements 4000 --repeats 3

Why: py-spy put the DataStax Python driver at 40-50% of the dedup, frontier and recrawl services' CPU,
and those services issue ~10 statements per crawled page, mostly one after another inside a message's
handler. This measures what one statement costs this process (user + system CPU, all threads: the
caller and the drivers' I/O threads) on the real Cassandra started by ``make stack-up``:

- ``acsylla, sequential``: ``CassandraCrawlState`` on ``AcsyllaSession`` (what the services use now)
  awaiting one statement at a time, as a handler does;
- ``acsylla, 16 in flight``: the same with 16 statements awaited concurrently;
- ``datastax, sequential, asyncio``: the DataStax driver's ``execute_async`` bridged to asyncio with a
  callback that wakes the loop (the services' adapter before acsylla, kept here as the baseline);
- ``datastax, 16 in flight, asyncio``: the same, 16 concurrently;
- ``datastax, sequential, sync``: the driver's blocking ``Session.execute``, no asyncio;
- ``datastax, burst, sync``: the driver's ``execute_async`` for all statements, then the results.

Each mode runs a single-row write (``host_put_soft404``'s statement) and a single-row read (``url_get``'s)
on a scratch host name. Modes interleave, ``--repeats`` times; the table gives medians. The rows written
are ``bench-cql-*`` hosts in host_state (harmless; ``make stack-reset`` clears them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from cassandra.cluster import Session
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.connect import crawl_cql_session
from streamcrawl_runtime.settings import StackSettings


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _hosts(n: int) -> list[str]:
    return [f"bench-cql-{i % 500}.test" for i in range(n)]


async def _timed(n: int, run: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    c0, t0 = _cpu(), time.perf_counter()
    await run()
    return 1e6 * (_cpu() - c0) / n, 1e6 * (time.perf_counter() - t0) / n


WRITE = "UPDATE host_state SET soft404_signature = ? WHERE host = ?"
READ = "SELECT * FROM url_state WHERE host = ? AND url_fp = ?"


async def datastax_exec(session: Session, stmt: Any, params: tuple[Any, ...]) -> list[Any]:
    """The DataStax driver bridged to asyncio the way the services did before acsylla: execute_async and
    a callback that wakes the event loop from the driver's I/O thread."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[list[Any]] = loop.create_future()

    def settle(rows: list[Any] | None, exc: BaseException | None) -> None:
        if fut.done():
            return
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(rows or [])

    rf = session.execute_async(stmt, params)
    rf.add_callbacks(lambda rows: loop.call_soon_threadsafe(settle, rows, None),
                     lambda exc: loop.call_soon_threadsafe(settle, None, exc))
    return await fut


async def measure(state: CassandraCrawlState, session: Session, n: int) -> dict[str, tuple[float, float]]:
    hosts = _hosts(n)
    write, read = session.prepare(WRITE), session.prepare(READ)

    async def seq(op: Callable[[int, str], Awaitable[object]]) -> None:
        for i, h in enumerate(hosts):
            await op(i, h)

    async def conc(op: Callable[[int, str], Awaitable[object]]) -> None:
        sem = asyncio.Semaphore(16)

        async def one(i: int, h: str) -> None:
            async with sem:
                await op(i, h)

        await asyncio.gather(*(one(i, h) for i, h in enumerate(hosts)))

    def a_write(_i: int, h: str) -> Awaitable[object]:
        return state.host_put_soft404(h, "none")

    def a_read(i: int, h: str) -> Awaitable[object]:
        return state.url_get(h, i)

    def d_write(_i: int, h: str) -> Awaitable[object]:
        return datastax_exec(session, write, ("none", h))

    def d_read(i: int, h: str) -> Awaitable[object]:
        return datastax_exec(session, read, (h, i))

    async def sync_seq(stmt: object, write_: bool) -> None:
        for i, h in enumerate(hosts):
            session.execute(stmt, ("none", h) if write_ else (h, i))

    async def sync_burst(stmt: object, write_: bool) -> None:
        futures = [session.execute_async(stmt, ("none", h) if write_ else (h, i)) for i, h in enumerate(hosts)]
        for f in futures:
            f.result()

    return {
        "acsylla, sequential / write": await _timed(n, lambda: seq(a_write)),
        "acsylla, sequential / read": await _timed(n, lambda: seq(a_read)),
        "acsylla, 16 in flight / write": await _timed(n, lambda: conc(a_write)),
        "acsylla, 16 in flight / read": await _timed(n, lambda: conc(a_read)),
        "datastax, sequential, asyncio / write": await _timed(n, lambda: seq(d_write)),
        "datastax, sequential, asyncio / read": await _timed(n, lambda: seq(d_read)),
        "datastax, 16 in flight, asyncio / write": await _timed(n, lambda: conc(d_write)),
        "datastax, 16 in flight, asyncio / read": await _timed(n, lambda: conc(d_read)),
        "datastax, sequential, sync / write": await _timed(n, lambda: sync_seq(write, True)),
        "datastax, sequential, sync / read": await _timed(n, lambda: sync_seq(read, False)),
        "datastax, burst, sync / write": await _timed(n, lambda: sync_burst(write, True)),
        "datastax, burst, sync / read": await _timed(n, lambda: sync_burst(read, False)),
    }


def datastax_session(settings: StackSettings) -> Session:
    """The DataStax Python driver's session, with the settings the product used before it moved every
    Cassandra user to acsylla (protocol v4, round-robin, 20 s timeout): the comparison's other side."""
    from cassandra.cluster import Cluster
    from cassandra.policies import RoundRobinPolicy
    from cassandra.query import named_tuple_factory

    cluster = Cluster(contact_points=settings.cassandra_host_list, port=settings.cassandra_port,
                      load_balancing_policy=RoundRobinPolicy(), protocol_version=4)
    session = cluster.connect(settings.cassandra_keyspace)
    session.default_timeout = 20.0
    session.row_factory = named_tuple_factory
    return session


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--statements", type=int, default=4000, help="per mode and repeat")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    settings = StackSettings()
    session = datastax_session(settings)
    state = CassandraCrawlState(crawl_cql_session(settings))
    for i in range(300):  # warm the connections and the prepared statements
        await state.url_get("bench-cql-warm.test", i)
        await datastax_exec(session, session.prepare(READ), ("bench-cql-warm.test", i))
    runs = [await measure(state, session, args.statements) for _ in range(args.repeats)]
    print(f"{args.statements} statements per mode, {args.repeats} repeats (medians), {os.cpu_count()} CPUs; "
          "client CPU = this process, all threads\n")
    print("| mode / statement | client CPU µs per statement | wall µs per statement |\n|---|---|---|")
    for key in runs[0]:
        cpu = statistics.median(r[key][0] for r in runs)
        wall = statistics.median(r[key][1] for r in runs)
        print(f"| {key} | {cpu:.0f} | {wall:.0f} |")
    session.cluster.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
