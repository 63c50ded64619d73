"""Settings of the control plane (STREAMCRAWL_CONTROL_*): where to listen, limits, and which backend.

Built once in `main.main()` and passed down; nothing else in the service reads the environment.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field
from streamcrawl_runtime.settings import ServiceSettings, service_config


class ControlSettings(ServiceSettings):
    """Control-plane settings. Defaults listen on loopback only. The API serves /metrics, /healthz and
    /readyz itself, on its listen port (so metrics_port is unused)."""

    SERVICE: ClassVar[str] = "control"
    model_config = service_config(SERVICE)

    listen_host: str = "127.0.0.1"
    listen_port: int = Field(default=8080, ge=1, le=65535)
    #: "engines": Kafka and Cassandra; "memory": in-memory adapters, for trying the API and the dashboard
    #: without the engines (nothing is crawled).
    backend: Literal["engines", "memory"] = "engines"
    #: How long POST /seeds waits for Kafka to acknowledge its records before answering 503.
    seed_flush_timeout_s: float = Field(default=15.0, gt=0)
    #: Timeout of each Kafka admin call made by GET /stats and GET /readyz.
    admin_timeout_s: float = Field(default=5.0, gt=0)
    #: Largest number of URLs one POST /seeds may carry.
    max_seeds_per_request: int = Field(default=10_000, ge=1)
    #: Consumer groups whose lag GET /stats reports: those whose id starts with this prefix.
    group_prefix: str = "streamcrawl-"
