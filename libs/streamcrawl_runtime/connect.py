"""Connection factories for the three engines, built from StackSettings. Nothing else in the project
constructs a Cassandra cluster or a minio client, so timeouts and policies are set in one place."""

from __future__ import annotations

import functools
import logging
from collections import namedtuple
from typing import Any

from cassandra.cluster import Cluster, Session
from cassandra.policies import RoundRobinPolicy
from cassandra.query import _clean_column_name  # the driver's own rule for "[applied]" → "applied"
from minio import Minio

from streamcrawl_runtime.cql import AcsyllaSession
from streamcrawl_runtime.settings import StackSettings

# The driver logs a warning per connection attempt while a node starts; readiness probes retry anyway.
logging.getLogger("cassandra").setLevel(logging.ERROR)


@functools.lru_cache(maxsize=512)
def _row_class(colnames: tuple[str, ...]) -> Any:
    return namedtuple("Row", [_clean_column_name(c) for c in colnames])  # type: ignore[misc]


def cached_named_tuple_factory(colnames: list[str], rows: list[Any]) -> list[Any]:
    """The driver's named_tuple_factory builds a new namedtuple class for every result set (~180 µs
    measured here, on every statement, writes included); the column lists of prepared statements repeat,
    so the class is built once per column list."""
    row = _row_class(tuple(colnames))
    return [row(*r) for r in rows]


def cassandra_session(settings: StackSettings, keyspace: str | None = None, connect_timeout: float = 5.0) -> Session:
    """A session on the configured cluster. The caller owns it (call `.cluster.shutdown()`)."""
    cluster = Cluster(
        contact_points=settings.cassandra_host_list,
        port=settings.cassandra_port,
        load_balancing_policy=RoundRobinPolicy(),
        # v4, not v5: v5 frames every message in CRC-checked segments computed in pure Python
        # (py-spy: a visible share of the dedup service's CPU); loopback and a LAN need no extra CRC.
        protocol_version=4,
        connect_timeout=connect_timeout,
        control_connection_timeout=connect_timeout,
    )
    session = cluster.connect(keyspace)
    session.default_timeout = 20.0
    session.row_factory = cached_named_tuple_factory
    return session


def crawl_cql_session(settings: StackSettings, keyspace: str | None = None) -> AcsyllaSession:
    """The services' hot-path CQL session (acsylla, see streamcrawl_runtime.cql); it connects on first use."""
    return AcsyllaSession(settings.cassandra_host_list, settings.cassandra_port,
                          keyspace or settings.cassandra_keyspace, connect_timeout_s=5.0, request_timeout_s=20.0)


def minio_client(settings: StackSettings) -> Minio:
    return Minio(
        settings.s3_endpoint,
        access_key=settings.s3_access_key,
        secret_key=settings.s3_secret_key,
        secure=settings.s3_secure,
        region=settings.s3_region,
    )


def kafka_common(settings: StackSettings) -> dict[str, Any]:
    return {"bootstrap.servers": settings.kafka_bootstrap}
