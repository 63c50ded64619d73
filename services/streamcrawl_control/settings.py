"""Settings of the control plane (STREAMCRAWL_CONTROL_*): where to listen, limits, and which backend.

Built once in `main.main()` and passed down; nothing else in the service reads the environment.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, SecretStr
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
    #: Largest number of URLs one POST /v1/seeds may carry (more: 413).
    max_seeds_per_request: int = Field(default=10_000, ge=1)
    #: The bearer token of every mutating call (and of reads unless open_reads). Never logged.
    api_token: SecretStr | None = None
    #: A file holding the token (first line), e.g. a mounted Secret; takes precedence over api_token.
    api_token_file: Path | None = None
    #: GET endpoints (stats, host view, blocklist, pauses) need no token.
    open_reads: bool = False
    #: The services' /metrics URLs, comma-separated (GET /v1/stats sums them). Default: the local ports.
    #: A `dns+http://NAME:PORT/metrics` target scrapes every address NAME resolves to, at each sample
    #: (on Kubernetes: a headless Service, i.e. every ready replica; the chart sets these).
    metrics_targets: str = ",".join(f"http://127.0.0.1:{p}/metrics" for p in range(9101, 9106))
    #: How often the metrics are sampled for the 1- and 5-minute rates.
    sample_every_s: float = Field(default=5.0, gt=0)
    #: Consumer groups whose lag GET /stats reports: those whose id starts with this prefix.
    group_prefix: str = "streamcrawl-"
