"""The `CqlSession` port (streamcrawl_runtime.ports.cql) on acsylla, the ScyllaDB/DataStax C++ driver
wrapped for asyncio.

Why a second driver next to the DataStax Python driver (which migrations, the control plane and the
launcher still use): the services issue several statements per crawled page, one awaited at a time, and
the Python driver costs ~500-650 µs of client CPU per such statement; acsylla costs ~230 µs for the same
statement (docs/benchmarks-cql.md, ``bench/cql_cost.py``). It also answers on the asyncio loop directly,
with no thread of ours between the loop and the driver.

`CqlSession` is the port: statements are identified by their CQL text (prepared once per session and
cached), parameters are positional, rows come back as named tuples (``row.host``), every page of a
result is read. Errors that mean "Cassandra is down or slow" become `TransientError`, so the run loop
retries instead of dead-lettering.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import threading
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import acsylla
from acsylla import errors as cass_errors
from prometheus_client import Counter

from streamcrawl_runtime.consistency import ConsistencyPolicy
from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.cql import Write
from streamcrawl_runtime.ports.errors import TransientError


class _DropNotices(logging.Filter):
    """The C++ driver logs, at error level, that a (non-Scylla) Cassandra node has no shard information,
    once per connection; that is expected here and would drown real errors."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "sharding info" not in record.getMessage()


logging.getLogger("acsylla").addFilter(_DropNotices())


# The driver's error classes (acsylla.errors) that mean the engine is unreachable, overloaded or slow:
# the same statement may succeed later.
_TRANSIENT = tuple(getattr(cass_errors, name) for name in (
    "CassErrorLibNoHostsAvailable", "CassErrorLibRequestTimedOut", "CassErrorLibUnableToConnect",
    "CassErrorLibWriteError", "CassErrorLibNoStreams", "CassErrorLibRequestQueueFull",
    "CassErrorLibNoAvailableIoThread", "CassErrorLibUnableToSetKeyspace", "CassErrorServerUnavailable",
    "CassErrorServerOverloaded", "CassErrorServerIsBootstrapping", "CassErrorServerWriteTimeout",
    "CassErrorServerReadTimeout", "CassErrorServerServerError", "CassErrorServerTruncateError",
))


class _AsTransient:
    """``with _AS_TRANSIENT:`` turns the driver's "down or slow" errors into TransientError (a plain class
    rather than contextlib.contextmanager, which builds a generator per use: it wraps every statement)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc is not None and isinstance(exc, _TRANSIENT):
            raise TransientError(f"cassandra: {exc!r}") from exc


_AS_TRANSIENT = _AsTransient()

# Statements by table and verb (a batch counts each of its statements, and once under op "batch"), so a
# benchmark can say how many of each a crawled page costs (bench/crawl_bench.py reads /metrics).
STATEMENTS = Counter("streamcrawl_cql_statements_total", "CQL statements sent, by table and verb",
                     ["table", "op"])
_STATEMENTS = Children(STATEMENTS)
# Requests sent: a single statement or an unlogged batch each (what a statement costs is mostly per request).
REQUESTS = Counter("streamcrawl_cql_requests_total", "CQL requests sent: single statements and batches", ["kind"])
_SINGLE, _BATCH = REQUESTS.labels("single"), REQUESTS.labels("batch")
_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE|TABLE)\s+(?:\w+\.)?(\w+)", re.IGNORECASE)


@functools.lru_cache(maxsize=1024)
def statement_kind(cql: str) -> tuple[str, str]:
    """(table, verb) of a CQL statement, for the statement counter: ``("url_state", "select")``."""
    verb = cql.lstrip().split(None, 1)[0].lower() if cql.strip() else "other"
    m = _TABLE.search(cql)
    return (m.group(1).lower() if m else "other"), verb


def _clean(name: str) -> str:
    """A column name as a Python identifier: ``[applied]`` → ``applied`` (the rule the Python driver uses,
    so callers read an LWT's outcome as ``row.applied`` with either)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name).strip("_") or "column"


@functools.lru_cache(maxsize=512)
def _row_class(columns: tuple[str, ...]) -> Any:
    """One named-tuple class per column list (prepared statements repeat theirs)."""
    return namedtuple("Row", [_clean(c) for c in columns])  # type: ignore[misc]


class AcsyllaSession:
    """`CqlSession` on acsylla. The driver session is bound to the event loop it was created on, so it is
    opened lazily on first use in the running loop (and again if a later caller runs another loop, as
    tests do with one ``asyncio.run`` per test); constructors that are not async can build one."""

    def __init__(self, hosts: Sequence[str], port: int, keyspace: str, *, connect_timeout_s: float = 5.0,
                 request_timeout_s: float = 20.0, consistency: ConsistencyPolicy | None = None,
                 pin_hosts: bool = False, reconnect_max_s: float = 4.0) -> None:
        self._cluster_args: dict[str, Any] = {
            "port": port, "protocol_version": 4, "connect_timeout": connect_timeout_s,
            "request_timeout": request_timeout_s,
            # reconnection to a node that went away: 1 s, then doubling up to reconnect_max_s (the driver's
            # default grows to 60 s, so a node back after a 14 s restart was retried only ~16 s later)
            "exponential_reconnect_base_delay_ms": min(1000, int(reconnect_max_s * 1000)),
            "exponential_reconnect_max_delay_ms": int(reconnect_max_s * 1000),
            "log_level": "error",  # to the "acsylla" logger (see _DropNotices)
            # Client-side timestamps, increasing within this process: one owner's writes to a row apply in
            # the order it made them, whichever coordinator takes them.
            "timestamp_gen": "monotonic",
        }
        if pin_hosts:  # coordinators only among ``hosts`` (the driver would use every node it discovers)
            self._cluster_args["whitelist_hosts"] = ",".join(hosts)
        self.consistency = consistency or ConsistencyPolicy()
        self._serial = acsylla.Consistency[self.consistency.serial]
        self._hosts = list(hosts)
        self._keyspace = keyspace
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._prepared: dict[str, Any] = {}
        self._levels: dict[str, acsylla.Consistency] = {}
        self._lock: asyncio.Lock | None = None

    async def _open(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._session is not None and self._loop is loop:
            return self._session
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop, self._session, self._prepared = asyncio.Lock(), loop, None, {}
        async with self._lock:
            if self._session is None:
                cluster = acsylla.create_cluster(self._hosts, **self._cluster_args)
                with _AS_TRANSIENT:
                    self._session = await cluster.create_session(keyspace=self._keyspace or None)
        return self._session

    async def _prepare(self, session: Any, cql: str) -> Any:
        stmt = self._prepared.get(cql)
        if stmt is None:
            with _AS_TRANSIENT:
                stmt = self._prepared[cql] = await session.create_prepared(cql)
        return stmt

    async def _bound(self, cql: str, params: Sequence[Any], page_size: int | None = None,
                     page_state: bytes | None = None) -> tuple[Any, Any]:
        session = self._session if self._loop is asyncio.get_running_loop() else None
        if session is None:
            session = await self._open()
        prepared = self._prepared.get(cql) or await self._prepare(session, cql)
        stmt = prepared.bind(page_size=page_size, page_state=page_state, consistency=self._level(cql),
                             serial_consistency=self._serial)
        stmt.bind_list(params if type(params) is list else list(params))  # the driver takes a list only
        return session, stmt

    def _level(self, cql: str) -> acsylla.Consistency:
        """The statement's consistency level, from its table's class (streamcrawl_runtime.consistency)."""
        level = self._levels.get(cql)
        if level is None:
            level = self._levels[cql] = acsylla.Consistency[self.consistency.for_table(statement_kind(cql)[0])]
        return level

    async def execute(self, cql: str, params: Sequence[Any], page_size: int | None = None) -> list[Any]:
        session, stmt = await self._bound(cql, params, page_size)
        _STATEMENTS(*statement_kind(cql)).inc()
        _SINGLE.inc()
        rows: list[Any] = []
        while True:
            with _AS_TRANSIENT:
                result = await session.execute(stmt)
            if result.count():
                row = _row_class(tuple(result.columns_names()))
                rows.extend(row(*r.as_tuple()) for r in result.all())
            if not result.has_more_pages():
                return rows
            session, stmt = await self._bound(cql, params, page_size, result.page_state())

    async def execute_unlogged(self, writes: Sequence[Write]) -> None:
        if len(writes) == 1:
            await self.execute(*writes[0])
            return
        batch = acsylla.create_batch_unlogged()
        session = None
        levels = []
        for cql, params in writes:
            session, stmt = await self._bound(cql, params)
            batch.add_statement(stmt)
            levels.append(self._level(cql))
            _STATEMENTS(*statement_kind(cql)).inc()
        if session is None:
            return
        strongest = self.consistency.strongest(lv.name for lv in levels)  # type: ignore[misc]
        batch.set_consistency(acsylla.Consistency[strongest])
        _STATEMENTS("batch", "batch").inc()
        _BATCH.inc()
        with _AS_TRANSIENT:
            await session.execute_batch(batch)

    async def close(self) -> None:
        if self._session is not None and self._loop is asyncio.get_running_loop():
            await self._session.close()
        self._session = None


class BlockingSession:
    """A `CqlSession` for blocking code (provisioning, the launcher, tools, tests): its own event loop in a
    daemon thread runs the asyncio session, so the driver session lives on one loop for its whole life."""

    def __init__(self, session: AcsyllaSession) -> None:
        self.session = session
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="cql", daemon=True)
        self._thread.start()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def execute(self, cql: str, params: Sequence[Any] = ()) -> list[Any]:
        result: list[Any] = self._run(self.session.execute(cql, params))
        return result

    def one(self, cql: str, params: Sequence[Any] = ()) -> Any:
        """The first row, or None."""
        rows = self.execute(cql, params)
        return rows[0] if rows else None

    def execute_unlogged(self, writes: Sequence[Write]) -> None:
        self._run(self.session.execute_unlogged(writes))

    def close(self) -> None:
        if self._loop.is_closed():
            return
        try:
            self._run(self.session.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            self._loop.close()
