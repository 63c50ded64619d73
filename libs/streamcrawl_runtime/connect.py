"""Connection factories for the three engines, built from StackSettings, and their readiness probes.
Nothing else in the project constructs a Cassandra session or a minio client, so timeouts and policies
are set in one place. Every Cassandra user (services, control plane, migrations, tools) goes through
acsylla (streamcrawl_runtime.acsylla_session): one client library for the product."""

from __future__ import annotations

import asyncio

from minio import Minio

from streamcrawl_runtime.acsylla_session import AcsyllaSession, BlockingSession
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.health import Check
from streamcrawl_runtime.ports.cql import CqlSession
from streamcrawl_runtime.s3_async import AsyncS3Put
from streamcrawl_runtime.s3_blobs import S3BlobStore
from streamcrawl_runtime.settings import StackSettings


def crawl_cql_session(settings: StackSettings, keyspace: str | None = None,
                      request_timeout_s: float = 20.0) -> AcsyllaSession:
    """An asyncio CQL session on the crawl keyspace (``keyspace=""``: none); it connects on first use."""
    return AcsyllaSession(settings.cassandra_host_list, settings.cassandra_port,
                          settings.cassandra_keyspace if keyspace is None else keyspace,
                          connect_timeout_s=5.0, request_timeout_s=request_timeout_s,
                          consistency=settings.consistency(),
                          reconnect_max_s=settings.cassandra_reconnect_max_s)


def blocking_cql_session(settings: StackSettings, keyspace: str | None = None,
                         request_timeout_s: float = 60.0) -> BlockingSession:
    """The same session for blocking callers (provisioning, the launcher, tests): call ``close()``."""
    return BlockingSession(crawl_cql_session(settings, keyspace, request_timeout_s))


def crawl_state(settings: StackSettings) -> CassandraCrawlState:
    return CassandraCrawlState(crawl_cql_session(settings), settings.partitions)


def minio_client(settings: StackSettings) -> Minio:
    return Minio(
        settings.s3_endpoint,
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key,
        secure=settings.s3_secure,
        region=settings.s3_region,
    )


def blob_store(settings: StackSettings) -> S3BlobStore:
    """The page store. Pages stored from the event loop (`astore_page`) go through AsyncS3Put, path-style,
    except on AWS endpoints, where minio picks the URL style and they keep going through it."""
    aws = settings.s3_endpoint.split(":", 1)[0].endswith("amazonaws.com")
    aput = None if aws else AsyncS3Put(settings.s3_endpoint, settings.s3_access_key, settings.s3_secret_key,
                                       settings.s3_region, settings.s3_secure)
    return S3BlobStore(minio_client(settings), settings.s3_bucket, aput=aput)


def cassandra_check(session: CqlSession) -> Check:
    """A readiness probe: the cluster answers a read of the local node's row."""
    async def check() -> None:
        await session.execute("SELECT release_version FROM system.local", ())
    return check


def s3_check(client: Minio, bucket: str) -> Check:
    """A readiness probe: the store answers and the bucket exists."""
    async def check() -> None:
        if not await asyncio.to_thread(client.bucket_exists, bucket):
            raise RuntimeError(f"bucket {bucket} does not exist")
    return check
