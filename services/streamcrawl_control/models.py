"""The request and response models of the control plane's /v1 API (the OpenAPI schema is generated from
them). Requests forbid unknown fields: a misspelt field is a 422 naming it, never silently ignored."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: The most URLs one POST /v1/seeds may carry (more: 413).
MAX_SEEDS = 10_000


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Problem(BaseModel):
    """Every error response: what went wrong, in one sentence (and, for a 422, where)."""

    detail: str
    errors: list[dict[str, str]] = Field(default_factory=list)


# ------------------------------------------------------------------------------------------ seeds


class SeedRequest(_Request):
    urls: list[str] = Field(min_length=1, description=f"at most {MAX_SEEDS} URLs (more: 413)")
    priority: int = Field(default=0, ge=0, le=9, description="0 is the highest")
    source: str = Field(default="control", min_length=1, max_length=64)


class SeedOutcome(BaseModel):
    url: str = Field(description="the URL as sent (truncated to 300 characters)")
    status: Literal["accepted", "rejected"]
    #: accepted: "produced" (acknowledged by Kafka); rejected: invalid:<reason> | duplicate | blocklisted | kafka
    reason: str
    error: str | None = None
    normalized: str | None = None
    host: str | None = None
    partition: int | None = None


class SeedResponse(BaseModel):
    accepted: int
    rejected: int
    results: list[SeedOutcome]


# -------------------------------------------------------------------------------------- blocklist


class BlockEntryOut(BaseModel):
    pattern: str
    reason: str | None
    created_at: datetime | None


class BlocklistOut(BaseModel):
    patterns: list[BlockEntryOut]


class BlocklistPut(_Request):
    patterns: list[str] = Field(min_length=1, max_length=10_000)
    reason: str | None = Field(default=None, max_length=1000)


# -------------------------------------------------------------------------------------- overrides


class OverrideIn(_Request):
    """A per-host agreed rate. At least one of min_delay_s, delay_factor, page_budget is required."""

    min_delay_s: float | None = Field(default=None, ge=0.1, le=86_400)
    delay_factor: float | None = Field(default=None, ge=0, le=100)
    page_budget: int | None = Field(default=None, ge=0, le=1_000_000_000)
    note: str | None = Field(default=None, max_length=1000)

    @model_validator(mode="after")
    def _something_set(self) -> OverrideIn:
        if self.min_delay_s is None and self.delay_factor is None and self.page_budget is None:
            raise ValueError("set at least one of min_delay_s, delay_factor, page_budget")
        return self


class OverrideOut(BaseModel):
    host: str
    min_delay_s: float | None
    delay_factor: float | None
    page_budget: int | None
    note: str | None
    updated_at: datetime | None


# ---------------------------------------------------------------------------------- pause, resume


class PauseRequest(_Request):
    host: str | None = Field(default=None, max_length=300, description="a host; none: the whole crawl")
    reason: str | None = Field(default=None, max_length=1000)


class ResumeRequest(_Request):
    host: str | None = Field(default=None, max_length=300,
                             description="a host; none: lift the global pause (host pauses stay)")


class PauseEntry(BaseModel):
    scope: str = Field(description='"*" (the whole crawl) or a host')
    reason: str | None
    paused_at: datetime | None


class PausesOut(BaseModel):
    all: bool
    hosts: list[PauseEntry]
    entries: list[PauseEntry]
    applied_within_s: float = Field(description="owning frontiers apply a change within this many seconds")


# -------------------------------------------------------------------------------------- host view


class QueuedUrlOut(BaseModel):
    url: str
    priority: int
    kind: str
    not_before: datetime | None
    enqueued_at: datetime | None


class QueueOut(BaseModel):
    length: int
    first: list[QueuedUrlOut] = Field(description="the next URLs in the frontier's order (priority, arrival)")


class LeaseOut(BaseModel):
    url: str | None
    expires_at: datetime | None


class RobotsOut(BaseModel):
    status: int | None = Field(description="HTTP status of the last robots.txt fetch")
    fetched_at: datetime | None
    crawl_delay_s: float | None


class DnsOut(BaseModel):
    ip: str | None
    error: str | None
    expires_at: datetime | None


class OutcomeOut(BaseModel):
    at: datetime
    url: str
    outcome: str
    status: int | None
    fetch_ms: float | None


class HostView(BaseModel):
    host: str
    partition: int
    paused: bool
    blocked_by: str | None
    queue: QueueOut
    next_allowed_at: datetime | None
    lease: LeaseOut | None = Field(description="the fetch in flight, if any")
    backoff_level: int
    robots: RobotsOut
    dns: DnsOut
    last_fetch_ms: float | None
    last_fetch_end: datetime | None
    urls_this_cycle: int | None
    recent_outcomes: list[OutcomeOut] = Field(description="the last 10 outcomes, newest first")
    override: OverrideOut | None


# ------------------------------------------------------------------------------------------ stats


class Rates(BaseModel):
    m1: float | None = Field(description="per second over the last minute (None until two samples)")
    m5: float | None = Field(description="per second over the last five minutes")
    window_s: float = Field(description="seconds the 5-minute window covers so far")


class HostCount(BaseModel):
    host: str
    queued: int


class FrontierOut(BaseModel):
    queued: int
    in_flight: int
    hosts: int
    partitions_reporting: int
    paused_all: bool
    paused_hosts: int


class CrawlStats(BaseModel):
    at: datetime
    pages_per_s: Rates = Field(description='fetch results with outcome "fetched"')
    results_per_s: Rates = Field(description="every fetch result")
    bytes_per_s: Rates = Field(description="body bytes downloaded")
    pages_fetched: int
    pages_published: int = Field(description="records on page_fetched")
    bytes_fetched: int
    outcomes: dict[str, int] = Field(description="fetch results by outcome, since the fetchers started")
    errors: dict[str, int] = Field(description="failed outcomes, by class")
    fetch_seconds_p50: float | None
    fetch_seconds_p99: float | None
    dns_lookups: int
    dns_cache_hit_rate: float | None
    seen_set_size: int
    seen_set_fp_rate: float | None
    duplicates: int
    traps_stopped: int
    frontier: FrontierOut
    top_hosts: list[HostCount]
    recrawl_backlog: int
    lag: dict[str, int] = Field(description="consumer-group lag per service (records)")
    dead_letters: int
    metrics_targets: dict[str, str] = Field(description='per scraped /metrics: "ok" or why not')
    engine_errors: dict[str, str]
