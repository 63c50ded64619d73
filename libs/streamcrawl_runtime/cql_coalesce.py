"""Group commit for idempotent CQL writes: the writes that concurrent handlers issue in the same event-loop
turn go out together as unlogged batches, so a poll batch of records costs a few requests, not one each.

Why: a statement's client CPU is mostly per request (~100-260 µs with acsylla, docs/benchmarks-cql.md),
and the services issue a dozen requests per crawled page; Cassandra's CPU is largely per request too.

What each caller keeps: its call returns only once its own writes are applied (or raises what the batch
raised), so "durable before the offset is committed" holds as before. What it relies on:

* the writes are idempotent upserts or deletes, so a failed batch is simply retried by each caller's
  record (at-least-once), and a batch that was half applied is repaired by the retry;
* no two writes pending in one turn touch the same cell: a batch's statements share one write time, so
  their order within it would not decide. The callers (CassandraCrawlState) only coalesce per-row writes
  issued by handlers that own the row's key at that moment (one host's records run one after another);
* a batch stays small: at most `max_statements` statements (Cassandra warns past 10 partitions in one
  unlogged batch) and about `max_bytes` of parameters (it warns past 5 KiB and refuses past 50 KiB); a
  caller whose writes alone exceed either goes out alone, as it would have before.

A caller alone in its turn costs what it cost before: one statement is sent as a plain execute.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from streamcrawl_runtime.ports.cql import CqlSession, Write

_Pending = list[tuple[list[Write], "asyncio.Future[None]"]]


def _size(writes: Sequence[Write]) -> int:
    """A cheap upper-ish estimate of the parameters' bytes (strings and bytes by length, others 8)."""
    n = 0
    for _cql, params in writes:
        for p in params:
            n += len(p) if isinstance(p, str | bytes) else 8
    return n


class WriteCoalescer:
    def __init__(self, session: CqlSession, max_statements: int = 10, max_bytes: int = 4096) -> None:
        self.session = session
        self.max_statements = max_statements
        self.max_bytes = max_bytes
        self._pending: _Pending | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self.requests = 0  # batches and single statements sent (for tests and curiosity)

    async def write(self, writes: Sequence[Write]) -> None:
        """Apply ``writes`` (idempotent, see the module docstring), possibly with other callers' writes."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new event loop (tests run one per call): nothing pending carries over
            self._loop, self._pending = loop, None
        fut: asyncio.Future[None] = loop.create_future()
        if self._pending is None:
            self._pending = []
            # Runs after every callback already queued for this turn: the handlers made ready by the same
            # poll batch reach their writes first.
            loop.call_soon(self._flush)
        self._pending.append((list(writes), fut))
        await fut

    def _flush(self) -> None:
        pending, self._pending = self._pending or [], None
        chunk: _Pending = []
        count = size = 0
        for writes, fut in pending:
            n, b = len(writes), _size(writes)
            if chunk and (count + n > self.max_statements or size + b > self.max_bytes):
                self._send(chunk)
                chunk, count, size = [], 0, 0
            chunk.append((writes, fut))
            count, size = count + n, size + b
        if chunk:
            self._send(chunk)

    def _send(self, chunk: _Pending) -> None:
        task = asyncio.ensure_future(self._apply(chunk))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def _apply(self, chunk: _Pending) -> None:
        writes = [w for ws, _ in chunk for w in ws]
        self.requests += 1
        try:
            if len(writes) == 1:
                await self.session.execute(writes[0][0], writes[0][1])
            else:
                await self.session.execute_unlogged(writes)
        except asyncio.CancelledError:  # shutting down: the callers are cancelled with it
            for _, fut in chunk:
                fut.cancel()
            raise
        except Exception as exc:  # every caller of the batch sees its failure, and retries
            for _, fut in chunk:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for _, fut in chunk:
            if not fut.done():
                fut.set_result(None)
