"""The CQL port the Cassandra adapters are written against (`streamcrawl_runtime.acsylla_session` is its
only implementation). Statements are identified by their CQL text (prepared once per session and
cached), parameters are positional, rows come back as named tuples (``row.host``), every page of a
result is read. Errors that mean "Cassandra is down or slow" surface as `TransientError`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

Write = tuple[str, Sequence[Any]]  # CQL text and its positional parameters


class CqlSession(Protocol):
    async def execute(self, cql: str, params: Sequence[Any], page_size: int | None = None) -> list[Any]:
        """Run one statement; every row of every page, as named tuples (none for a write)."""

    async def execute_unlogged(self, writes: Sequence[Write]) -> None:
        """Idempotent writes as one unlogged batch: one request, no batch log, not atomic across
        partitions."""
