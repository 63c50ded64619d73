"""Integration fixtures: the real Kafka, Cassandra and S3 store started by `make stack-up`.

If the stack is not up these tests fail (they are not skipped): CI must prove them on real engines.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from minio import Minio
from streamcrawl_runtime.acsylla_session import AcsyllaSession, BlockingSession
from streamcrawl_runtime.connect import blocking_cql_session, crawl_cql_session, minio_client
from streamcrawl_runtime.settings import StackSettings


@pytest.fixture(scope="session")
def stack() -> StackSettings:
    return StackSettings()


@pytest.fixture(scope="session")
def cql(stack: StackSettings) -> Iterator[BlockingSession]:
    """A blocking CQL session on the crawl keyspace, for test setup and checks (the product's own client)."""
    session = blocking_cql_session(stack)
    yield session
    session.close()


@pytest.fixture
def crawl_cql(stack: StackSettings) -> AcsyllaSession:
    """The services' CQL session (acsylla). It opens on first use in the test's event loop, so each test
    gets its own (a driver session is bound to one loop)."""
    return crawl_cql_session(stack)


@pytest.fixture(scope="session")
def s3(stack: StackSettings) -> Minio:
    return minio_client(stack)


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:10]
