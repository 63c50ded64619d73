"""The services' CQL session (acsylla) on the real Cassandra: every page of a result is read, an LWT's
outcome reads as ``row.applied``, an unlogged batch lands, a dead port is a TransientError (the run loop
retries it) and a bad statement is not (it would never succeed)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from streamcrawl_runtime.acsylla_session import AcsyllaSession
from streamcrawl_runtime.ports.errors import TransientError

pytestmark = pytest.mark.integration


def test_every_page_of_a_result_is_read(crawl_cql, unique):
    host = f"cql-pages-{unique}.test"
    ins = "INSERT INTO url_state (host, url_fp, url, depth, status) VALUES (?, ?, ?, ?, ?)"
    sel = "SELECT url_fp, url FROM url_state WHERE host = ?"

    async def scenario() -> list[tuple[int, str]]:
        await asyncio.gather(*(crawl_cql.execute(ins, (host, fp, f"http://{host}/{fp}", 0, "queued"))
                               for fp in range(23)))
        rows = await crawl_cql.execute(sel, (host,), page_size=5)  # 5 pages
        return [(r.url_fp, r.url) for r in rows]

    assert sorted(asyncio.run(scenario())) == [(fp, f"http://{host}/{fp}") for fp in range(23)]


def test_lwt_outcome_and_unlogged_batch(crawl_cql, unique):
    claim = ("INSERT INTO content_index (content_hash, canonical_url, storage_key, first_seen)"
             " VALUES (?, ?, ?, ?) IF NOT EXISTS")
    put = "UPDATE host_state SET soft404_signature = ? WHERE host = ?"
    get = "SELECT host, soft404_signature FROM host_state WHERE host = ?"
    now = datetime.now(UTC)

    async def scenario() -> tuple[list[object], list[object], list[object]]:
        first = await crawl_cql.execute(claim, (f"h-{unique}", "http://a.test/", "k", now))
        second = await crawl_cql.execute(claim, (f"h-{unique}", "http://b.test/", "k", now))
        hosts = [f"cql-batch-{i}-{unique}.test" for i in range(3)]
        await crawl_cql.execute_unlogged([(put, ("sig", h)) for h in hosts])
        got = [r for h in hosts for r in await crawl_cql.execute(get, (h,))]
        return first, second, got

    first, second, got = asyncio.run(scenario())
    assert [r.applied for r in first] == [True]  # type: ignore[attr-defined]
    [lost] = second
    assert lost.applied is False and lost.canonical_url == "http://a.test/"  # type: ignore[attr-defined]
    assert [r.soft404_signature for r in got] == ["sig"] * 3  # type: ignore[attr-defined]


def test_a_dead_port_is_transient_and_a_bad_statement_is_not(stack, crawl_cql):
    dead = AcsyllaSession(["127.0.0.1"], 1, stack.cassandra_keyspace, connect_timeout_s=1.0)
    with pytest.raises(TransientError):
        asyncio.run(dead.execute("SELECT host FROM host_state WHERE host = ?", ("x",)))
    with pytest.raises(Exception) as info:
        asyncio.run(crawl_cql.execute("SELECT no_such_column FROM host_state WHERE host = ?", ("x",)))
    assert not isinstance(info.value, TransientError)
