"""Run a whole crawl on one machine: the synthetic web (optional), every service as its own process, seeds,
live progress, and quiescence detection. Used by `make run`, the e2e tests and `make bench-crawl`.

Each service is started exactly as in production (`python -m streamcrawl_<name>.main`), configured only
through STREAMCRAWL_* environment variables; nothing here reaches into a service's internals. A service
may run as several instances (processes in one consumer group, as replicas of a Deployment): the first is
named after the service ("fetcher"), the others "fetcher-2", "fetcher-3", ..., each with its own log file
and metrics port.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import DEAD_LETTER, FETCH_RESULTS, PAGE_FETCHED, SEEDS
from streamcrawl_core.identity import host_identity
from streamcrawl_runtime.acsylla_session import BlockingSession
from streamcrawl_runtime.connect import blocking_cql_session, minio_client
from streamcrawl_runtime.kafka_offsets import KafkaStatsSource
from streamcrawl_runtime.kafka_producer import host_keyed_producer
from streamcrawl_runtime.metrics_scrape import Scraper
from streamcrawl_runtime.observe import total
from streamcrawl_runtime.ports.control import PortError
from streamcrawl_runtime.settings import StackSettings

from streamcrawl_launcher.diagnose import lagging_summary, write_post_mortem
from streamcrawl_launcher.reset import reset_crawl

SERVICES = ("frontier", "fetcher", "parser", "dedup", "recrawl", "warc")
GROUPS = {"frontier": "streamcrawl-frontier", "fetcher": "streamcrawl-fetcher", "parser": "streamcrawl-parser",
          "dedup": "streamcrawl-dedup", "recrawl": "streamcrawl-recrawl", "warc": "streamcrawl-warc"}
#: Each service's /metrics port (its settings' default); instance i (from 0) uses port + 10 * i.
METRICS_PORTS = {"frontier": 9101, "fetcher": 9102, "parser": 9103, "dedup": 9104, "recrawl": 9105, "warc": 9106}


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
    instances: int = 1  # processes per service (one consumer group each: Kafka spreads the partitions)
    service_instances: dict[str, int] = field(default_factory=dict)  # per-service counts, over `instances`
    control_port: int = 8080
    #: "synthetic": the synthetic web's DNS server; "system": the OS resolver. None: synthetic when the
    #: synthetic web is served, system for seeds of one's own.
    resolver: str | None = None


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
        self._stopped: set[str] = set()  # instances stopped on purpose (kill)
        self.manifest: dict[str, Any] = {}
        self.admin = AdminClient({"bootstrap.servers": self.settings.kafka_bootstrap, "log_level": 0})
        self.workdir = options.workdir.resolve()
        self.started_at = time.time()
        self.logs = self.workdir / "logs"
        self.token_file = self.workdir / "control.token"
        # Cheap observation: one admin client for offsets and lag, one HTTP client for the /metrics of the
        # services started here, one CQL session only if the metrics cannot say how much is queued.
        self.offsets = KafkaStatsSource(self.settings.kafka_bootstrap, timeout_s=10.0)
        self.scraper = Scraper(self.metrics_targets())
        self._frontiers = Scraper(self.metrics_targets(("frontier",)))
        self._cql: BlockingSession | None = None

    def metrics_targets(self, services: tuple[str, ...] = SERVICES) -> list[str]:
        return [f"http://127.0.0.1:{METRICS_PORTS[name] + 10 * i}/metrics"
                for name in services for i in range(self.opt.service_instances.get(name, self.opt.instances))]

    @property
    def control_url(self) -> str:
        return f"http://127.0.0.1:{self.opt.control_port}"

    # ------------------------------------------------------------------ processes

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The launcher's own stack settings, so every service talks to the same engines.
        env.update({f"STREAMCRAWL_{name.upper()}": str(value)
                    for name, value in self.settings.model_dump().items()})
        env["PYTHONUNBUFFERED"] = "1"
        if self.opt.log_level:
            env.update({f"STREAMCRAWL_{name.upper()}_LOG_LEVEL": self.opt.log_level for name in (*SERVICES, "control")})
        resolver = self.opt.resolver or ("synthetic" if self.opt.synthweb else "system")
        if resolver == "synthetic":
            env.update({"STREAMCRAWL_FETCHER_DNS_SERVER": "127.0.0.1",
                        "STREAMCRAWL_FETCHER_DNS_PORT": str(self.opt.dns_port)})
        else:
            env["STREAMCRAWL_FETCHER_DNS_SERVER"] = "system"
        if self.opt.synthweb:
            env["STREAMCRAWL_FETCHER_ALLOWED_NETWORKS"] = "127.0.0.0/8"
        env.update({
            "STREAMCRAWL_CONTROL_LISTEN_PORT": str(self.opt.control_port),
            "STREAMCRAWL_CONTROL_API_TOKEN_FILE": str(self.token_file),
            "STREAMCRAWL_CONTROL_METRICS_TARGETS": ",".join(self.metrics_targets()),
        })
        # Open WARC files are spooled in the run's directory; a small crawl closes them after a few seconds
        # (page_fetched waits for its file to be in S3).
        env.setdefault("STREAMCRAWL_WARC_SPOOL_DIR", str(self.workdir / "warc-spool"))
        env.setdefault("STREAMCRAWL_WARC_MAX_FILE_AGE_S", "3")
        env.update(self.opt.extra_env)
        return env

    def _spawn(self, name: str, args: list[str], extra: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        self.logs.mkdir(parents=True, exist_ok=True)
        with (self.logs / f"{name}.log").open("ab") as fh:
            proc = subprocess.Popen([sys.executable, *args], stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env={**self.env(), **(extra or {})},
                                    start_new_session=True)
        self.procs[name] = proc
        self._stopped.discard(name)
        return proc

    def start(self) -> None:
        self.started_at = time.time()
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.opt.fresh:
            self.reset()
        if self.opt.synthweb:
            self._start_synthweb()
        for name in SERVICES:
            for i in range(self.opt.service_instances.get(name, self.opt.instances)):
                self.start_service(name, i)
        if self.opt.with_control:
            self.start_control()

    def reset(self) -> None:
        """A crawl from nothing on the stack of ``settings`` (reset_crawl), its topics created as provisioning
        creates them (the settings' replication factor and min.insync.replicas)."""
        session = blocking_cql_session(self.settings)
        try:
            reset_crawl(self.settings.kafka_bootstrap, session, minio_client(self.settings),
                        self.settings.s3_bucket, self.settings.partitions,
                        replication_factor=self.settings.kafka_replication_factor,
                        min_insync_replicas=self.settings.kafka_min_insync_replicas)
        finally:
            session.close()

    def start_control(self) -> None:
        """The control plane on 127.0.0.1:control_port, with a fresh API token in workdir/control.token (read
        by the `streamcrawl` commands run from the same directory; mode 0600)."""
        if not self.token_file.exists():
            self.token_file.touch(mode=0o600)
            self.token_file.write_text(secrets.token_urlsafe(32) + "\n")
        self._spawn("control", ["-m", "streamcrawl_control.main"])

    def token(self) -> str:
        return self.token_file.read_text().strip()

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

    @staticmethod
    def instance_name(name: str, instance: int) -> str:
        return name if instance == 0 else f"{name}-{instance + 1}"

    def start_service(self, name: str, instance: int | None = None) -> str:
        """Start (or restart) one instance of a service, by default the first that is not running; instance
        0 is named after the service. Returns the instance's name."""
        if instance is None:
            instance = 0
            while (p := self.procs.get(self.instance_name(name, instance))) is not None and p.poll() is None:
                instance += 1
        proc_name = self.instance_name(name, instance)
        port = METRICS_PORTS[name] + 10 * instance
        self._spawn(proc_name, ["-m", f"streamcrawl_{name}.main"],
                    {f"STREAMCRAWL_{name.upper()}_METRICS_PORT": str(port)})
        return proc_name

    def running(self, service: str) -> list[str]:
        """The names of the live instances of ``service``."""
        return sorted(n for n, p in self.procs.items()
                      if (n == service or n.startswith(f"{service}-")) and p.poll() is None)

    def kill(self, name: str, sig: int = signal.SIGKILL, timeout_s: float = 90.0) -> None:
        """Signal an instance (by name) and wait for it to exit (SIGTERM: it hands its partitions over)."""
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            self._stopped.add(name)
            os.killpg(proc.pid, sig)
            proc.wait(timeout_s)

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
        """Processes that exited without being stopped through `kill` or `stop`."""
        return [n for n, p in self.procs.items() if p.poll() is not None and n not in self._stopped]

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

    def progress(self) -> Progress:
        """Offsets and lag from admin requests of one reused client: no consumer is opened."""
        try:
            ks = self.offsets.kafka_stats()
        except PortError as exc:
            raise RuntimeError(f"progress: {exc}") from exc
        lag = {svc: sum(ks.group_lag.get(group, {}).values()) for svc, group in GROUPS.items()}
        # Seeds waiting for a frontier that has not joined its group yet, or joined and committed nothing on
        # the seeds topic yet, are in no group's committed lag: counted whole, or a crawl just seeded
        # reads as idle before anything was read (seen with a group join that took 23 s on a fresh stack).
        if SEEDS.name not in ks.group_lag.get(GROUPS["frontier"], {}):
            lag["frontier"] += ks.held.get(SEEDS.name, 0)
        return Progress(time.time(), ks.end_offsets.get(FETCH_RESULTS.name, 0),
                        ks.end_offsets.get(PAGE_FETCHED.name, 0), ks.end_offsets.get(DEAD_LETTER.name, 0), lag)

    def queued(self) -> int:
        """Whether URLs wait in the frontier (0: none): the frontiers' streamcrawl_frontier_queued gauge (URLs
        held in memory); when that is 0 or cannot be scraped, the hosts in the frontier's durable index
        (frontier_hosts: a full count of a table of one row per host with queued URLs), which also counts
        the URLs of hosts that wait in Cassandra for room in memory."""
        scrape = self._frontiers.scrape()
        if all(v == "ok" for v in scrape.targets.values()):
            in_memory = int(total(scrape.sample, "streamcrawl_frontier_queued"))
            if in_memory:
                return in_memory
        if self._cql is None:
            self._cql = blocking_cql_session(self.settings)
        return int(self._cql.execute("SELECT COUNT(*) FROM frontier_hosts")[0][0])

    def close(self) -> None:
        self.scraper.close()
        self._frontiers.close()
        if self._cql is not None:
            self._cql.close()
            self._cql = None

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
        post_mortem = self.workdir / "not-idle.json"
        write_post_mortem(post_mortem, self.settings.kafka_bootstrap,
                          {n: p.pid for n, p in self.procs.items() if p.poll() is None and n != "synthweb"},
                          logs=self.logs)
        try:
            queued: int | str = self.queued()
        except Exception as exc:  # on the way to reporting a failure: say what could not be read
            queued = f"unknown ({exc!r:.100})"
        raise TimeoutError(f"crawl not idle after {timeout_s}s: {last}, queued {queued} "
                           f"(groups and stacks: {post_mortem}); {lagging_summary(post_mortem)}")
