"""Idempotent provisioning of the engines: Kafka topics from the registry, the Cassandra schema from the
ordered CQL migrations in schemas/cql, and the S3 bucket. Safe to run on every start."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from minio import Minio
from streamcrawl_contracts.topics import ALL_TOPICS, TopicSpec

#: schemas/cql, found relative to this file in a source checkout (the repo layout is libs/ + schemas/).
DEFAULT_MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "schemas" / "cql"

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.cql$")


class ProvisionError(RuntimeError):
    """Provisioning failed; the message names the engine and what went wrong."""


def ensure_topics(bootstrap: str, specs: tuple[TopicSpec, ...] = ALL_TOPICS, timeout_s: float = 30.0) -> list[str]:
    """Create every missing topic; returns the names created. Existing topics with a different
    partition count are an error (re-homing hosts silently would break politeness ownership)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(timeout=timeout_s)
    existing = meta.topics
    for spec in specs:
        if spec.name in existing and len(existing[spec.name].partitions) != spec.partitions:
            raise ProvisionError(
                f"kafka: topic {spec.name} has {len(existing[spec.name].partitions)} partitions, "
                f"the registry says {spec.partitions}"
            )
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, num_partitions=s.partitions, replication_factor=1, config=s.config()) for s in missing],
        operation_timeout=timeout_s,
    )
    created: list[str] = []
    for name, fut in futures.items():
        try:
            fut.result(timeout=timeout_s)
            created.append(name)
        except KafkaException as exc:  # a concurrent creator won the race: fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise ProvisionError(f"kafka: could not create topic {name}: {exc}") from exc
    return created


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]
    checksum: str


def load_migrations(directory: Path = DEFAULT_MIGRATIONS_DIR) -> list[Migration]:
    """Read NNNN_name.cql files in version order; statements are split on ';' at line ends."""
    out: list[Migration] = []
    for path in sorted(directory.glob("*.cql")):
        m = _MIGRATION_NAME.match(path.name)
        if not m:
            raise ProvisionError(f"cassandra: migration file name {path.name!r} is not NNNN_name.cql")
        text = path.read_text(encoding="utf-8")
        body = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
        statements = tuple(s.strip() for s in body.split(";") if s.strip())
        out.append(Migration(int(m.group(1)), path.name, statements, hashlib.sha256(text.encode()).hexdigest()))
    versions = [m.version for m in out]
    if len(set(versions)) != len(versions):
        raise ProvisionError("cassandra: two migrations share a version number")
    return out


def apply_migrations(session: Any, keyspace: str, replication: str,
                     directory: Path = DEFAULT_MIGRATIONS_DIR) -> list[str]:
    """Create the keyspace and apply each migration not yet recorded in schema_migrations.
    Re-running is a no-op; an applied migration whose file changed is an error."""
    session.execute(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {replication}")
    session.set_keyspace(keyspace)
    session.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version int PRIMARY KEY, name text, checksum text, applied_at timestamp)"
    )
    applied = {row.version: row.checksum for row in session.execute("SELECT version, checksum FROM schema_migrations")}
    done: list[str] = []
    for mig in load_migrations(directory):
        if mig.version in applied:
            if applied[mig.version] != mig.checksum:
                raise ProvisionError(
                    f"cassandra: migration {mig.name} was changed after it was applied; add a new migration"
                )
            continue
        for stmt in mig.statements:
            session.execute(stmt, timeout=60)
        session.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (%s, %s, %s, %s)",
            (mig.version, mig.name, mig.checksum, int(time.time() * 1000)),
        )
        done.append(mig.name)
    return done


def ensure_bucket(client: Minio, bucket: str) -> bool:
    """Create the bucket if missing; returns True if it was created."""
    if client.bucket_exists(bucket):
        return False
    client.make_bucket(bucket)
    return True


CRAWL_TABLES = ("url_state", "host_state", "frontier_queue", "due_index", "content_index", "simhash_blocks")


def reset_crawl(bootstrap: str, session: Any, client: Minio, bucket: str, timeout_s: float = 60.0) -> None:
    """Start a crawl from nothing: recreate every topic, drop the streamcrawl-* consumer groups, truncate the
    crawl tables and remove the Bloom snapshots. Used by `make run` (bundled web) and the e2e tests, never
    by the services. The control-plane tables (blocklist, host_overrides) are kept."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    # A member of a process that was just killed stays in its group until the session times out
    # (10 s in the run loop), so a non-empty group is retried for a while before it is an error.
    deadline = time.time() + 45
    while True:
        groups = [g.group_id for g in admin.list_consumer_groups().result(timeout_s).valid
                  if g.group_id.startswith("streamcrawl-")]
        busy: list[str] = []
        for group, fut in (admin.delete_consumer_groups(groups, request_timeout=timeout_s).items() if groups else ()):
            try:
                fut.result(timeout_s)
            except KafkaException as exc:
                if "NON_EMPTY_GROUP" not in str(exc) and "GROUP_ID_NOT_FOUND" not in str(exc):
                    raise ProvisionError(f"kafka: cannot delete consumer group {group}: {exc}") from exc
                if "NON_EMPTY_GROUP" in str(exc):
                    busy.append(group)
        if not busy:
            break
        if time.time() > deadline:
            raise ProvisionError(f"kafka: consumer groups still have members (services still running?): {busy}")
        time.sleep(1.0)
    names = [t.name for t in ALL_TOPICS]
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    doomed = [n for n in names if n in existing]
    if doomed:
        for fut in admin.delete_topics(doomed, operation_timeout=timeout_s).values():
            fut.result(timeout_s)
        deadline = time.time() + timeout_s
        while time.time() < deadline and set(doomed) & set(admin.list_topics(timeout=timeout_s).topics):
            time.sleep(0.2)
    for attempt in range(50):  # the broker may still be finishing the deletes
        try:
            ensure_topics(bootstrap)
            break
        except (ProvisionError, KafkaException):
            if attempt == 49:
                raise
            time.sleep(0.3)
    for table in CRAWL_TABLES:
        session.execute(f"TRUNCATE {table}", timeout=120)
    for obj in client.list_objects(bucket, prefix="bloom/", recursive=True):
        if obj.object_name:
            client.remove_object(bucket, obj.object_name)
