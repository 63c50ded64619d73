"""Start a crawl from nothing on the local stack (a dev tool: `make run`, the e2e tests, the crawl
benchmarks; never the services): recreate every topic, drop the consumer groups, truncate the crawl
tables and remove the Bloom snapshots."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]
from minio import Minio
from streamcrawl_contracts.topics import ALL_TOPICS
from streamcrawl_runtime.acsylla_session import BlockingSession
from streamcrawl_runtime.provisioning import ProvisionError, ensure_topics

CRAWL_TABLES = ("url_state", "host_state", "frontier_host_queue", "frontier_hosts", "due_index", "due_by_part",
                "content_index", "simhash_index", "crawl_settings")


def reset_crawl(bootstrap: str, session: BlockingSession, client: Minio, bucket: str, partitions: int,
                timeout_s: float = 60.0, replication_factor: int = 1, min_insync_replicas: int = 1) -> None:
    """Start a crawl from nothing: recreate every topic, drop the streamcrawl-* consumer groups, truncate the
    crawl tables and remove the Bloom snapshots. Used by `make run` (bundled web) and the e2e tests, never
    by the services. The control-plane tables (blocklist, host_overrides) are kept. The topics are created
    as provisioning creates them: ``replication_factor`` replicas, ``min_insync_replicas`` (the settings'
    ``kafka_replication_factor`` and ``kafka_min_insync_replicas``: 3 and 2 on the 3-node profile)."""
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
            ensure_topics(bootstrap, partitions, replication_factor=replication_factor,
                          min_insync_replicas=min_insync_replicas)
            break
        except (ProvisionError, KafkaException):
            if attempt == 49:
                raise
            time.sleep(0.3)
    for table in CRAWL_TABLES:
        session.execute(f"TRUNCATE {table}")
    session.execute("INSERT INTO crawl_settings (name, value, set_at) VALUES ('partitions', ?, ?)",
                    (str(partitions), datetime.now(UTC)))
    # The Bloom snapshots and the WARC files with their indexes and checkpoints (their offsets name
    # records of the topics deleted above).
    for prefix in ("bloom/", "warc/"):
        for obj in client.list_objects(bucket, prefix=prefix, recursive=True):
            if obj.object_name:
                client.remove_object(bucket, obj.object_name)
