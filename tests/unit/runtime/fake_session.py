"""A fake CQL session (the `CqlSession` port) for CassandraCrawlState unit tests (no Cassandra here):
execute() logs (cql, params) and answers canned rows; execute_unlogged() records each batch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Batch = list[tuple[str, tuple[Any, ...]]]


class FakeSession:
    def __init__(self) -> None:
        self.executed: list[tuple[str, tuple[Any, ...]]] = []
        self.rows: dict[str, list[Any]] = {}
        self.batches: list[Batch] = []
        self.page_sizes: dict[str, int | None] = {}

    async def execute(self, cql: str, params: Sequence[Any], page_size: int | None = None) -> list[Any]:
        self.executed.append((cql, tuple(params)))
        self.page_sizes[cql] = page_size
        return self.rows.get(cql, [])

    async def execute_unlogged(self, writes: Sequence[tuple[str, Sequence[Any]]]) -> None:
        self.batches.append([(cql, tuple(params)) for cql, params in writes])
