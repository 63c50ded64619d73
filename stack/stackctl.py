"""Local stack manager: fetch, start, stop and report Apache Kafka, Apache Cassandra and the S3 store
(versitygw) on loopback, without Docker.

    python stack/stackctl.py up | down | status | fetch | reset
    python stack/stackctl.py restart | pause | resume ENGINE     (kafka, cassandra or s3; fault tests)

With STREAMCRAWL_STACK_PROFILE=cluster (source stack/cluster.env) it runs three Kafka and three Cassandra
nodes on 127.0.0.1-3 instead of one of each (stack_cluster).

Everything it downloads, builds or writes lives under .stack/ (git-ignored): jars and binaries are
fetched once and reused; data, logs and pid files sit beside them. Each start waits on a real readiness
probe (an admin call, a CQL query, an S3 call) and fails with one line naming the engine and its log.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import stack_cluster
from stack_common import (  # the stack's own modules, beside this script
    CASSANDRA_PORT,
    CASSANDRA_STORAGE_PORT,
    DATA,
    HERE,
    KAFKA_CONTROLLER_PORT,
    KAFKA_PORT,
    LOGS,
    PROFILE,
    READY_TIMEOUT_S,
    ROOT,
    RUN,
    S3_ACCESS,
    S3_PORT,
    S3_SECRET,
    STACK,
    StackError,
    fail,
    log_path,
    port_in_use,
    rel,
    run_logged,
)
from stack_fetch import fetch_maven, fetch_versitygw

# ---------------------------------------------------------------- processes

@dataclass
class Engine:
    name: str
    port: int
    command: Callable[[], list[str]]
    ready: Callable[[], None]  # raises while not ready
    prepare: Callable[[], None] = lambda: None
    host: str = "127.0.0.1"
    kind: str = ""  # kafka, cassandra or s3 (the readiness timeout); default: the name

    def __post_init__(self) -> None:
        self.kind = self.kind or self.name

    @property
    def pid_file(self) -> Path:
        return RUN / f"{self.name}.pid"

    @property
    def log(self) -> Path:
        return log_path(self.name)

    def pid(self) -> int | None:
        """The recorded pid, if that process is alive and is still ours (its command line names .stack)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if str(STACK).encode() in cmdline else None


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else "java"


def _fill(template: Path, target: Path, values: dict[str, str]) -> None:
    text = template.read_text()
    for key, val in values.items():
        text = text.replace(f"@@{key}@@", val)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)


def kafka_engine(node: int | None = None) -> Engine:
    """The single-node broker, or node ``node`` (1-3) of the cluster profile."""
    lib = STACK / "kafka" / "lib"
    base = [_java(), "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={HERE / 'kafka' / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={LOGS}", "-cp", f"{lib}/*"]
    name = "kafka" if node is None else f"kafka-{node}"
    host = "127.0.0.1" if node is None else stack_cluster.ADDRESSES[node - 1]
    conf = STACK / "kafka" / ("server.properties" if node is None else f"server-{node}.properties")

    def prepare() -> None:
        if node is None:
            data = DATA / "kafka"
            _fill(HERE / "kafka" / "server.properties.in", conf,
                  {"BROKER_PORT": str(KAFKA_PORT), "CONTROLLER_PORT": str(KAFKA_CONTROLLER_PORT), "DATA": str(data)})
            cluster_id = _kafka_cluster_id()
        else:
            _, data = stack_cluster.kafka_config(node)
            cluster_id = _shared_cluster_id()
        if not (data / "meta.properties").exists():
            data.mkdir(parents=True, exist_ok=True)
            run_logged(name, [*base, "kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                              "-c", str(conf), "--ignore-formatted"], log_path(f"{name}-format"), timeout=120)

    def ready() -> None:
        from confluent_kafka.admin import AdminClient
        AdminClient({"bootstrap.servers": f"{host}:{KAFKA_PORT}", "log_level": 0}).list_topics(timeout=3)

    return Engine(name, KAFKA_PORT, lambda: [*base, "kafka.Kafka", str(conf)], ready, prepare, host, "kafka")


def _shared_cluster_id() -> str:
    """The cluster profile's one KRaft cluster id, made once: every node's storage is formatted with it."""
    path = STACK / "kafka" / "cluster.id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_kafka_cluster_id())
    return path.read_text().strip()


def _kafka_cluster_id() -> str:
    # A base64url UUID, as `kafka-storage.sh random-uuid` prints. Like Kafka's Uuid.randomUuid(), never
    # one that starts with "-": the storage tool's argument parser would read it as an option.
    import base64
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def cassandra_engine(node: int | None = None) -> Engine:
    """The single node, or node ``node`` (1-3) of the cluster profile."""
    lib = STACK / "cassandra" / "lib"
    opts = [ln.strip() for ln in (HERE / "cassandra" / "jvm17.options").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]
    name = "cassandra" if node is None else f"cassandra-{node}"
    host = "127.0.0.1" if node is None else stack_cluster.ADDRESSES[node - 1]
    conf = STACK / "cassandra" / ("cassandra.yaml" if node is None else f"cassandra-{node}.yaml")
    data = DATA / ("cassandra" if node is None else f"cassandra-{node}")
    # The cluster's nodes join at once, without the 30 s waits a node makes for gossip to settle.
    fast_join = [] if node is None else ["-Dcassandra.ring_delay_ms=2000",
                                         "-Dcassandra.skip_wait_for_gossip_to_settle=0"]

    def prepare() -> None:
        if node is None:
            _fill(HERE / "cassandra" / "cassandra.yaml.in", conf,
                  {"STORAGE_PORT": str(CASSANDRA_STORAGE_PORT), "SSL_STORAGE_PORT": str(CASSANDRA_STORAGE_PORT + 1),
                   "NATIVE_PORT": str(CASSANDRA_PORT), "DATA": str(data)})
        else:
            stack_cluster.cassandra_config(node)
        data.mkdir(parents=True, exist_ok=True)

    def command() -> list[str]:
        return [_java(), "-Xms1g", "-Xmx1g", *opts, *fast_join,
                "-Dcassandra-foreground=yes", f"-Dcassandra.config=file://{conf}",
                f"-Dcassandra.storagedir={data}", f"-Dcassandra.logdir={LOGS}",
                f"-Dlogback.configurationFile={HERE / 'cassandra' / 'logback.xml'}",
                "-cp", f"{lib}/*", "org.apache.cassandra.service.CassandraDaemon"]

    def ready() -> None:
        import asyncio

        import acsylla

        async def probe() -> None:
            cluster = acsylla.create_cluster([host], port=CASSANDRA_PORT, protocol_version=4,
                                             connect_timeout=3, request_timeout=5, log_level="critical",
                                             whitelist_hosts=host)
            session = await cluster.create_session()
            try:
                await session.execute(acsylla.create_statement("SELECT release_version FROM system.local"))
            finally:
                await session.close()

        asyncio.run(probe())

    return Engine(name, CASSANDRA_PORT, command, ready, prepare, host, "cassandra")


def s3_engine() -> Engine:
    binary = STACK / "bin" / "versitygw"
    root = DATA / "s3" / "buckets"
    meta = DATA / "s3" / "meta"

    def prepare() -> None:
        root.mkdir(parents=True, exist_ok=True)
        meta.mkdir(parents=True, exist_ok=True)

    def ready() -> None:
        import urllib3
        from minio import Minio

        # Short timeouts and no retries: a paused store must fail the probe, not hang it for minutes.
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=3, read=3), retries=False)
        Minio(f"127.0.0.1:{S3_PORT}", S3_ACCESS, S3_SECRET, secure=False, region="us-east-1",
              http_client=http).list_buckets()

    # --sidecar keeps object metadata in files, so the store does not depend on xattr support.
    # --keep-alive: without it versitygw answers every request with "Connection: close", so each PUT and
    # GET of the fetcher, parser and WARC writer opened a new TCP connection (docs/benchmarks-crawl.md,
    # 2026-12-07). AWS S3 and MinIO keep connections open by default.
    return Engine("s3", S3_PORT, lambda: [str(binary), "--access", S3_ACCESS, "--secret", S3_SECRET,
                                          "--port", f"127.0.0.1:{S3_PORT}", "--quiet", "--keep-alive",
                                          "posix", "--sidecar", str(meta), str(root)], ready, prepare)


def engines() -> list[list[Engine]]:
    """The profile's engines in start groups: a group starts together, after the one before is ready."""
    if PROFILE == "cluster":
        nodes = range(1, stack_cluster.NODES + 1)
        # The Kafka quorum needs a majority of its voters up at once; Cassandra's nodes join one by one.
        return [[*(kafka_engine(i) for i in nodes), cassandra_engine(1), s3_engine()],
                *([cassandra_engine(i)] for i in nodes if i > 1)]
    return [[kafka_engine(), cassandra_engine(), s3_engine()]]


def all_engines() -> list[Engine]:
    return [e for group in engines() for e in group]


ENGINE_KINDS = ("kafka", "cassandra", "s3")


def start(engine: Engine) -> subprocess.Popen[bytes] | None:
    if engine.pid() is not None:
        return None  # already running: `up` is a no-op for it
    if port_in_use(engine.port, engine.host):
        raise fail(engine.name, f"port {engine.host}:{engine.port} is already taken by another process", engine.log)
    engine.prepare()
    LOGS.mkdir(parents=True, exist_ok=True)
    RUN.mkdir(parents=True, exist_ok=True)
    with engine.log.open("ab") as fh:
        fh.write(f"\n==== start {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode())
        proc = subprocess.Popen(engine.command(), stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=STACK, start_new_session=True)
    engine.pid_file.write_text(str(proc.pid))
    return proc


def wait_ready(engine: Engine, proc: subprocess.Popen[bytes] | None) -> float:
    t0 = time.monotonic()
    deadline = t0 + READY_TIMEOUT_S[engine.kind]
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            engine.pid_file.unlink(missing_ok=True)
            raise fail(engine.name, f"died on start with exit code {proc.returncode}", engine.log)
        try:
            engine.ready()
            return time.monotonic() - t0
        except Exception as exc:  # the probe's own error is only interesting at the deadline
            last = exc
            time.sleep(1.0)
    raise fail(engine.name, f"not ready after {READY_TIMEOUT_S[engine.kind]}s ({type(last).__name__})", engine.log)


def provision() -> None:
    """Topics, schema and bucket: idempotent, so running them on every `up` is cheap and safe. The same
    `provision()` a deployment's provisioning Job runs (streamcrawl_runtime.provision)."""
    sys.path[:0] = [str(ROOT / "libs")]
    from streamcrawl_runtime.provision import ProvisionSettings
    from streamcrawl_runtime.provision import provision as provision_engines
    from streamcrawl_runtime.provisioning import ProvisionError

    try:
        done = provision_engines(ProvisionSettings())
    except ProvisionError as exc:
        engine = str(exc).split(":", 1)[0]
        known = engine in ENGINE_KINDS
        raise fail(engine if known else "stack", f"provisioning failed: {exc}",
                   log_path((engine if known else "kafka") + ("-1" if PROFILE == "cluster" and engine != "s3" else ""))
                   ) from exc
    created, applied = done["topics_created"], done["migrations_applied"]
    assert isinstance(created, list) and isinstance(applied, list)
    print(f"stack: provisioned: {len(created)} topics created, {len(applied)} migrations applied, "
          f"bucket {'created' if done['bucket_created'] else 'present'}")


def cmd_fetch() -> None:
    t0 = time.monotonic()
    fetch_maven("kafka")
    fetch_maven("cassandra")
    fetch_versitygw()
    print(f"stack: engines fetched in {time.monotonic() - t0:.1f}s (cached in {rel(STACK)})")


def cmd_up() -> None:
    t0 = time.monotonic()
    cmd_fetch()
    for group in engines():
        started = [(e, start(e)) for e in group]  # a group boots in parallel, then is waited for
        for engine, proc in started:
            took = wait_ready(engine, proc)
            state = "started" if proc is not None else "already running"
            print(f"stack: {engine.name} {state}, ready on {engine.host}:{engine.port} after {took:.1f}s "
                  f"(log {rel(engine.log)})")
    provision()
    print(f"stack: up in {time.monotonic() - t0:.1f}s")


def stop_engine(engine: Engine) -> None:
    pid = engine.pid()
    if pid is None:
        engine.pid_file.unlink(missing_ok=True)
        print(f"stack: {engine.name} not running")
        return
    os.killpg(pid, signal.SIGCONT)  # a paused engine cannot act on SIGTERM
    os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and engine.pid() is not None:
        time.sleep(0.3)
    if engine.pid() is not None:
        os.killpg(pid, signal.SIGKILL)
    engine.pid_file.unlink(missing_ok=True)
    print(f"stack: {engine.name} stopped (pid {pid})")


def cmd_down() -> None:
    for engine in all_engines():
        stop_engine(engine)


def engines_of(kind: str) -> list[Engine]:
    """The profile's engines of one kind (every node of it in the cluster profile)."""
    return [e for e in all_engines() if e.kind == kind]


def cmd_restart(name: str) -> None:
    """Stop one engine (every node of it) and start it again with the same start logic and readiness probe
    as `up`: a fault test's restart leaves the stack as `up` would (its data, topics and schema are kept)."""
    t0 = time.monotonic()
    nodes = engines_of(name)
    for engine in nodes:
        stop_engine(engine)
    procs = [(engine, start(engine)) for engine in nodes]
    took = max(wait_ready(engine, proc) for engine, proc in procs)
    # "ready after Ns" is read by the fault tests (streamcrawl_launcher.faults.inject): keep its form.
    print(f"stack: {name} restarted, ready after {took:.1f}s ({time.monotonic() - t0:.1f}s in all)")


def cmd_signal(name: str, sig: signal.Signals) -> None:
    """SIGSTOP (pause) or SIGCONT (resume) the engine's process group (every node of it): a frozen engine
    keeps its sockets open and answers nothing, like a stalled JVM or a host that stopped scheduling it."""
    for engine in engines_of(name):
        pid = engine.pid()
        if pid is None:
            raise fail(name, "not running", engine.log)
        os.killpg(pid, sig)
        print(f"stack: {engine.name} {'paused' if sig == signal.SIGSTOP else 'resumed'} (pid {pid})")


def _stopped(pid: int) -> bool:
    """The process is stopped by a signal (`pause`): state T in /proc/<pid>/stat."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except (OSError, IndexError):
        return False


def cmd_status() -> int:
    bad = 0
    for engine in all_engines():
        pid = engine.pid()
        healthy = False
        if pid is not None:
            try:
                engine.ready()
                healthy = True
            except Exception:
                healthy = False
        bad += 0 if healthy else 1
        state = "healthy" if healthy else ("paused" if pid and _stopped(pid) else
                                           "running, not ready" if pid else "stopped")
        print(f"{engine.name:12s} {state:20s} pid={pid or '-':<8} {engine.host}:{engine.port:<6} log={engine.log}")
    return 1 if bad else 0


def cmd_reset() -> None:
    cmd_down()
    shutil.rmtree(DATA, ignore_errors=True)
    print("stack: data removed (downloads kept)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status", "fetch", "provision", "reset",
                                            "restart", "pause", "resume"])
    parser.add_argument("engine", nargs="?", choices=sorted(ENGINE_KINDS), help="for restart, pause and resume")
    args = parser.parse_args()
    per_engine = {"restart": cmd_restart, "pause": lambda n: cmd_signal(n, signal.SIGSTOP),
                  "resume": lambda n: cmd_signal(n, signal.SIGCONT)}
    if (args.command in per_engine) != (args.engine is not None):
        parser.error(f"{args.command}: {'an engine is required' if args.engine is None else 'takes no engine'}")
    try:
        if args.command == "status":
            return cmd_status()
        if args.engine is not None:
            per_engine[args.command](args.engine)
        else:
            {"up": cmd_up, "down": cmd_down, "fetch": cmd_fetch, "provision": provision,
             "reset": cmd_reset}[args.command]()
    except StackError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
