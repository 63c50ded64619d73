"""CassandraCrawlState's per-page requests against a fake driver session (no Cassandra here): which CQL
goes out, in how many requests, with which parameters. tests/integration/test_crawl_state_batches.py
runs the same methods on the real Cassandra."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_core.neardup import index_keys
from streamcrawl_core.partition import partition_for
from streamcrawl_core.simhash import to_signed64
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.ports.state import LastmodStats, UrlState

from .fake_session import Batch, FakeSession


def recording_state() -> tuple[CassandraCrawlState, FakeSession, list[Batch]]:
    """A state on a FakeSession: single requests in session.executed, each unlogged batch (one request)
    in the returned list."""
    session = FakeSession()
    return CassandraCrawlState(session), session, session.batches


def test_simhash_candidates_is_one_read_of_the_twenty_table_keys() -> None:
    state, session, _ = recording_state()
    sim = to_signed64(0x0001_0001_ABCD_0001)
    cql = "SELECT simhash, url FROM simhash_index WHERE key IN ?"
    session.rows[cql] = [SimpleNamespace(simhash=s, url=u) for s, u in
                         [(5, "http://a.test/1"), (5, "http://a.test/1"), (-7, "http://a.test/1"), (5, "http://b.test/")]]
    found = asyncio.run(state.simhash_candidates(sim))
    [(sent, params)] = session.executed
    assert sent == cql and params == (index_keys(sim),) and len(params[0]) == 20
    # Rows of several partitions may repeat a page; a page that changed keeps a row per fingerprint.
    assert found == [(5, "http://a.test/1"), (-7, "http://a.test/1"), (5, "http://b.test/")]


def test_url_put_fetch_and_simhash_writes_the_twenty_rows_and_the_url_row_in_batches_of_ten() -> None:
    state, session, batches = recording_state()
    sim = to_signed64(0xF0F0_1234_8000_0001)
    st = UrlState("a.test", 7, "http://a.test/p", 2, "fetched", 200, "text/html", "h1", sim, "pages/h1.gz",
                  fetched_at=1_700_000_000.0, fetch_count=1)
    asyncio.run(state.url_put_fetch_and_simhash(st))
    assert session.executed == [] or len(session.executed) == 1
    sent = [w for batch in batches for w in batch] + session.executed
    assert all(len(batch) <= 10 for batch in batches)
    put = "INSERT INTO simhash_index (key, simhash, url) VALUES (?, ?, ?)"
    assert sorted(p for c, p in sent if c == put) == sorted((k, sim, "http://a.test/p") for k in index_keys(sim))
    [(cql, params)] = [(c, p) for c, p in sent if c != put]
    assert cql.startswith("UPDATE url_state SET url = ?") and params[-2:] == ("a.test", 7)
    assert all(c.count("?") == len(p) for c, p in sent)


def test_host_politeness_and_finish_is_one_batch_of_the_three_writes() -> None:
    state, session, batches = recording_state()
    asyncio.run(state.host_politeness_and_finish("a.test", 1_700_000_002.0, 1, 50.0, None, 3, 4, 7,
                                                 1_700_000_001.0))
    assert session.executed == []
    [batch] = batches
    assert [cql.split(" WHERE")[0] for cql, _ in batch] == [
        "UPDATE host_state SET next_allowed_at = ?, backoff_level = ?, last_fetch_ms = ?, crawl_delay_s = ?,"
        " lease_id = null, lease_url = null, lease_expires_at = null",
        "DELETE FROM frontier_host_queue",
        "UPDATE url_state SET frontier_done_at = ?"]
    assert [p[-1] for _, p in batch] == ["a.test", 7, 7] and batch[1][1] == ("a.test", 4, 7)
    assert all(c.count("?") == len(p) for c, p in batch)
    # The same writes as the two single methods.
    asyncio.run(state.host_put_politeness("a.test", 1_700_000_002.0, 1, 50.0, None))
    asyncio.run(state.queue_finish(3, "a.test", 4, 7, 1_700_000_001.0))
    assert session.executed == [batch[0]] and batches[1] == batch[1:]


def test_url_put_schedule_and_due_is_one_batch_of_the_schedule_and_the_due_row() -> None:
    state, session, batches = recording_state()
    asyncio.run(state.url_put_schedule_and_due("a.test", 7, "http://a.test/p", 2, 86400.0, 1_700_007_200.0, 1,
                                               1_700_000_000.0, "h1", 3, 1_699_000_000.0,
                                               LastmodStats(2, 1, 5400.0, 1)))
    assert session.executed == []
    [[(sched, sp), (due, dp)]] = batches
    assert sched == ("UPDATE url_state SET change_interval_s = ?, next_visit_at = ?, change_count = ?,"
                     " last_changed_at = ?, sched_hash = ?, sched_visits = ?, sched_first_at = ?,"
                     " lm_visits = ?, lm_changes = ?, lm_exposure_s = ?, lm_conflicts = ?"
                     " WHERE host = ? AND url_fp = ?")
    assert sp[0] == 86400.0 and sp[2:5] == (1, sp[3], "h1") and sp[5] == 3 and sp[11:] == ("a.test", 7)
    assert sp[7:11] == (2, 1, 5400.0, 1)  # the dated-visit statistics (0041)
    assert sp[1].timestamp() == 1_700_007_200.0 and sp[6].timestamp() == 1_699_000_000.0
    # the due row goes under the host's Kafka partition and the hour (0040: no hot partition per hour)
    assert due.startswith("INSERT INTO due_by_part (part, bucket, next_visit_at, host, url_fp, url, depth)")
    assert dp[0] == partition_for("a.test", DEFAULT_PARTITIONS) and dp[1] == 1_700_007_200 // 3600
    assert dp[3:] == ("a.test", 7, "http://a.test/p", 2)
    assert sched.count("?") == len(sp) and due.count("?") == len(dp)
    asyncio.run(state.due_put(1_700_007_200.0, "a.test", 7, "http://a.test/p", 2))  # the same due row
    assert session.executed == [(due, dp)]


def test_due_range_reads_only_the_owned_partitions_hours() -> None:
    state, session, _batches = recording_state()
    asyncio.run(state.due_range(7200.0 * 100, 7200.0 * 100 + 3600.0, 50, parts=[5, 2]))
    keys = [(p[0], p[1]) for _stmt, p in session.executed]
    assert keys == [(2, 200), (2, 201), (5, 200), (5, 201)]
    assert all(stmt.startswith("SELECT next_visit_at, host, url_fp, url, depth FROM due_by_part WHERE part = ?")
               for stmt, _ in session.executed)


def test_url_put_sitemap_lastmod_is_one_upsert_of_the_column() -> None:
    state, session, batches = recording_state()
    asyncio.run(state.url_put_sitemap_lastmod("a.test", 7, 1_700_000_000.0))
    [(stmt, params)] = session.executed + [w for b in batches for w in b]
    assert stmt == "UPDATE url_state SET sitemap_lastmod = ? WHERE host = ? AND url_fp = ?"
    assert params[0].timestamp() == 1_700_000_000.0 and params[1:] == ("a.test", 7)
