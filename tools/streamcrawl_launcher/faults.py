"""Engine faults for a running crawl: restart or freeze (SIGSTOP, then SIGCONT) Kafka, Cassandra or the
S3 store through `stack/stackctl.py` (the same start logic and readiness probe as `make stack-up`), and
watch every service's ``/readyz`` meanwhile. Used by the engine-fault e2e test, `bench/engine_faults.py`
and `make chaos`.

A fault's *outage* is the time the engine did not serve: from the stop (or SIGSTOP) until it answered its
readiness probe again (or SIGCONT). The crawl's verdicts come from the synthetic web's log, never from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from streamcrawl_launcher.crawl import METRICS_PORTS

ROOT = Path(__file__).resolve().parents[2]
STACKCTL = ROOT / "stack" / "stackctl.py"
ENGINES = ("kafka", "cassandra", "s3")


def stackctl(*args: str, timeout_s: float = 300.0) -> str:
    """Run ``stack/stackctl.py args...`` with this process's environment (STREAMCRAWL_STACK_DIR and the
    ports); raise with its output when it fails."""
    proc = subprocess.run([sys.executable, str(STACKCTL), *args], capture_output=True, text=True,
                          timeout=timeout_s, env=dict(os.environ))
    if proc.returncode != 0:
        raise RuntimeError(f"stackctl {' '.join(args)} failed ({proc.returncode}): {proc.stdout}{proc.stderr}")
    return proc.stdout


@dataclass(frozen=True)
class Fault:
    engine: str  # kafka | cassandra | s3
    kind: str  # restart | freeze
    freeze_s: float = 30.0

    def __post_init__(self) -> None:
        if self.engine not in ENGINES or self.kind not in ("restart", "freeze"):
            raise ValueError(f"unknown fault {self.kind} {self.engine}")

    @property
    def name(self) -> str:
        return f"{self.kind} {self.engine}" + (f" {self.freeze_s:.0f}s" if self.kind == "freeze" else "")


@dataclass(frozen=True)
class Outage:
    name: str  # what was out: a fault's name ("freeze kafka 30s"), "kill -9 fetcher", ...
    start: float  # epoch seconds: it stopped serving
    end: float  # it serves again
    # Of a restart: how long the engine was surely not serving (from its new process's start to ready).
    # The whole outage also counts the graceful shutdown, during which the engine may still answer.
    down_s: float | None = None

    @property
    def length_s(self) -> float:
        return self.end - self.start

    @property
    def unserved_s(self) -> float:
        """How long the engine surely did not answer (a freeze: all of it)."""
        return self.length_s if self.down_s is None else self.down_s


def inject(fault: Fault) -> Outage:
    """Apply ``fault`` and return once the engine serves again. A freeze is always thawed, whatever happens."""
    if fault.kind == "restart":
        start = time.time()
        out = stackctl("restart", fault.engine)
        ready = re.search(r"ready after ([0-9.]+)s", out)
        return Outage(fault.name, start, time.time(), float(ready.group(1)) if ready else None)
    stackctl("pause", fault.engine)
    start = time.time()
    try:
        time.sleep(fault.freeze_s)
    finally:
        stackctl("resume", fault.engine)
    return Outage(fault.name, start, time.time())


def ensure_up() -> None:
    """Leave the stack as found: resume any paused engine, start any stopped one (no-op when healthy)."""
    for engine in ENGINES:
        with contextlib.suppress(RuntimeError):  # not running: `up` below starts it
            stackctl("resume", engine, timeout_s=30)
    stackctl("up", timeout_s=600)


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class ReadyEvent:
    t: float
    service: str
    ready: bool
    reasons: list[str] = field(default_factory=list)


class ReadyzWatcher:
    """Polls each service's ``/readyz`` every ``every_s`` in a thread and records its transitions (the
    first answer counts as one). A service that does not answer counts as not ready."""

    def __init__(self, ports: dict[str, int], every_s: float = 1.0) -> None:
        self.ports = ports
        self.every_s = every_s
        self.events: list[ReadyEvent] = []
        self._state: dict[str, bool] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="readyz", daemon=True)

    def start(self) -> ReadyzWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def probe(self, service: str) -> tuple[bool, list[str]]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports[service]}/readyz", timeout=2) as resp:
                return resp.status == 200, []
        except urllib.error.HTTPError as exc:
            try:
                return False, list(json.loads(exc.read()).get("reasons", []))
            except ValueError:
                return False, [f"HTTP {exc.code}"]
        except OSError as exc:
            return False, [f"no answer: {exc}"]

    def _run(self) -> None:
        while not self._stop.is_set():
            for service in self.ports:
                ready, reasons = self.probe(service)
                if self._state.get(service) != ready:
                    self._state[service] = ready
                    self.events.append(ReadyEvent(time.time(), service, ready, reasons))
            self._stop.wait(self.every_s)

    def flips(self, service: str, start: float, end: float) -> tuple[float | None, float | None]:
        """(when ``service`` turned not ready, when it turned ready again) within [start, end]."""
        down = up = None
        for e in self.events:
            if e.service != service or not start <= e.t <= end:
                continue
            if not e.ready and down is None:
                down = e.t
            elif e.ready and down is not None and up is None:
                up = e.t
        return down, up

    def all_ready(self) -> bool:
        return len(self._state) == len(self.ports) and all(self._state.values())

    def not_ready_now(self) -> list[str]:
        return sorted(s for s, ok in self._state.items() if not ok)


#: Each service's engines (its /readyz probes them): a fault of an engine must turn these not ready.
ENGINE_USERS = {
    "kafka": ("frontier", "fetcher", "parser", "dedup", "recrawl"),
    "cassandra": ("frontier", "fetcher", "dedup", "recrawl"),
    "s3": ("fetcher", "parser", "dedup"),
}


def readyz_ports(instances: int = 1) -> dict[str, int]:
    """The /readyz port of each service process the launcher starts (its metrics port)."""
    return {name if i == 0 else f"{name}-{i + 1}": port + 10 * i
            for name, port in METRICS_PORTS.items() for i in range(instances)}
