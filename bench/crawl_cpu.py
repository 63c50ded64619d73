"""CPU and counters of the processes a crawl benchmark watches (``bench/crawl_bench.py``, ``bench/idle_cost.py``).

* CPU seconds from ``/proc/<pid>/stat`` (utime + stime, + waited-for children), per named process, and
  the whole machine's busy time from ``/proc/stat``;
* the local stack's engine pids (Kafka, Cassandra, versitygw) from ``.stack/run/*.pid``;
* each service's own counters from its ``/metrics`` endpoint: records produced and consumed per topic
  (``streamcrawl_outputs_total``, ``streamcrawl_messages_total``) and CQL statements per table and verb
  (``streamcrawl_cql_statements_total``), so a table can say how many of each one page costs.
"""

from __future__ import annotations

import os
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INFRA_PIDFILES = {"kafka": "kafka.pid", "cassandra": "cassandra.pid", "versitygw": "s3.pid"}
#: The 3-node profile's pid files (stack/stack_cluster.py): one per Kafka and Cassandra node.
CLUSTER_PIDFILES = {f"{engine}-{i}": f"{engine}-{i}.pid" for engine in ("kafka", "cassandra") for i in (1, 2, 3)}
CLK_TCK = os.sysconf("SC_CLK_TCK")
#: Each service's default metrics port (its settings class's DEFAULT_METRICS_PORT).
METRICS_PORTS = {"frontier": 9101, "fetcher": 9102, "parser": 9103, "dedup": 9104, "recrawl": 9105}


def stack_run_dir() -> Path:
    """Where the stack's pid files are: ``$STREAMCRAWL_STACK_DIR/run`` (the shared stack) or ``.stack/run``."""
    stack = os.environ.get("STREAMCRAWL_STACK_DIR")
    return (Path(stack) if stack else ROOT / ".stack") / "run"


def parse_proc_stat(text: str, children: bool = True) -> float:
    """CPU seconds from one ``/proc/<pid>/stat`` line: utime + stime (+ cutime + cstime).

    The command name (field 2) may contain spaces and parentheses, so fields are counted from the
    last ``)``: after it come state (field 3) ... utime (14), stime (15), cutime (16), cstime (17)."""
    rest = text[text.rindex(")") + 2 :].split()
    ticks = int(rest[11]) + int(rest[12])
    if children:
        ticks += int(rest[13]) + int(rest[14])
    return ticks / CLK_TCK


def cpu_seconds(pid: int, children: bool = True) -> float | None:
    """CPU seconds used so far by ``pid`` (None when the process is gone or unreadable)."""
    try:
        return parse_proc_stat(Path(f"/proc/{pid}/stat").read_text(), children)
    except (OSError, ValueError, IndexError):
        return None


def self_cpu_s() -> float:
    """This process's own CPU seconds (the bench, standing in for a launcher)."""
    t = os.times()
    return t.user + t.system


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process's live threads by kind: its main thread (the event loop), librdkafka's
    threads (named ``rdk:*``), and the rest (worker threads, the Cassandra driver's I/O threads, ...). py-spy
    samples only Python stacks, so this is how the Kafka client's native threads are seen at all."""
    out = {"main": 0.0, "librdkafka": 0.0, "other": 0.0}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            comm = (task / "comm").read_text().strip()
            used = parse_proc_stat((task / "stat").read_text(), children=False)
        except (OSError, ValueError, IndexError):
            continue  # the thread ended meanwhile
        kind = "main" if task.name == str(pid) else ("librdkafka" if comm.startswith("rdk:") else "other")
        out[kind] += used
    return out


def sample_threads(pids: Mapping[str, int]) -> dict[str, dict[str, float]]:
    return {name: thread_cpu(pid) for name, pid in pids.items()}


def threads_delta(before: Mapping[str, Mapping[str, float]], after: Mapping[str, Mapping[str, float]],
                  totals: Mapping[str, float]) -> dict[str, dict[str, float]]:
    """Per process: main and librdkafka thread CPU in the window, and the rest of its CPU (other threads,
    including ones that ended in the window) as the difference to its total."""
    out: dict[str, dict[str, float]] = {}
    for name, total in totals.items():
        b, a = before.get(name, {}), after.get(name, {})
        main = a.get("main", 0.0) - b.get("main", 0.0)
        rdk = a.get("librdkafka", 0.0) - b.get("librdkafka", 0.0)
        out[name] = {"main": main, "librdkafka": rdk, "other": max(0.0, total - main - rdk)}
    return out


def sample_cpu(pids: Mapping[str, int]) -> dict[str, float | None]:
    return {name: cpu_seconds(pid) for name, pid in pids.items()}


def cpu_delta(before: Mapping[str, float | None], after: Mapping[str, float | None]) -> dict[str, float]:
    """Per-name CPU seconds between two samples; names missing from either sample are left out."""
    out: dict[str, float] = {}
    for name, b in before.items():
        a = after.get(name)
        if a is not None and b is not None:
            out[name] = a - b
    return out


def machine_busy_s() -> float:
    """CPU seconds all cores have spent not idle (``/proc/stat``: total - idle - iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / CLK_TCK


def read_pidfile(path: Path) -> int | None:
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if cpu_seconds(pid) is not None else None


def infra_pids(run_dir: Path | None = None) -> dict[str, int]:
    """The local stack's Kafka, Cassandra and versitygw pids (only those alive); on the 3-node profile
    every node's (``kafka-1`` ... ``cassandra-3``)."""
    run_dir = stack_run_dir() if run_dir is None else run_dir
    out = {}
    for name, fname in {**INFRA_PIDFILES, **CLUSTER_PIDFILES}.items():
        pid = read_pidfile(run_dir / fname)
        if pid is not None:
            out[name] = pid
    return out


def settle(pids: Mapping[str, int], min_s: float = 3.0, timeout_s: float = 60.0, idle_cpu: float = 0.25,
           alive: Callable[[], None] | None = None) -> float:
    """Wait until the processes' start-up is over: at least ``min_s``, then until one second passes in
    which they use < ``idle_cpu`` CPU seconds together (or ``timeout_s``). Returns the seconds waited."""
    start = time.time()
    prev = sample_cpu(pids)
    while True:
        time.sleep(1.0)
        if alive is not None:
            alive()
        cur = sample_cpu(pids)
        used = sum(cpu_delta(prev, cur).values())
        prev = cur
        waited = time.time() - start
        if (waited >= min_s and used < idle_cpu) or waited >= timeout_s:
            return waited


# ---------------------------------------------------------------------------------------------- /metrics

#: (metric, label whose value names the row) → what the counters are called in the tables.
COUNTERS = {
    "streamcrawl_outputs_total": ("produced", "topic"),
    "streamcrawl_messages_total": ("consumed", "topic"),
    "streamcrawl_cql_statements_total": ("cql", "table"),
    "streamcrawl_cql_requests_total": ("cqlreq", "kind"),
}

Counts = dict[tuple[str, str], float]  # (kind, "row label") → value, summed over the services


def parse_metrics(text: str) -> Counts:
    """The counters of COUNTERS from a Prometheus text exposition, summed by (kind, row). CQL rows are
    "table op" (``url_state insert``); consumed rows count every outcome (ok, retry, dead letter)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Counts = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            spec = COUNTERS.get(sample.name)
            if spec is None:
                continue
            kind, label = spec
            row = sample.labels.get(label, "?")
            if kind == "cql":
                row = f"{row} {sample.labels.get('op', '?')}"
            out[(kind, row)] = out.get((kind, row), 0.0) + sample.value
    return out


def scrape(ports: Mapping[str, int] = METRICS_PORTS, timeout_s: float = 3.0) -> dict[str, Counts]:
    """Each service's counters (a service that does not answer is left out)."""
    out: dict[str, Counts] = {}
    for name, port in ports.items():
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as resp:
                out[name] = parse_metrics(resp.read().decode())
        except (OSError, ValueError):
            continue
    return out


def counts_delta(before: Mapping[str, Counts], after: Mapping[str, Counts]) -> dict[str, Counts]:
    """Per service, what each counter grew by between the two scrapes."""
    out: dict[str, Counts] = {}
    for svc, counts in after.items():
        prev = before.get(svc, {})
        out[svc] = {k: v - prev.get(k, 0.0) for k, v in counts.items() if v - prev.get(k, 0.0) > 0}
    return out
