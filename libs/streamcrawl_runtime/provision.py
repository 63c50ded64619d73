"""One-shot provisioning of the engines, for deployments: Kafka topics from the registry, the Cassandra
schema from schemas/cql, and the S3 bucket. Idempotent, so it can run on every install or upgrade.

    python -m streamcrawl_runtime.provision

Settings come from the STREAMCRAWL_* environment (StackSettings). Exits 1 with one JSON log line naming
the engine that failed. The local stack calls the same `provision()` after it starts the engines.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from pydantic import Field
from streamcrawl_schemas import migrations_dir

from streamcrawl_runtime.connect import minio_client
from streamcrawl_runtime.logs import setup_logging
from streamcrawl_runtime.provisioning import (
    ProvisionError,
    apply_migrations,
    ensure_bucket,
    ensure_partition_count,
    ensure_topics,
)
from streamcrawl_runtime.settings import StackSettings

log = logging.getLogger("streamcrawl.provision")


class ProvisionSettings(StackSettings):
    """Engine endpoints plus where the CQL migrations are: STREAMCRAWL_MIGRATIONS_DIR, else those shipped
    in the installed package, else schemas/cql of the source checkout (streamcrawl_schemas)."""

    migrations_dir: Path = Field(default_factory=migrations_dir)


def provision(settings: ProvisionSettings) -> dict[str, object]:
    """Create missing topics, apply pending migrations, create the bucket; returns what was done.
    Raises ProvisionError whose message starts with the failing engine's name ("kafka: ...")."""
    if not any(settings.migrations_dir.glob("*.cql")):
        raise ProvisionError(f"cassandra: no NNNN_name.cql migrations in {settings.migrations_dir}")
    step = "kafka"
    try:
        topics = ensure_topics(settings.kafka_bootstrap, settings.partitions,
                               replication_factor=settings.kafka_replication_factor,
                               min_insync_replicas=settings.kafka_min_insync_replicas)
        step = "cassandra"
        migrations = apply_migrations(settings, settings.migrations_dir)
        ensure_partition_count(settings)
        step = "s3"
        bucket_created = ensure_bucket(minio_client(settings), settings.s3_bucket)
    except ProvisionError:
        raise
    except Exception as exc:
        raise ProvisionError(f"{step}: {type(exc).__name__}: {str(exc)[:500]}") from exc
    return {"topics_created": topics, "migrations_applied": migrations, "bucket_created": bucket_created}


def main() -> int:
    setup_logging("provision")
    try:
        done = provision(ProvisionSettings())
    except ProvisionError as exc:
        log.error("provisioning failed", extra={"engine": str(exc).split(":", 1)[0], "error": str(exc)})
        return 1
    log.info("provisioned", extra=done)
    return 0


if __name__ == "__main__":
    sys.exit(main())
