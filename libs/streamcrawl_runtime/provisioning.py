"""Idempotent provisioning of the engines: Kafka topics from the registry, the Cassandra schema from the
ordered CQL migrations in schemas/cql (through acsylla, like every Cassandra user of the product), and
the S3 bucket. Safe to run on every start."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from minio import Minio
from streamcrawl_contracts.topics import ALL_TOPICS, TopicSpec
from streamcrawl_schemas import migrations_dir

from streamcrawl_runtime.acsylla_session import BlockingSession
from streamcrawl_runtime.connect import blocking_cql_session
from streamcrawl_runtime.kafka_topics import TopicMismatch, check_counts, partition_counts
from streamcrawl_runtime.settings import StackSettings

_MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.cql$")


class ProvisionError(RuntimeError):
    """Provisioning failed; the message names the engine and what went wrong."""


def ensure_topics(bootstrap: str, partitions: int, specs: tuple[TopicSpec, ...] = ALL_TOPICS,
                  timeout_s: float = 30.0, replication_factor: int = 1, min_insync_replicas: int = 1) -> list[str]:
    """Create every missing topic (host-keyed ones with ``partitions``); returns the names created.
    Existing topics with a different partition count are an error: re-homing hosts silently would break
    politeness ownership, so the count of a live crawl is never changed here."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = partition_counts(admin, timeout_s)
    try:
        check_counts(existing, partitions, specs, require=False)
    except TopicMismatch as exc:
        raise ProvisionError(str(exc)) from exc
    missing = [s for s in specs if s.name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.name, num_partitions=s.partitions(partitions), replication_factor=replication_factor,
                  config={**s.config(), "min.insync.replicas": str(min_insync_replicas)}) for s in missing],
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
    wait_visible(admin, [s.name for s in missing], timeout_s)
    return created


def wait_visible(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    """Wait until every broker of the cluster lists the topics ``names`` with a leader for each partition.
    A create returns once the controller has the topic; the brokers learn it a moment later, and a service
    started in that moment (a crawl reset on a 3-broker cluster, then the services) finds a topic missing
    and stops."""
    import time

    deadline = time.monotonic() + timeout_s
    brokers = [f"{b.host}:{b.port}" for b in admin.list_topics(timeout=timeout_s).brokers.values()]
    pending = set(brokers)
    while pending:
        for broker in sorted(pending):
            meta = AdminClient({"bootstrap.servers": broker, "log_level": 0}).list_topics(timeout=timeout_s)
            if (meta.orig_broker_name or "").split("/")[0] != broker:  # answered by another broker: ask again
                continue
            if all(n in meta.topics and meta.topics[n].error is None
                   and all(p.leader >= 0 for p in meta.topics[n].partitions.values()) for n in names):
                pending.discard(broker)
        if pending and time.monotonic() > deadline:
            raise ProvisionError(f"kafka: topics not visible on {sorted(pending)} after {timeout_s:.0f}s")
        if pending:
            time.sleep(0.2)


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]
    checksum: str


def load_migrations(directory: Path | None = None) -> list[Migration]:
    """Read NNNN_name.cql files (of the installed package or the checkout, by default) in version order;
    statements are split on ';' at line ends."""
    directory = directory or migrations_dir()
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


def apply_migrations(settings: StackSettings, directory: Path | None = None) -> list[str]:
    """Create the keyspace and apply each migration not yet recorded in schema_migrations.
    Re-running is a no-op; an applied migration whose file changed is an error."""
    keyspace = settings.cassandra_keyspace
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,47}", keyspace):
        raise ProvisionError(f"cassandra: keyspace name {keyspace!r} is not a valid CQL identifier")
    admin = blocking_cql_session(settings, keyspace="")
    try:
        admin.execute(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = {settings.cassandra_replication}")
    finally:
        admin.close()
    session = blocking_cql_session(settings)
    try:
        return _apply(session, directory)
    finally:
        session.close()


def _apply(session: BlockingSession, directory: Path | None) -> list[str]:
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
            session.execute(stmt)
        session.execute(
            "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
            (mig.version, mig.name, mig.checksum, datetime.now(UTC)),
        )
        done.append(mig.name)
    return done


def ensure_partition_count(settings: StackSettings) -> bool:
    """Record the deployment's partition count in crawl_settings on the first install (a lightweight
    transaction, so two provisioning runs agree); a later run with another count is refused. Returns True
    if it was recorded now. The Kafka check alone would miss a crawl whose topics were recreated with a
    new count while its Cassandra state (keyed by partition) was kept."""
    session = blocking_cql_session(settings)
    try:
        rows = session.execute("INSERT INTO crawl_settings (name, value, set_at) VALUES ('partitions', ?, ?)"
                               " IF NOT EXISTS", (str(settings.partitions), datetime.now(UTC)))
        if rows and rows[0].applied:
            return True
        recorded = session.execute("SELECT value FROM crawl_settings WHERE name = 'partitions'")[0].value
    finally:
        session.close()
    if str(recorded) != str(settings.partitions):
        raise ProvisionError(f"cassandra: this crawl's state was built with {recorded} partitions but "
                             f"STREAMCRAWL_PARTITIONS is {settings.partitions}: the count of a live crawl cannot "
                             f"change; set STREAMCRAWL_PARTITIONS={recorded}, or reset the crawl "
                             f"(README 'Choosing the partition count')")
    return False


def ensure_bucket(client: Minio, bucket: str) -> bool:
    """Create the bucket if missing; returns True if it was created."""
    if client.bucket_exists(bucket):
        return False
    client.make_bucket(bucket)
    return True
