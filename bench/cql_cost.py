"""Client CPU per Cassandra statement through the Python driver, by how statements are issued.

    make stack-up && .venv/bin/python bench/cql_cost.py --statements 4000 --repeats 3

Why: py-spy puts the driver at 40-50% of the dedup, frontier and recrawl services' CPU, and those
services issue ~10 statements per crawled page, mostly one after another inside a message's handler.
This measures what one statement costs this process (user + system CPU, all threads: the caller and
the driver's libev I/O thread) on the real Cassandra started by ``make stack-up``:

- ``sequential, asyncio``: ``CassandraCrawlState`` (our adapter) awaiting one statement at a time, as a
  handler does;
- ``16 in flight, asyncio``: the same adapter with 16 statements awaited concurrently;
- ``sequential, sync``: the driver's blocking ``Session.execute``, no asyncio;
- ``burst, sync``: the driver's ``execute_async`` for all statements, then the results.

Each mode runs a single-row write (``host_put_soft404``) and a single-row read (``url_get``) on a scratch
host name. Modes interleave, ``--repeats`` times; the table gives medians. The rows written are
``bench-cql-*`` hosts in host_state (harmless; ``make stack-reset`` clears them).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from collections.abc import Awaitable, Callable

from streamcrawl_runtime.connect import cassandra_session
from streamcrawl_runtime.crawl_state import CassandraCrawlState
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


async def measure(state: CassandraCrawlState, n: int) -> dict[str, tuple[float, float]]:
    session = state.s
    hosts = _hosts(n)
    write = session.prepare("UPDATE host_state SET soft404_signature = ? WHERE host = ?")
    read = session.prepare("SELECT * FROM url_state WHERE host = ? AND url_fp = ?")

    async def seq_write() -> None:
        for h in hosts:
            await state.host_put_soft404(h, "none")

    async def seq_read() -> None:
        for i, h in enumerate(hosts):
            await state.url_get(h, i)

    async def conc(op: Callable[[int, str], Awaitable[object]]) -> None:
        sem = asyncio.Semaphore(16)

        async def one(i: int, h: str) -> None:
            async with sem:
                await op(i, h)

        await asyncio.gather(*(one(i, h) for i, h in enumerate(hosts)))

    async def sync_seq(stmt: object, write_: bool) -> None:
        for i, h in enumerate(hosts):
            session.execute(stmt, ("none", h) if write_ else (h, i))

    async def sync_burst(stmt: object, write_: bool) -> None:
        futures = [session.execute_async(stmt, ("none", h) if write_ else (h, i)) for i, h in enumerate(hosts)]
        for f in futures:
            f.result()

    return {
        "sequential, asyncio / write": await _timed(n, seq_write),
        "sequential, asyncio / read": await _timed(n, seq_read),
        "16 in flight, asyncio / write": await _timed(n, lambda: conc(lambda _i, h: state.host_put_soft404(h, "none"))),
        "16 in flight, asyncio / read": await _timed(n, lambda: conc(lambda i, h: state.url_get(h, i))),
        "sequential, sync / write": await _timed(n, lambda: sync_seq(write, True)),
        "sequential, sync / read": await _timed(n, lambda: sync_seq(read, False)),
        "burst, sync / write": await _timed(n, lambda: sync_burst(write, True)),
        "burst, sync / read": await _timed(n, lambda: sync_burst(read, False)),
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--statements", type=int, default=4000, help="per mode and repeat")
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    settings = StackSettings()
    session = cassandra_session(settings, settings.cassandra_keyspace)
    state = CassandraCrawlState(session)
    for i in range(300):  # warm the connection and the prepared statements
        await state.url_get("bench-cql-warm.test", i)
    runs = [await measure(state, args.statements) for _ in range(args.repeats)]
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
