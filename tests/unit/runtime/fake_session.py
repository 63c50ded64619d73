"""A fake Cassandra driver session for CassandraCrawlState unit tests (no Cassandra here): prepare()
returns the CQL text, execute_async logs (cql, params) and answers canned rows."""

from __future__ import annotations

from typing import Any


class FakeResponse:
    has_more_pages = False

    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def add_callbacks(self, ok: Any, err: Any) -> None:
        ok(self.rows)


class Prepared(str):
    """The CQL text, with room for statement attributes (fetch_size)."""


class FakeSession:
    """prepare() returns the CQL text itself; execute_async logs (cql, params) and answers canned rows."""

    def __init__(self) -> None:
        self.executed: list[tuple[str, tuple[Any, ...]]] = []
        self.rows: dict[str, list[Any]] = {}

    def prepare(self, cql: str) -> Prepared:
        return Prepared(cql)

    def execute_async(self, stmt: str, params: tuple[Any, ...]) -> FakeResponse:
        self.executed.append((stmt, params))
        return FakeResponse(self.rows.get(stmt, []))
