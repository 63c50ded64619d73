"""The crawl-state writes behind pause/resume, stats and the host view, on the real Cassandra: pauses,
partition summaries, outcome rows (newest first, with the fetched_lease mark), DNS answers."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC

import pytest
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.ports.state import FetchOutcome, PartitionSummary

pytestmark = pytest.mark.integration


def test_outcomes_dns_and_last_fetch_end_land_in_one_host_partition(crawl_cql, cql, unique):
    state = CassandraCrawlState(crawl_cql)
    host = f"view-{unique}.example"
    t = time.time()

    async def go() -> None:
        for i in range(12):
            await state.host_put_fetched_lease(host, f"lease{i}",
                                               FetchOutcome(t + i, f"http://{host}/{i}", "fetched", 200, 12.5))
        await state.host_put_dns(host, "127.0.0.9", None, t + 300)

    asyncio.run(go())
    rows = cql.execute("SELECT url, outcome, status, fetch_ms FROM host_outcomes WHERE host = ? LIMIT 10", (host,))
    assert [r.url for r in rows] == [f"http://{host}/{i}" for i in range(11, 1, -1)]  # newest first
    assert {(r.outcome, r.status, r.fetch_ms) for r in rows} == {("fetched", 200, 12.5)}
    [hs] = cql.execute("SELECT fetched_lease, last_fetch_end, dns_ip, dns_error, dns_expires_at FROM host_state"
                       " WHERE host = ?", (host,))
    assert hs.fetched_lease == "lease11" and hs.dns_ip == "127.0.0.9" and hs.dns_error is None
    end_at = hs.last_fetch_end
    end = (end_at if end_at.tzinfo else end_at.replace(tzinfo=UTC)).timestamp()
    assert abs(end - (t + 11)) < 0.002


def test_pauses_and_summaries_round_trip(crawl_cql, cql, unique):
    state = CassandraCrawlState(crawl_cql)
    host = f"pause-{unique}.example"
    cql.execute("INSERT INTO crawl_pauses (scope, reason) VALUES (?, ?)", (host, "test"))
    try:
        assert host in asyncio.run(state.crawl_pauses())
    finally:
        cql.execute("DELETE FROM crawl_pauses WHERE scope = ?", (host,))
    assert host not in asyncio.run(state.crawl_pauses())
    # frontier_summary is keyed by partition (shared with running crawls): check a write reads back, then
    # leave a row the next frontier tick overwrites anyway.
    summary = PartitionSummary(7, 3, 1, 2, {host: 3}, time.time())
    asyncio.run(state.summary_put(summary))
    [row] = cql.execute("SELECT queued, in_flight, hosts, top_hosts FROM frontier_summary WHERE part = 7")
    assert (row.queued, row.in_flight, row.hosts, dict(row.top_hosts)) == (3, 1, 2, {host: 3})
