"""Smoke tests against the real engines: Cassandra prepared statements, S3 gzip blobs by content
hash, idempotent provisioning."""

from __future__ import annotations

import gzip
import hashlib

import pytest
from streamcrawl_runtime.ports.blobs import page_key
from streamcrawl_runtime.provisioning import apply_migrations, ensure_bucket, ensure_topics, load_migrations
from streamcrawl_runtime.s3_blobs import S3BlobStore

pytestmark = pytest.mark.integration


def test_cassandra_prepared_write_read(cql, unique):
    host = f"smoke-{unique}.test"
    ins = "INSERT INTO url_state (host, url_fp, url, depth, status) VALUES (?, ?, ?, ?, ?)"
    sel = "SELECT url, depth, status FROM url_state WHERE host = ? AND url_fp = ?"
    cql.execute(ins, (host, -42, f"http://{host}/", 3, "queued"))
    row = cql.one(sel, (host, -42))
    assert (row.url, row.depth, row.status) == (f"http://{host}/", 3, "queued")
    assert cql.one(sel, (host, 43)) is None


def test_migrations_rerun_is_noop(cql, stack):
    assert apply_migrations(stack) == []
    recorded = {r.version: r.checksum for r in cql.execute("SELECT version, checksum FROM schema_migrations")}
    files = load_migrations()
    assert len(files) >= 8
    # Every migration of schemas/cql is applied, with the checksum of the file as it is now.
    assert {m.version: m.checksum for m in files}.items() <= recorded.items()


def test_topics_and_bucket_are_idempotent(stack, s3):
    assert ensure_topics(stack.kafka_bootstrap, stack.partitions) == []
    assert ensure_bucket(s3, stack.s3_bucket) is False


def test_s3_gzip_blob_keyed_by_content_hash(s3, stack, unique):
    store = S3BlobStore(s3, stack.s3_bucket)
    body = f"<html><body>smoke {unique}</body></html>".encode() * 50
    digest, key, new = store.put_page(body)
    assert digest == hashlib.sha256(body).hexdigest()
    assert key == page_key(digest) and new is True
    raw = store.get_bytes(key)
    assert raw is not None and raw[:2] == b"\x1f\x8b" and len(raw) < len(body)
    assert gzip.decompress(raw) == body
    assert store.get_page(key) == body
    # identical body: stored once
    assert store.put_page(body) == (digest, key, False)


def test_s3_missing_key(s3, stack, unique):
    store = S3BlobStore(s3, stack.s3_bucket)
    assert store.get_bytes(f"pages/zz/{unique}.gz") is None
    with pytest.raises(KeyError):
        store.get_page(f"pages/zz/{unique}.gz")


def test_s3_object_size_and_delete(s3, stack, unique):
    """What the WARC writer checks a stopped writer's pending file with, and drops an orphan index by."""
    store = S3BlobStore(s3, stack.s3_bucket)
    key = f"warc/p999/{unique}.cdxj"
    assert store.object_size(key) is None
    store.put_bytes(key, b"x" * 1234)
    assert store.object_size(key) == 1234
    store.delete(key)
    assert store.object_size(key) is None and store.get_bytes(key) is None
    store.delete(key)  # gone already: no error


def test_queue_finish_drops_the_row_and_marks_the_url_in_one_batch(crawl_cql, unique):
    import asyncio

    from streamcrawl_runtime.cassandra_state import CassandraCrawlState
    from streamcrawl_runtime.ports.state import QueuedUrl

    state = CassandraCrawlState(crawl_cql)
    host, fp, url = f"finish-{unique}.test", 7, f"http://finish-{unique}.test/"

    async def scenario() -> tuple[list[QueuedUrl], list[QueuedUrl], float | None]:
        await state.url_insert_discovered(host, fp, url, 0, 1_700_000_000.0, "ev")
        await state.queue_put(QueuedUrl(3, host, fp, url, 5, "discovery", 0.0, 0, 1_700_000_000.0))
        before = await state.queue_head(host, None, 10)
        await state.queue_finish(3, host, None, fp, 1_700_000_100.0)  # its priority unknown: any priority
        after = await state.queue_head(host, None, 10)
        row = await state.url_get(host, fp)
        return before, after, row.frontier_done_at if row else None

    before, after, done_at = asyncio.run(scenario())
    assert [q.url for q in before] == [url] and after == []
    assert done_at == 1_700_000_100.0


def test_discovered_urls_of_one_host_in_one_batch(crawl_cql, unique):
    import asyncio

    from streamcrawl_runtime.cassandra_state import CassandraCrawlState

    state = CassandraCrawlState(crawl_cql)
    host = f"many-{unique}.test"
    urls = [(i, f"http://{host}/{i}") for i in range(1, 4)]

    async def scenario() -> list[tuple[str, str | None, str | None]]:
        await state.url_insert_discovered_many(host, urls, 2, 1_700_000_000.0, "ev-many")
        rows = [await state.url_get(host, fp) for fp, _ in urls]
        return [(r.url, r.status, r.discovered_by) for r in rows if r is not None]

    assert asyncio.run(scenario()) == [(u, "queued", "ev-many") for _, u in urls]
