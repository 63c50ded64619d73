"""Settings shared by the services, and the base every service's settings class extends.

- `StackSettings` (prefix ``STREAMCRAWL_``): where Kafka, Cassandra and the S3 store are, and the
  partition count of the host-keyed topics (``STREAMCRAWL_PARTITIONS``). One set for the whole
  deployment, so every service reads the same variables.
- `PolitenessSettings` (prefix ``STREAMCRAWL_``): the politeness rule, delay = max(min_delay_s,
  delay_factor × the last fetch time, Crawl-delay capped at crawl_delay_cap_s). The frontier enforces it
  and the fetcher spaces robots.txt redirect hops by it; one class, so the two cannot disagree.
- `ServiceSettings`: the base of each service's own class, whose variables carry the service's name,
  ``STREAMCRAWL_<SERVICE>_...`` (e.g. ``STREAMCRAWL_FETCHER_MAX_IN_FLIGHT``), so one environment can
  configure every service without clashes. It holds the stack and politeness settings too.

Each service builds its settings once in its entrypoint (`streamcrawl_runtime.service.run_service`) and
passes them down. Nothing below the entrypoint reads the environment.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_core.politeness import PolitenessConfig

from streamcrawl_runtime.consistency import ConsistencyPolicy, Level, SerialLevel

SHARED_PREFIX = "STREAMCRAWL_"


class StackSettings(BaseSettings):
    """Engine endpoints. Defaults match the local stack started by `make stack-up` (loopback only)."""

    model_config = SettingsConfigDict(env_prefix=SHARED_PREFIX, extra="ignore")

    kafka_bootstrap: str = "127.0.0.1:19092"
    cassandra_hosts: str = "127.0.0.1"
    cassandra_port: int = 19042
    cassandra_keyspace: str = "streamcrawl"
    cassandra_replication: str = "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    s3_endpoint: str = "127.0.0.1:19000"
    s3_access_key: str = "streamcrawl"
    s3_secret_key: str = "streamcrawl-secret"
    s3_secure: bool = False
    s3_region: str = "us-east-1"
    s3_bucket: str = "streamcrawl-pages"
    #: Partitions of every host-keyed topic: the most instances of one service that can share the work. Fixed
    #: for the life of a crawl (README, "Choosing the partition count"); services refuse other counts.
    partitions: int = Field(default=DEFAULT_PARTITIONS, ge=1, le=10_000)
    #: Replicas of every topic, and the in-sync replicas a write needs (producers use acks=all): 1 and 1 on the
    #: local stack; 3 and 2 on a cluster (the chart's), so one broker can be down without losing a write.
    #: "consumer": Kafka 4's consumer group protocol (KIP-848): incremental rebalances with the broker's range
    #: assignor; "classic" for brokers before 4.0 (eager rebalances: every scale step stops the group).
    kafka_group_protocol: Literal["consumer", "classic"] = "consumer"
    #: How long a producer gathers records into one batch before it sends them (librdkafka's linger.ms). The
    #: loop flushes only every commit interval (0.5 s), so this adds no wait to a commit; what it saves is
    #: broker requests: every produce batch also answers the consumers' waiting fetches, and on a
    #: politeness-bound crawl that per-request cost is most of Kafka's CPU (20 against 5 ms: Kafka's CPU per
    #: page 0.84x and 0.88x in two A/B pairs, time to coverage unchanged; docs/benchmarks-crawl-polite.md).
    kafka_linger_ms: int = Field(default=20, ge=0, le=1000)
    kafka_replication_factor: int = Field(default=1, ge=1)
    kafka_min_insync_replicas: int = Field(default=1, ge=1)
    #: Consistency level of each statement class (streamcrawl_runtime.consistency has the table): leases and
    #: fencing marks, content claims, crawl state, control-plane tables, statistics; and the serial level of
    #: lightweight transactions.
    cassandra_consistency_leases: Level = "QUORUM"
    cassandra_consistency_claims: Level = "QUORUM"
    cassandra_consistency_state: Level = "QUORUM"
    cassandra_consistency_control: Level = "QUORUM"
    cassandra_consistency_stats: Level = "ONE"
    cassandra_serial_consistency: SerialLevel = "SERIAL"
    #: The longest wait between two reconnection attempts to a Cassandra node that went away (the driver's
    #: exponential backoff starts at 2 s and would grow to 60 s: after a 14 s restart its next attempt came
    #: up to 16 s after the node was back, so the service stayed not ready that long).
    cassandra_reconnect_max_s: float = Field(default=4.0, ge=0.5, le=60.0)

    def consistency(self) -> ConsistencyPolicy:
        return ConsistencyPolicy(self.cassandra_consistency_leases, self.cassandra_consistency_claims,
                                 self.cassandra_consistency_state, self.cassandra_consistency_control,
                                 self.cassandra_consistency_stats, self.cassandra_serial_consistency)

    @property
    def cassandra_host_list(self) -> list[str]:
        return [h.strip() for h in self.cassandra_hosts.split(",") if h.strip()]


class PolitenessSettings(BaseSettings):
    """The politeness rule, for every service that applies it."""

    model_config = SettingsConfigDict(env_prefix=SHARED_PREFIX, extra="ignore")

    min_delay_s: float = Field(default=1.0, ge=0)
    delay_factor: float = Field(default=10.0, ge=0)
    #: A robots.txt Crawl-delay above this is capped (a hostile or mistaken value must not stall a host).
    crawl_delay_cap_s: float = Field(default=30.0, ge=0)
    #: Back-off after consecutive 429/5xx answers or network errors: base × 2^(level-1), at most the cap.
    backoff_base_s: float = Field(default=5.0, gt=0)
    backoff_cap_s: float = Field(default=3600.0, gt=0)

    def config(self) -> PolitenessConfig:
        return PolitenessConfig(min_delay_s=self.min_delay_s, delay_factor=self.delay_factor,
                                crawl_delay_cap_s=self.crawl_delay_cap_s, backoff_base_s=self.backoff_base_s,
                                backoff_cap_s=self.backoff_cap_s)


class ServiceSettings(BaseSettings):
    """Fields every service has. A subclass sets ``SERVICE`` and its ``model_config`` prefix
    ``STREAMCRAWL_<SERVICE>_`` (see `service_config`)."""

    SERVICE: ClassVar[str] = ""
    DEFAULT_METRICS_PORT: ClassVar[int] = 0

    model_config = SettingsConfigDict(env_prefix=SHARED_PREFIX, extra="ignore")

    group_id: str = ""  # "" → streamcrawl-<service>
    log_level: str = "INFO"
    #: The port of /metrics, /healthz and /readyz (0 = none). Defaults: frontier 9101, fetcher 9102,
    #: parser 9103, dedup 9104, recrawl 9105, warc 9106.
    metrics_port: int = Field(default=-1, ge=-1, le=65535)  # -1 → the service's default
    #: 127.0.0.1 on a laptop; 0.0.0.0 in a container, so that Prometheus and the kubelet reach it.
    metrics_bind: str = "127.0.0.1"
    stack: StackSettings = Field(default_factory=StackSettings)
    politeness: PolitenessSettings = Field(default_factory=PolitenessSettings)

    def model_post_init(self, context: Any) -> None:
        if not self.group_id:
            self.group_id = f"streamcrawl-{self.SERVICE}"
        if self.metrics_port < 0:
            self.metrics_port = self.DEFAULT_METRICS_PORT


def service_config(service: str) -> SettingsConfigDict:
    """The pydantic-settings config of a service's class: its variables are STREAMCRAWL_<SERVICE>_*."""
    return SettingsConfigDict(env_prefix=f"{SHARED_PREFIX}{service.upper()}_", extra="ignore")


_SECRET_WORDS = ("secret", "token", "access_key", "password")


def env_rows(cls: type[BaseSettings]) -> list[tuple[str, str]]:
    """(environment variable, default) of every field of a settings class and of the settings it nests,
    for ``--help``. A secret's default is never shown."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    rows: list[tuple[str, str]] = []
    for name, info in cls.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseSettings):
            rows.extend(env_rows(ann))
            continue
        if info.default_factory is not None:
            default = "(computed)"
        elif any(w in name.lower() for w in _SECRET_WORDS):
            default = "(set; not shown)" if info.default else "(empty)"
        else:
            default = repr(info.default)
        rows.append((f"{prefix}{name}".upper(), default))
    return rows


def help_epilog(cls: type[BaseSettings]) -> str:
    """The ``--help`` text listing a service's environment variables."""
    rows = sorted(set(env_rows(cls)))
    width = max(len(env) for env, _ in rows)
    return "settings (environment variables):\n" + "\n".join(f"  {env:<{width}}  default {d}" for env, d in rows)
