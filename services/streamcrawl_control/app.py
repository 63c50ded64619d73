"""The control plane's HTTP API (FastAPI): seeds, blocklist, host overrides, host state, stats, health
and Prometheus metrics. `create_app` takes the ports, so tests pass in-memory adapters.

Endpoints are plain `def`s: the ports block (Kafka flush, Cassandra queries) and FastAPI runs them in
its thread pool. Metric labels are route templates and outcomes, never a URL or a host.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.concurrency import run_in_threadpool
from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import ALL_TOPICS, SEEDS
from streamcrawl_core.blocklist import Blocklist, InvalidHost, canonical_host, canonical_pattern
from streamcrawl_core.identity import host_identity
from streamcrawl_core.partition import partition_for
from streamcrawl_core.politeness import HostOverride
from streamcrawl_core.urls import UrlError
from streamcrawl_runtime.ports.control import BlockEntry, ControlStore, PortError, SeedSink, StatsSource

log = logging.getLogger("streamcrawl.control")

_ECHO_MAX = 300  # a rejected URL is echoed back truncated to this many characters


# ------------------------------------------------------------------------------------------- models


class SeedRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    urls: list[str] = Field(min_length=1)
    priority: int = Field(default=0, ge=0, le=9)
    source: str = Field(default="control", min_length=1, max_length=64)


class AcceptedSeed(BaseModel):
    url: str
    normalized: str
    host: str
    partition: int


class RejectedSeed(BaseModel):
    url: str
    reason: str  # invalid:<UrlError reason> | blocklisted | duplicate
    error: str


class SeedResponse(BaseModel):
    accepted: list[AcceptedSeed]
    rejected: list[RejectedSeed]


class BlockEntryOut(BaseModel):
    pattern: str
    reason: str | None
    created_at: datetime | None


class BlocklistOut(BaseModel):
    patterns: list[BlockEntryOut]


class BlocklistPut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    patterns: list[str] = Field(min_length=1, max_length=10_000)
    reason: str | None = Field(default=None, max_length=1000)


class OverrideIn(BaseModel):
    """A per-host agreed rate. At least one of min_delay_s, delay_factor, page_budget is required."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
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


def _blocklist_out(entries: Sequence[BlockEntry]) -> BlocklistOut:
    return BlocklistOut(patterns=[BlockEntryOut(pattern=e.pattern, reason=e.reason, created_at=e.created_at)
                                  for e in entries])


def _override_out(host: str, o: HostOverride) -> OverrideOut:
    return OverrideOut(host=host, min_delay_s=o.min_delay_s, delay_factor=o.delay_factor,
                       page_budget=o.page_budget, note=o.note, updated_at=o.updated_at)


# ------------------------------------------------------------------------------------------ metrics


class _Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("streamcrawl_control_requests_total", "HTTP requests",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("streamcrawl_control_request_seconds", "HTTP request time",
                                 ["route"], registry=self.registry)
        self.seeds = Counter("streamcrawl_control_seeds_total", "Seed URLs by outcome", ["outcome"],
                             registry=self.registry)


def _host_or_422(raw: str) -> str:
    try:
        return canonical_host(raw)
    except InvalidHost as exc:
        raise HTTPException(status_code=422, detail=f"invalid host {raw[:_ECHO_MAX]!r}: {exc}") from exc


# ---------------------------------------------------------------------------------------------- app


def create_app(sink: SeedSink, store: ControlStore, stats: StatsSource, *,
               max_seeds_per_request: int = 10_000) -> FastAPI:
    """The control-plane app over the given ports."""
    app = FastAPI(title="streamcrawl control plane", version="0.1.0",
                  description="Seeds, blocklist, per-host overrides, host state and crawl statistics.")
    metrics = _Metrics()
    app.state.metrics_registry = metrics.registry

    @app.middleware("http")
    async def _observe(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        t0 = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        metrics.requests.labels(request.method, route, str(response.status_code)).inc()
        metrics.latency.labels(route).observe(time.perf_counter() - t0)
        return response

    @app.exception_handler(PortError)
    async def _port_error(_request: Request, exc: PortError) -> JSONResponse:
        log.warning("engine error", extra={"error": str(exc)})
        return JSONResponse(status_code=503, content={"detail": str(exc)})

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Like FastAPI's default, without echoing the input (it may be NaN, which JSON cannot carry).
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                  for e in exc.errors()]
        return JSONResponse(status_code=422, content={"detail": errors})

    @app.post("/seeds", status_code=202, response_model=SeedResponse,
              responses={422: {"model": SeedResponse, "description": "Some URLs were rejected (the rest "
                                                                    "were accepted and produced)"},
                         503: {"description": "Kafka or Cassandra unavailable; nothing was accepted"}})
    async def post_seeds(body: SeedRequest, response: Response) -> SeedResponse:
        """Normalize, check against the blocklist and produce each URL to the seeds topic, keyed by host."""
        if len(body.urls) > max_seeds_per_request:
            raise HTTPException(422, f"at most {max_seeds_per_request} URLs per request")
        blocklist = Blocklist(e.pattern for e in await store.list_blocklist())
        accepted: list[AcceptedSeed] = []
        rejected: list[RejectedSeed] = []
        records: list[tuple[str, SeedMessage]] = []
        seen: set[str] = set()
        for raw in body.urls:
            echo = raw[:_ECHO_MAX]
            try:
                url, host = host_identity(raw)
            except (UrlError, ValueError) as exc:
                reason = getattr(exc, "reason", "malformed")
                error = str(exc)[:_ECHO_MAX]
                rejected.append(RejectedSeed(url=echo, reason=f"invalid:{reason}", error=error))
                continue
            if url in seen:
                rejected.append(RejectedSeed(url=echo, reason="duplicate", error=f"{url} appears twice"))
                continue
            seen.add(url)
            pattern = blocklist.blocked_by(host)
            if pattern is not None:
                error = f"host matches blocklist pattern {pattern!r}"
                rejected.append(RejectedSeed(url=echo, reason="blocklisted", error=error))
                continue
            records.append((host, SeedMessage(url=url, priority=body.priority, source=body.source)))
            accepted.append(AcceptedSeed(url=echo, normalized=url, host=host,
                                         partition=partition_for(host, SEEDS.partitions)))
        if records:
            await run_in_threadpool(sink.send, records)  # PortError -> 503, nothing reported as accepted
        for r in rejected:
            metrics.seeds.labels(r.reason.split(":", 1)[0]).inc()
        metrics.seeds.labels("accepted").inc(len(accepted))
        log.info("seeds", extra={"accepted": len(accepted), "rejected": len(rejected)})
        if rejected:
            response.status_code = 422
        return SeedResponse(accepted=accepted, rejected=rejected)

    @app.get("/blocklist", response_model=BlocklistOut)
    async def get_blocklist() -> BlocklistOut:
        """Every pattern: `.example.com` blocks example.com and its subdomains; `example.com` only itself."""
        return _blocklist_out(await store.list_blocklist())

    @app.put("/blocklist", response_model=BlocklistOut)
    async def put_blocklist(body: BlocklistPut) -> BlocklistOut:
        """Add (or re-reason) patterns. All are validated first: one bad pattern stores none (422)."""
        canonical: list[str] = []
        errors: list[dict[str, str]] = []
        for raw in body.patterns:
            try:
                canonical.append(canonical_pattern(raw))
            except InvalidHost as exc:
                errors.append({"pattern": raw[:_ECHO_MAX], "error": str(exc)})
        if errors:
            raise HTTPException(422, {"invalid_patterns": errors})
        stored = [await store.put_block(p, body.reason) for p in dict.fromkeys(canonical)]
        log.info("blocklist put", extra={"patterns": len(stored)})
        return _blocklist_out(stored)

    @app.delete("/blocklist", status_code=204, responses={404: {"description": "No such pattern"}})
    async def delete_blocklist(pattern: Annotated[str, Query(min_length=1, max_length=300)]) -> Response:
        """Remove one pattern (?pattern=.example.com)."""
        try:
            canonical = canonical_pattern(pattern)
        except InvalidHost as exc:
            raise HTTPException(422, f"invalid pattern {pattern!r}: {exc}") from exc
        if not await store.delete_block(canonical):
            raise HTTPException(404, f"pattern {canonical!r} is not in the blocklist")
        log.info("blocklist delete", extra={"pattern": canonical})
        return Response(status_code=204)

    @app.get("/hosts/{host}/override", response_model=OverrideOut,
             responses={404: {"description": "None set"}})
    async def get_override(host: str) -> OverrideOut:
        h = _host_or_422(host)
        o = await store.get_override(h)
        if o is None:
            raise HTTPException(404, f"no override for {h}")
        return _override_out(h, o)

    @app.put("/hosts/{host}/override", response_model=OverrideOut)
    async def put_override(host: str, body: OverrideIn) -> OverrideOut:
        """Set the agreed rate for a host (replaces any previous override whole)."""
        h = _host_or_422(host)
        o = await store.put_override(h, HostOverride(body.min_delay_s, body.delay_factor, body.page_budget,
                                                      body.note))
        log.info("override put", extra={"host": h})
        return _override_out(h, o)

    @app.delete("/hosts/{host}/override", status_code=204, responses={404: {"description": "None set"}})
    async def delete_override(host: str) -> Response:
        h = _host_or_422(host)
        if not await store.delete_override(h):
            raise HTTPException(404, f"no override for {h}")
        log.info("override delete", extra={"host": h})
        return Response(status_code=204)

    @app.get("/hosts/{host}", responses={404: {"description": "Host never seen and no override"}})
    async def get_host(host: str) -> dict[str, Any]:
        """Politeness, robots and back-off state of a host (host_state), its override and its partition."""
        h = _host_or_422(host)
        state = await store.get_host_state(h)
        override = await store.get_override(h)
        if state is None and override is None:
            raise HTTPException(404, f"host {h} has no state and no override")
        return {
            "host": h,
            "partition": partition_for(h, SEEDS.partitions),
            "state": state,
            "override": _override_out(h, override).model_dump(mode="json") if override else None,
        }

    @app.get("/stats")
    async def get_stats() -> dict[str, Any]:
        """Topic end offsets, consumer-group lag (groups `streamcrawl-*`) and cheap Cassandra counts.
        An unreachable engine is reported under `errors`; the rest is still returned."""
        out: dict[str, Any] = {"kafka": None, "cassandra": None, "errors": {}}
        try:
            ks = await run_in_threadpool(stats.kafka_stats)
            out["kafka"] = {
                "topics": {t.name: {"partitions": t.partitions, "end_offset": ks.end_offsets.get(t.name, 0)}
                           for t in ALL_TOPICS},
                "consumer_groups": {g: {"lag": lag, "total_lag": sum(lag.values())}
                                    for g, lag in ks.group_lag.items()},
            }
        except PortError as exc:
            out["errors"]["kafka"] = str(exc)
        try:
            out["cassandra"] = await store.counts()
        except PortError as exc:
            out["errors"]["cassandra"] = str(exc)
        return out

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """200 while the process serves requests (the liveness probe)."""
        return {"status": "ok"}

    @app.get("/readyz", responses={503: {"description": "An engine is unreachable"}})
    async def readyz() -> JSONResponse:
        """200 when Kafka and Cassandra answer, 503 otherwise, with one line per engine."""
        checks: dict[str, str] = {}
        try:
            await run_in_threadpool(sink.ping)
            checks["kafka"] = "ok"
        except PortError as exc:
            checks["kafka"] = str(exc)
        try:
            await store.ping()
            checks["cassandra"] = "ok"
        except PortError as exc:
            checks["cassandra"] = str(exc)
        ok = all(v == "ok" for v in checks.values())
        return JSONResponse(status_code=200 if ok else 503,
                            content={"status": "ok" if ok else "unavailable", "checks": checks})

    @app.get("/metrics", include_in_schema=False)
    def get_metrics() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    return app
