"""CassandraCrawlState's one-request reads and batches on the real Cassandra: the rows land, the IN read
returns what the near-duplicate check needs. Every row is keyed by a per-test unique host or URL, and
reads of shared partitions (simhash_index, due_index) are filtered by it."""

from __future__ import annotations

import asyncio
import dataclasses
import random

import pytest
from streamcrawl_core.neardup import index_keys, signed64
from streamcrawl_core.partition import host_bucket
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.ports.state import DueRow, HostState, LastmodStats, QueuedUrl, UrlState

pytestmark = pytest.mark.integration


def _flip(fp: int, bits: list[int]) -> int:
    for b in bits:
        fp ^= 1 << b
    return fp


def test_simhash_candidates_one_in_read_finds_every_near_duplicate(crawl_cql, unique):
    """Fingerprints within 3 bits of the target, wherever the bits fall, are candidates; far ones that share
    no table key are not read at all."""
    state = CassandraCrawlState(crawl_cql)
    rnd = random.Random(unique)
    target = rnd.getrandbits(64)
    near = {f"near{i}": _flip(target, rnd.sample(range(64), rnd.randint(1, 3))) for i in range(12)}
    spread = {"spread": _flip(target, [0, 20, 40])}  # three bits in three different blocks
    far = {f"far{i}": rnd.getrandbits(64) for i in range(8)}
    pages = {f"http://simhash-{unique}.test/{name}": fp for name, fp in {**near, **spread, **far}.items()}
    # A page that changed: a row per fingerprint it had, and only the near one is found.
    changed = f"http://simhash-{unique}.test/changed"
    changed_fps = [rnd.getrandbits(64), _flip(target, [63])]

    async def scenario() -> list[tuple[int, str]]:
        for url, fp in pages.items():
            await state.simhash_add(signed64(fp), url)
        for fp in changed_fps:
            await state.simhash_add(signed64(fp), changed)
        return await state.simhash_candidates(signed64(target))

    found = [(fp, url) for fp, url in asyncio.run(scenario()) if unique in url]
    assert len(found) == len(set(found))
    expected = [(signed64(fp), url) for url, fp in pages.items() if "/far" not in url]
    assert sorted(found) == sorted([*expected, (signed64(_flip(target, [63])), changed)])


def test_url_row_and_simhash_rows_together(cql, crawl_cql, unique):
    state = CassandraCrawlState(crawl_cql)
    host = f"indexed-{unique}.test"
    url = f"http://{host}/p"
    sim = signed64(random.Random(unique).getrandbits(64))
    st = UrlState(host, 11, url, 2, "fetched", 200, "text/html", f"hash-{unique}", sim, f"pages/{unique}.gz",
                  etag='"e1"', fetched_at=1_700_000_000.0, fetch_count=1)

    async def scenario() -> tuple[UrlState | None, list[tuple[int, str]]]:
        await state.url_put_fetch_and_simhash(st)
        return await state.url_get(host, 11), await state.simhash_candidates(sim)

    row, found = asyncio.run(scenario())
    assert row is not None
    assert (row.url, row.depth, row.status, row.http_status, row.content_hash, row.simhash, row.storage_key,
            row.etag, row.fetched_at, row.fetch_count, row.canonical_url) == (
        url, 2, "fetched", 200, f"hash-{unique}", sim, f"pages/{unique}.gz", '"e1"', 1_700_000_000.0, 1, None)
    assert [p for p in found if p[1] == url] == [(sim, url)]
    for key in index_keys(sim):  # each of the 20 table rows, read on its own
        rows = cql.execute("SELECT simhash FROM simhash_index WHERE key = ? AND simhash = ? AND url = ?",
                           (key, sim, url))
        assert [r.simhash for r in rows] == [sim]


def test_politeness_and_finish_in_one_batch(crawl_cql, unique):
    state = CassandraCrawlState(crawl_cql)
    host, fp, url = f"polite-{unique}.test", 9, f"http://polite-{unique}.test/"

    async def scenario() -> tuple[HostState | None, list[QueuedUrl], UrlState | None]:
        await state.url_insert_discovered(host, fp, url, 0, 1_700_000_000.0, "ev")
        await state.queue_put(QueuedUrl(5, host, fp, url, 5, "discovery", 0.0, 0, 1_700_000_000.0))
        await state.host_put_lease(host, "L1", url, 1_700_000_120.0)
        await state.host_politeness_and_finish(host, 1_700_000_002.5, 2, 50.0, 4.0, 5, 5, fp, 1_700_000_001.0)
        queued = await state.queue_head(host, None, 10)
        return await state.host_get(host), queued, await state.url_get(host, fp)

    hs, queued, row = asyncio.run(scenario())
    assert hs is not None and row is not None
    assert (hs.next_allowed_at, hs.backoff_level, hs.last_fetch_ms, hs.crawl_delay_s) == (1_700_000_002.5, 2, 50.0, 4.0)
    assert (hs.lease_id, hs.lease_url, hs.lease_expires_at) == (None, None, None)
    assert queued == [] and row.frontier_done_at == 1_700_000_001.0


def test_a_queued_url_keeps_its_redirect_chain(crawl_cql, unique):
    """frontier_host_queue.redirect_chain (0010, after 0020's on the old table): a host's queue read back
    hands the chain on to the fetch."""
    state = CassandraCrawlState(crawl_cql)
    host = f"chain-{unique}.test"
    rows = [QueuedUrl(6, host, 21, f"http://{host}/hop", 5, "discovery", 0.0, 1, 1_700_000_000.0, (-3, 2**62, 7)),
            QueuedUrl(6, host, 22, f"http://{host}/link", 5, "discovery", 0.0, 1, 1_700_000_000.0)]

    async def scenario() -> list[QueuedUrl]:
        for row in rows:
            await state.queue_put(row)
        loaded = await state.queue_head(host, None, 10)  # ordered by (priority, url_fp)
        for row in rows:
            await state.queue_delete(6, host, row.priority, row.url_fp)
            await state.queue_unindex(6, host)
        return loaded

    # queue_head reads rows without their Kafka partition (-1): the caller knows it
    assert asyncio.run(scenario()) == [dataclasses.replace(r, part=-1) for r in rows]


def test_schedule_and_due_row_in_one_batch(crawl_cql, unique):
    state = CassandraCrawlState(crawl_cql)
    host, fp, url = f"sched-{unique}.test", 13, f"http://sched-{unique}.test/p"
    visit_at = 2_000_000_000.0 + random.Random(unique).randrange(3600) * 1000.0  # far from any crawl's rows

    async def scenario() -> tuple[UrlState | None, list[DueRow]]:
        await state.url_put_schedule_and_due(host, fp, url, 3, 43200.0, visit_at, 2, 1_700_000_000.0, f"h-{unique}")
        due = await state.due_range(visit_at - 1.0, visit_at + 1.0, 10_000)
        return await state.url_get(host, fp), [d for d in due if d.host == host]

    row, due = asyncio.run(scenario())
    assert row is not None
    assert (row.change_interval_s, row.next_visit_at, row.change_count, row.last_changed_at, row.sched_hash) == (
        43200.0, visit_at, 2, 1_700_000_000.0, f"h-{unique}")
    assert due == [DueRow(visit_at, host, fp, url, 3)]


def test_dated_visit_statistics_and_sitemap_lastmod_read_back(crawl_cql, unique):
    """Migration 0041's columns: the scheduler's dated-visit statistics and dedup's sitemap lastmod, written
    separately, read back together; a row written without them reads as no dated visits."""
    state = CassandraCrawlState(crawl_cql)
    host, url = f"lastmod-{unique}.test", f"http://lastmod-{unique}.test/p"
    visit_at = 2_000_000_000.0 + random.Random(unique).randrange(3600) * 1000.0

    async def scenario() -> tuple[UrlState | None, UrlState | None]:
        await state.url_put_schedule_and_due(host, 21, url, 1, 600.0, visit_at, 3, 1_700_000_000.0, "h", 5,
                                             1_699_990_000.0, LastmodStats(4, 3, 1234.5, 1))
        await state.url_put_sitemap_lastmod(host, 21, 1_699_999_000.0)
        await state.url_put_schedule_and_due(host, 22, url + "2", 1, 600.0, visit_at, 0, None, "h", 2, None)
        return await state.url_get(host, 21), await state.url_get(host, 22)

    dated, plain = asyncio.run(scenario())
    assert dated is not None and plain is not None
    assert (dated.lm_visits, dated.lm_changes, dated.lm_exposure_s, dated.lm_conflicts) == (4, 3, 1234.5, 1)
    assert dated.sitemap_lastmod == 1_699_999_000.0 and dated.sched_visits == 5
    assert (plain.lm_visits, plain.lm_changes, plain.lm_exposure_s, plain.lm_conflicts) == (0, 0, 0.0, 0)
    assert plain.sitemap_lastmod is None


def test_the_wire_digest_of_the_last_capture_reads_back(crawl_cql, unique):
    """Migration 0042's column: dedup's url_state.wire_hash, written with the fetch; a fetch without one
    (an identity body, an older producer) writes null, which reads back as None."""
    state = CassandraCrawlState(crawl_cql)
    host = f"wire-{unique}.test"
    st = UrlState(host, 31, f"http://{host}/p", 1, "fetched", 200, "text/html", f"hash-{unique}", None,
                  f"pages/{unique}.gz", fetched_at=1_700_000_000.0, fetch_count=1, wire_hash=f"wire-{unique}")

    async def scenario() -> tuple[UrlState | None, UrlState | None]:
        await state.url_put_fetch(st)
        coded = await state.url_get(host, 31)
        await state.url_put_fetch(dataclasses.replace(st, fetch_count=2, wire_hash=None))
        return coded, await state.url_get(host, 31)

    coded, plain = asyncio.run(scenario())
    assert coded is not None and coded.wire_hash == f"wire-{unique}"
    assert plain is not None and plain.wire_hash is None and plain.fetch_count == 2


def test_started_and_fetched_lease_marks_read_back_with_the_lease(crawl_cql, unique):
    state = CassandraCrawlState(crawl_cql)
    host = f"lease-{unique}.test"

    async def scenario() -> list[tuple[str | None, ...]]:
        seen = [tuple(await state.host_lease(host))]  # no row yet
        await state.host_put_lease(host, "L1", f"http://{host}/", 1_700_000_100.0)
        await state.host_put_started_lease(host, "L1", 1_700_000_050.1234)
        seen.append(tuple(await state.host_lease(host)))
        await state.host_put_fetched_lease(host, "L1")
        seen.append(tuple(await state.host_lease(host)))
        # the frontier's politeness write ends the lease; the marks stay until the next ones
        await state.host_put_politeness(host, 1_700_000_101.0, 0, 12.0, None)
        seen.append(tuple(await state.host_lease(host)))
        return seen  # type: ignore[return-value]

    started = 1_700_000_050.123  # a Cassandra timestamp keeps milliseconds
    assert asyncio.run(scenario()) == [(None, None, None, None), ("L1", None, "L1", started),
                                       ("L1", "L1", "L1", started), (None, "L1", "L1", started)]


def test_a_host_index_row_is_dropped_and_written_again(crawl_cql, unique):
    """frontier_hosts: queue_unindex deletes the row, queue_index_host writes it back (the frontier's
    repair when a new URL raced the delete), and a page of the bucket reads what is there."""
    state = CassandraCrawlState(crawl_cql)
    host = f"index-{unique}.test"
    bucket = host_bucket(host)

    async def page() -> list[str]:
        return [h for h in await state.queue_hosts(5, bucket, None, 10_000) if h == host]

    async def scenario() -> list[list[str]]:
        seen = []
        await state.queue_index_host(5, host)
        seen.append(await page())
        await state.queue_unindex(5, host)
        seen.append(await page())
        await state.queue_index_host(5, host)
        seen.append(await page())
        await state.queue_unindex(5, host)
        return seen

    assert asyncio.run(scenario()) == [[host], [], [host]]
