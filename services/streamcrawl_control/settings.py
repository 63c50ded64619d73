"""Settings of the control plane: the engine endpoints (StackSettings) plus where to listen.

Built once in `main.main()` and passed down; nothing else in the service reads the environment.
Every field comes from an env var with the STREAMCRAWL_ prefix, e.g. STREAMCRAWL_LISTEN_PORT=8088.
"""

from __future__ import annotations

from pydantic import Field
from streamcrawl_runtime.settings import StackSettings


class ControlSettings(StackSettings):
    """Control-plane settings. Defaults listen on loopback only."""

    listen_host: str = "127.0.0.1"
    listen_port: int = Field(default=8088, ge=1, le=65535)
    log_level: str = "INFO"
    #: How long POST /seeds waits for Kafka to acknowledge its records before answering 503.
    seed_flush_timeout_s: float = Field(default=15.0, gt=0)
    #: Timeout of each Kafka admin call made by GET /stats and GET /healthz.
    admin_timeout_s: float = Field(default=5.0, gt=0)
    #: Largest number of URLs one POST /seeds may carry.
    max_seeds_per_request: int = Field(default=10_000, ge=1)
    #: Consumer groups whose lag GET /stats reports: those whose id starts with this prefix.
    group_prefix: str = "streamcrawl-"
