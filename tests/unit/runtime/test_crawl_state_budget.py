"""CassandraCrawlState's host budget statements against a fake driver session (no Cassandra here): the
CQL it prepares, the parameters it binds and how it reads the row back."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from streamcrawl_runtime.cassandra_state import CassandraCrawlState

from .fake_session import FakeSession

CQL_DIR = Path(__file__).resolve().parents[3] / "schemas" / "cql"


def host_row(**cols: Any) -> SimpleNamespace:
    names = ("robots_status", "robots_body", "robots_fetched_at", "crawl_delay_s", "last_fetch_ms",
             "next_allowed_at", "backoff_level", "lease_id", "lease_url", "lease_expires_at", "cycle",
             "urls_this_cycle", "soft404_signature")
    return SimpleNamespace(**{n: None for n in names} | cols)


def host_state_columns() -> dict[str, str]:
    """host_state's columns and CQL types, from the migrations."""
    text = "\n".join(p.read_text() for p in sorted(CQL_DIR.glob("*.cql")))
    body = re.search(r"CREATE TABLE IF NOT EXISTS host_state \((.*?)\n\);", text, re.S)
    assert body is not None
    cols = dict(re.findall(r"^\s+(\w+) (\w+)", body.group(1), re.M))
    cols.update(re.findall(r"ALTER TABLE host_state ADD (\w+) (\w+)", text))
    return cols


def test_host_put_budget_writes_the_count_with_its_cycle_in_one_update() -> None:
    session = FakeSession()
    state = CassandraCrawlState(session)
    asyncio.run(state.host_put_budget("a.test", 19675, 7))
    [(cql, params)] = session.executed
    assert cql == "UPDATE host_state SET cycle = ?, urls_this_cycle = ? WHERE host = ?"
    assert params == (19675, 7, "a.test") and cql.count("?") == len(params)
    cols = host_state_columns()
    assert (cols["cycle"], cols["urls_this_cycle"]) == ("int", "int")


def test_host_get_reads_the_cycle_back() -> None:
    session = FakeSession()
    state = CassandraCrawlState(session)
    get = "SELECT * FROM host_state WHERE host = ?"
    session.rows[get] = [host_row(cycle=19675, urls_this_cycle=7)]
    hs = asyncio.run(state.host_get("a.test"))
    assert hs is not None and (hs.host, hs.cycle, hs.urls_this_cycle) == ("a.test", 19675, 7)
    session.rows[get] = [host_row()]  # a row other services wrote; dedup never counted this host
    hs = asyncio.run(state.host_get("a.test"))
    assert hs is not None and (hs.cycle, hs.urls_this_cycle) == (None, 0)
