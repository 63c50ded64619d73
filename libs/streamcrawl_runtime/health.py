"""The HTTP endpoints every service serves on its metrics port: ``/metrics`` (Prometheus), ``/healthz``
(the process and its run loop are alive) and ``/readyz`` (it can do its work: partitions are assigned and
every engine it uses answers).

The server runs in a daemon thread and only reads state; the engine probes run on the service's own
event loop (`Readiness.watch`), on a timer, so a probe request never touches a driver session from a
foreign thread and a burst of probes costs nothing extra.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Gauge, generate_latest

log = logging.getLogger("streamcrawl.health")

Check = Callable[[], Awaitable[Any]]

READY = Gauge("streamcrawl_ready", "1 when the service's /readyz answers 200")


class Readiness:
    """What /healthz and /readyz report. `beat()` is called by the run loop on every pass; `assigned` by
    its rebalance callbacks; `checks` probe the engines every `interval_s`, and every `retry_s` while one
    of them fails, so a service turns ready again within seconds of its engine's return rather than up to
    a whole interval later (a probe costs a round trip per engine; only failing services pay it often)."""

    def __init__(self, checks: dict[str, Check] | None = None, *, interval_s: float = 10.0,
                 retry_s: float = 2.0, timeout_s: float = 3.0, stall_s: float = 60.0,
                 need_assignment: bool = True) -> None:
        self.checks: dict[str, Check] = dict(checks or {})
        self.interval_s = interval_s
        self.retry_s = min(retry_s, interval_s)
        self.timeout_s = timeout_s
        self.stall_s = stall_s
        self.need_assignment = need_assignment
        self.engines: dict[str, str] = {name: "not probed yet" for name in self.checks}
        self.partitions = 0
        self.running = False
        #: True while the engine checks run: an idle run loop, which blocks its event loop in poll, keeps
        #: its polls short meanwhile, or a check needing a few loop turns would outlast its timeout.
        self.probing = False
        self._beat = time.monotonic()

    def beat(self) -> None:
        self._beat = time.monotonic()

    def assigned(self, count: int) -> None:
        self.partitions = count

    def health(self) -> tuple[bool, dict[str, Any]]:
        stalled = time.monotonic() - self._beat
        ok = stalled < self.stall_s
        return ok, {"status": "ok" if ok else "stalled", "loop_idle_s": round(stalled, 1)}

    def ready(self) -> tuple[bool, dict[str, Any]]:
        alive, _ = self.health()
        reasons: list[str] = []
        if not self.running:
            reasons.append("not started")
        if not alive:
            reasons.append("run loop stalled")
        if self.need_assignment and self.partitions == 0:
            reasons.append("no partitions assigned")
        reasons.extend(f"{name}: {state}" for name, state in sorted(self.engines.items()) if state != "ok")
        ok = not reasons
        READY.set(1 if ok else 0)
        return ok, {"status": "ready" if ok else "not ready", "partitions": self.partitions,
                    "engines": dict(self.engines), "reasons": reasons}

    async def probe_once(self) -> None:
        self.probing = True
        try:
            await self._probe_all()
        finally:
            self.probing = False

    async def _probe_all(self) -> None:
        for name, check in self.checks.items():
            try:
                await asyncio.wait_for(check(), self.timeout_s)
            except Exception as exc:  # any failure means "not ready"; the message says which and why
                if self.engines.get(name) == "ok":
                    log.warning("engine not ready", extra={"engine": name, "error": repr(exc)[:300]})
                self.engines[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
            else:
                if self.engines.get(name) not in (None, "ok", "not probed yet"):
                    log.info("engine ready again", extra={"engine": name})
                self.engines[name] = "ok"

    async def watch(self) -> None:
        """Probe the engines until cancelled."""
        while True:
            await self.probe_once()
            await asyncio.sleep(self.next_probe_in())

    def next_probe_in(self) -> float:
        """Seconds until the next probe: `retry_s` while an engine fails, else `interval_s`."""
        failing = any(state != "ok" for state in self.engines.values())
        return self.retry_s if failing else self.interval_s


class HealthServer:
    """/metrics, /healthz and /readyz on ``bind:port``, in a daemon thread."""

    def __init__(self, readiness: Readiness, bind: str, port: int) -> None:
        self.readiness = readiness
        owner = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
                elif path in ("/healthz", "/readyz"):
                    ok, body = owner.readiness.health() if path == "/healthz" else owner.readiness.ready()
                    self._send(200 if ok else 503, json.dumps(body).encode(), "application/json")
                else:
                    self._send(404, b'{"error": "not found"}', "application/json")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds: no access log
                pass

        self.server = ThreadingHTTPServer((bind, port), _Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.5},
                                        name="health", daemon=True)

    def start(self) -> HealthServer:
        self._thread.start()
        return self

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
