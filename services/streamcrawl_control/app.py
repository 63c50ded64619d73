"""The control plane's HTTP app (FastAPI): the /v1 API (streamcrawl_control.routes), the dashboard (/ and
/ui/), health probes (/healthz, /readyz) and Prometheus metrics (/metrics). `create_app` takes the ports,
so tests pass in-memory adapters.

Bad input never reaches a handler as a server error: a body over the size limit is a 413, a body that is
not UTF-8 a 400, malformed JSON and unknown or invalid fields a 422, each with a one-sentence `detail`.
Metric labels are route templates and outcomes, never a URL or a host.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_runtime.ports.control import ControlStore, MetricsSource, PortError, SeedSink, StatsSource

from streamcrawl_control.auth import BearerAuth
from streamcrawl_control.models import MAX_SEEDS
from streamcrawl_control.routes import build_router
from streamcrawl_control.stats import StatsCollector

log = logging.getLogger("streamcrawl.control")

STATIC = Path(__file__).resolve().parent / "static"
#: The largest request body accepted (10,000 seed URLs of 300 characters fit in 3.5 MB).
MAX_BODY_BYTES = 8 * 1024 * 1024



class _Metrics:
    """The app's own registry (two apps in one process, as in tests, do not share counters)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("streamcrawl_control_requests_total", "HTTP requests",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("streamcrawl_control_request_seconds", "HTTP request time", ["route"],
                                 registry=self.registry)
        self.seeds = Counter("streamcrawl_control_seeds_total", "Seed URLs by outcome", ["outcome"],
                             registry=self.registry)


def _problem(status: int, detail: str, errors: list[dict[str, str]] | None = None,
             headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(status_code=status, content={"detail": detail, "errors": errors or []}, headers=headers)


class BodyGuard:
    """Reads a request body once, refusing it past ``limit`` bytes (413) or when it is not UTF-8 (400),
    then hands it to the app unchanged."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send, 413, f"request body over {self.limit} bytes")
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(scope, receive, send, 413, f"request body over {self.limit} bytes")
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            await self._refuse(scope, receive, send, 400, f"request body is not valid UTF-8 (byte {exc.start})")
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, status: int, detail: str) -> None:
        await _problem(status, detail)(scope, receive, send)


def create_app(sink: SeedSink, store: ControlStore, stats: StatsSource, metrics: MetricsSource, *,
               token: str | None = None, open_reads: bool = False, max_seeds_per_request: int = MAX_SEEDS,
               max_body_bytes: int = MAX_BODY_BYTES, sample_every_s: float = 5.0,
               pauses_refresh_s: float = 5.0, partitions: int = DEFAULT_PARTITIONS) -> FastAPI:
    """The control-plane app over the given ports. ``token``: the bearer token of protected calls (None:
    every protected call is refused); ``open_reads``: GET endpoints need no token; ``partitions``: the
    deployment's STREAMCRAWL_PARTITIONS."""
    collector = StatsCollector(metrics, stats, store, every_s=sample_every_s, pauses_refresh_s=pauses_refresh_s)
    auth = BearerAuth(token, open_reads)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        collector.start()
        try:
            yield
        finally:
            collector.stop()

    app = FastAPI(title="streamcrawl control plane", version="1.0.0", lifespan=lifespan,
                  description="Seeds, blocklist, per-host overrides, pause and resume, host state and crawl "
                              "statistics. Mutating calls need `Authorization: Bearer <token>`.")
    app.state.collector = collector
    metrics_ = _Metrics()
    app.state.metrics_registry = metrics_.registry
    app.add_middleware(BodyGuard, limit=max_body_bytes)

    @app.middleware("http")
    async def _observe(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        t0 = time.perf_counter()
        response = await call_next(request)
        route = getattr(request.scope.get("route"), "path", "unmatched")
        metrics_.requests.labels(request.method, route, str(response.status_code)).inc()
        metrics_.latency.labels(route).observe(time.perf_counter() - t0)
        return response

    @app.exception_handler(PortError)
    async def _port_error(_request: Request, exc: PortError) -> JSONResponse:
        log.warning("engine error", extra={"error": str(exc)})
        return _problem(503, str(exc))

    @app.exception_handler(HTTPException)
    async def _http_error(_request: Request, exc: HTTPException) -> JSONResponse:
        return _problem(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # Like FastAPI's default, without echoing the input (it may be huge, or NaN, which JSON cannot carry).
        errors = [{"loc": ".".join(str(p) for p in e.get("loc", ())), "msg": str(e.get("msg", "")),
                   "type": str(e.get("type", ""))} for e in exc.errors()]
        first = errors[0] if errors else {"loc": "", "msg": "invalid request", "type": ""}
        if first["type"] == "json_invalid":
            detail = f"malformed JSON: {first['msg']}"
        elif first["type"] == "extra_forbidden":
            detail = f"unknown field {first['loc'].rsplit('.', 1)[-1]!r}"
        else:
            detail = f"invalid request: {first['loc']}: {first['msg']}"
        return _problem(422, detail, errors)

    app.include_router(build_router(sink, store, collector, auth, metrics_.seeds, max_seeds=max_seeds_per_request,
                                    pauses_refresh_s=pauses_refresh_s, partitions=partitions))

    @app.get("/", include_in_schema=False)
    async def index() -> RedirectResponse:
        return RedirectResponse("/ui/")

    app.mount("/ui", StaticFiles(directory=STATIC, html=True), name="ui")

    @app.get("/healthz", tags=["probes"])
    async def healthz() -> dict[str, str]:
        """200 while the process serves requests (the liveness probe)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["probes"], responses={503: {"description": "An engine is unreachable"}})
    async def readyz() -> JSONResponse:
        """200 when Kafka and Cassandra answer, 503 otherwise, with one line per engine."""
        checks: dict[str, Any] = {}
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
        return Response(generate_latest(metrics_.registry), media_type=CONTENT_TYPE_LATEST)

    return app
