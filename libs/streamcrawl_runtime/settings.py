"""Connection settings shared by every service: where Kafka, Cassandra and the S3 store are.

Each service defines one pydantic-settings class that extends `StackSettings`, builds it once in its
entrypoint, and passes it down. Nothing below the entrypoint reads the environment.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class StackSettings(BaseSettings):
    """Engine endpoints. Defaults match the local stack started by `make stack-up` (loopback only)."""

    model_config = SettingsConfigDict(env_prefix="STREAMCRAWL_", extra="ignore")

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

    @property
    def cassandra_host_list(self) -> list[str]:
        return [h.strip() for h in self.cassandra_hosts.split(",") if h.strip()]
