"""Run a whole crawl on one machine: the synthetic web (optional), every service as its own process, seeds,
live progress, and quiescence detection. Used by `make run`, the e2e tests and `make bench-crawl`.

Each service is started exactly as in production (`python -m streamcrawl_<name>.main`), configured only
through STREAMCRAWL_* environment variables; nothing here reaches into a service's internals.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import ALL_TOPICS, DEAD_LETTER, FETCH_RESULTS, PAGE_FETCHED, SEEDS, TopicSpec
from streamcrawl_core.identity import host_identity
from streamcrawl_runtime.connect import blocking_cql_session, minio_client
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_runtime.settings import StackSettings

from streamcrawl_launcher.reset import reset_crawl

SERVICES = ("frontier", "fetcher", "parser", "dedup", "recrawl")
GROUPS = {"frontier": "streamcrawl-frontier", "fetcher": "streamcrawl-fetcher", "parser": "streamcrawl-parser",
          "dedup": "streamcrawl-dedup", "recrawl": "streamcrawl-recrawl"}


@dataclass
class CrawlOptions:
    workdir: Path = Path("run")
    hosts: int = 200
    web_seed: int = 7
    http_port: int = 8480
    dns_port: int = 8553
    synthweb: bool = True
    fresh: bool = True
    with_control: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    log_level: str | None = None  # every service's STREAMCRAWL_<SERVICE>_LOG_LEVEL (None: their default)
    synthweb_args: list[str] = field(default_factory=list)


@dataclass
class Progress:
    t: float
    fetch_results: int
    pages_published: int
    dead_letters: int
    lag: dict[str, int]

    @property
    def backlog(self) -> int:
        return sum(self.lag.values())


class Crawl:
    def __init__(self, options: CrawlOptions, settings: StackSettings | None = None) -> None:
        self.opt = options
        self.settings = settings or StackSettings()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.manifest: dict[str, Any] = {}
        self.admin = AdminClient({"bootstrap.servers": self.settings.kafka_bootstrap, "log_level": 0})
        self.workdir = options.workdir.resolve()
        self.logs = self.workdir / "logs"

    # ------------------------------------------------------------------ processes

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The launcher's own stack settings, so every service talks to the same engines.
        env.update({f"STREAMCRAWL_{name.upper()}": str(value)
                    for name, value in self.settings.model_dump().items()})
        env["PYTHONUNBUFFERED"] = "1"
        if self.opt.log_level:
            env.update({f"STREAMCRAWL_{name.upper()}_LOG_LEVEL": self.opt.log_level for name in (*SERVICES, "control")})
        if self.opt.synthweb:
            env.update({"STREAMCRAWL_FETCHER_DNS_SERVER": "127.0.0.1",
                        "STREAMCRAWL_FETCHER_DNS_PORT": str(self.opt.dns_port),
                        "STREAMCRAWL_FETCHER_ALLOWED_NETWORKS": "127.0.0.0/8"})
        env.update(self.opt.extra_env)
        return env

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as fh:
            proc = subprocess.Popen([sys.executable, *args], stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=self.env(), start_new_session=True)
        self.procs[name] = proc
        return proc

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.opt.fresh:
            session = blocking_cql_session(self.settings)
            try:
                reset_crawl(self.settings.kafka_bootstrap, session, minio_client(self.settings),
                            self.settings.s3_bucket)
            finally:
                session.close()
        if self.opt.synthweb:
            self._start_synthweb()
        for name in SERVICES:
            self.start_service(name)
        if self.opt.with_control:
            self._spawn("control", ["-m", "streamcrawl_control.main"])

    def _start_synthweb(self) -> None:
        ready = self.workdir / "synthweb.ready"
        manifest = self.workdir / "manifest.json"
        log = self.workdir / "requests.jsonl"
        for p in (ready, manifest, log):
            p.unlink(missing_ok=True)
        proc = self._spawn("synthweb", ["-m", "streamcrawl_synthweb.main", "--hosts", str(self.opt.hosts),
                                        "--seed", str(self.opt.web_seed), "--http-port", str(self.opt.http_port),
                                        "--dns-port", str(self.opt.dns_port), "--log", str(log),
                                        "--manifest", str(manifest), "--ready-file", str(ready),
                                        *self.opt.synthweb_args])
        deadline = time.time() + 60
        while not ready.exists():
            if proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"synthetic web did not start (see {self.logs / 'synthweb.log'})")
            time.sleep(0.1)
        self.manifest = json.loads(manifest.read_text())

    def start_service(self, name: str) -> None:
        self._spawn(name, ["-m", f"streamcrawl_{name}.main"])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, sig)
            proc.wait(30)

    def stop(self) -> None:
        """SIGTERM every process (services drain and commit), then wait; SIGKILL stragglers."""
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + 45
        for proc in self.procs.values():
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def dead_services(self) -> list[str]:
        return [n for n, p in self.procs.items() if p.poll() is not None]

    # ------------------------------------------------------------------ seeds and progress

    def seed(self, urls: list[str], priority: int = 0) -> int:
        prod = host_keyed_producer(self.settings.kafka_bootstrap)
        n = 0
        for url in urls:
            try:
                host: str | None = host_identity(url)[1]
            except ValueError:
                host = None  # the frontier dead-letters it with the reason
            msg = SeedMessage(url=url, priority=priority, source="launcher")
            prod.produce(SEEDS.name, key=host.encode() if host else None, value=msg.model_dump_json().encode())
            n += 1
        prod.flush(30)
        return n

    def _end_offsets(self, spec: TopicSpec, consumer: Consumer) -> int:
        total = 0
        for p in range(spec.partitions):
            _, high = consumer.get_watermark_offsets(TopicPartition(spec.name, p), timeout=5)
            total += max(high, 0)
        return total

    def progress(self) -> Progress:
        consumer = Consumer({"bootstrap.servers": self.settings.kafka_bootstrap, "group.id": "streamcrawl-progress",
                             "enable.auto.commit": False})
        try:
            ends = {spec.name: [consumer.get_watermark_offsets(TopicPartition(spec.name, p), timeout=5)[1]
                                for p in range(spec.partitions)] for spec in ALL_TOPICS}
            lag: dict[str, int] = {}
            subscriptions = {"frontier": ["streamcrawl.seeds", "streamcrawl.urls", "streamcrawl.fetch_results"],
                             "fetcher": ["streamcrawl.fetch_requests"], "parser": ["streamcrawl.fetch_results"],
                             "dedup": ["streamcrawl.url_candidates", "streamcrawl.parsed",
                                       "streamcrawl.fetch_results"],
                             "recrawl": ["streamcrawl.fetch_results"]}
            for svc, topics in subscriptions.items():
                group = Consumer({"bootstrap.servers": self.settings.kafka_bootstrap, "group.id": GROUPS[svc],
                                  "enable.auto.commit": False})
                try:
                    tps = [TopicPartition(t, p) for t in topics for p in range(len(ends[t]))]
                    committed = group.committed(tps, timeout=10)
                    lag[svc] = sum(max(0, ends[tp.topic][tp.partition] - max(tp.offset, 0)) for tp in committed)
                finally:
                    group.close()
            return Progress(time.time(), sum(ends[FETCH_RESULTS.name]), sum(ends[PAGE_FETCHED.name]),
                            sum(ends[DEAD_LETTER.name]), lag)
        finally:
            consumer.close()

    def queued(self) -> int:
        """URLs waiting in the frontier (Cassandra frontier_queue, one partition read per Kafka partition)."""
        session = blocking_cql_session(self.settings)
        try:
            return sum(int(session.execute("SELECT COUNT(*) FROM frontier_queue WHERE part = ?", (p,))[0][0])
                       for p in range(SEEDS.partitions))
        finally:
            session.close()

    def wait_idle(self, idle_s: float = 20.0, timeout_s: float = 900.0, report: bool = True,
                  every_s: float = 3.0) -> Progress:
        """Wait until every consumer group has caught up and no fetch result arrived for idle_s."""
        start = time.time()
        last = self.progress()
        last_change = time.time()
        first = last
        while time.time() - start < timeout_s:
            time.sleep(every_s)
            dead = self.dead_services()
            if dead:
                raise RuntimeError(f"service(s) exited: {dead} (see {self.logs})")
            cur = self.progress()
            if report:
                rate = (cur.fetch_results - first.fetch_results) / max(cur.t - first.t, 1e-9)
                print(f"[{cur.t - start:6.0f}s] fetched={cur.fetch_results} published={cur.pages_published} "
                      f"pages/s={rate:5.1f} backlog={cur.lag} dead_letters={cur.dead_letters}", flush=True)
            if cur.fetch_results != last.fetch_results or cur.backlog:
                last_change = time.time()
            last = cur
            if time.time() - last_change >= idle_s:
                if self.queued() == 0:
                    return cur
                last_change = time.time() - idle_s / 2  # URLs still wait on politeness timers
        raise TimeoutError(f"crawl not idle after {timeout_s}s: {last}")
