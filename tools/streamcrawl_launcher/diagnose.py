"""A post-mortem of a crawl that did not go idle: for every streamcrawl-* consumer group, its members with
the partitions each holds and each partition's committed offset against the log end; and a py-spy dump of
every live service process, when py-spy is installed. Written as JSON beside the crawl's logs, so that a
lag that never drains (which no service logged) can be told apart: a partition assigned to nobody, to a
member that does not read it, or read by one whose records never finish."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from collections import Counter, deque
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec


def group_report(bootstrap: str, prefix: str = "streamcrawl-", timeout_s: float = 10.0) -> dict[str, Any]:
    """Members, assignments and per-partition lag (only partitions with lag) of every group with the prefix."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    listed = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout=timeout_s)
    groups = sorted(g.group_id for g in listed.valid if g.group_id.startswith(prefix))
    out: dict[str, Any] = {}
    if not groups:
        return out
    described = admin.describe_consumer_groups(groups, request_timeout=timeout_s)
    for group in groups:
        entry: dict[str, Any] = {}
        try:
            d = described[group].result(timeout=timeout_s)
            entry["state"] = str(d.state)
            entry["type"] = str(getattr(d, "type", ""))
            entry["members"] = [
                {"member_id": m.member_id, "client_id": m.client_id, "host": m.host,
                 "assigned": sorted(f"{tp.topic}[{tp.partition}]"
                                    for tp in (m.assignment.topic_partitions if m.assignment else []))}
                for m in d.members]
        except Exception as exc:  # a post-mortem reports what it can
            entry["describe_error"] = repr(exc)[:300]
        try:
            fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=timeout_s)
            committed = fut[group].result(timeout=timeout_s).topic_partitions or []
            ends = admin.list_offsets({TopicPartition(tp.topic, tp.partition): OffsetSpec.latest()  # type: ignore[no-untyped-call]
                                       for tp in committed},
                                      request_timeout=timeout_s) if committed else {}
            end_of = {(tp.topic, tp.partition): f.result(timeout=timeout_s).offset for tp, f in ends.items()}
            entry["lagging"] = {f"{tp.topic}[{tp.partition}]": {"committed": tp.offset,
                                                               "end": end_of.get((tp.topic, tp.partition))}
                                for tp in committed
                                if end_of.get((tp.topic, tp.partition), 0) > max(tp.offset, 0)}
        except Exception as exc:
            entry["offsets_error"] = repr(exc)[:300]
        out[group] = entry
    return out


def stack_dumps(pids: dict[str, int], timeout_s: float = 20.0) -> dict[str, str]:
    """py-spy's dump of each process's threads (empty when py-spy is not installed)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        return {}
    dumps = {}
    for name, pid in pids.items():
        try:
            done = subprocess.run([spy, "dump", "--pid", str(pid)], capture_output=True, text=True,
                                  timeout=timeout_s, check=False)
            dumps[name] = (done.stdout or done.stderr)[-20000:]
        except (OSError, subprocess.TimeoutExpired) as exc:
            dumps[name] = f"py-spy failed: {exc!r}"
    return dumps


def log_digest(log: Path, last: int = 4) -> dict[str, Any]:
    """A service log's warnings and errors (its JSON lines at level warning and up): how many of each
    message, and the last few in full, for a failure message that must stand alone."""
    counts: Counter[str] = Counter()
    tail: deque[str] = deque(maxlen=last)
    try:
        with log.open("rb") as fh:
            for raw in fh:
                if b'"level": "warning"' not in raw and b'"level": "error"' not in raw:
                    continue
                try:
                    entry = json.loads(raw)
                except ValueError:
                    continue
                msg = str(entry.get("msg", ""))[:80]
                counts[msg] += 1
                extra = {k: v for k, v in entry.items() if k not in {"ts", "level", "msg", "service", "logger"}}
                tail.append(f"{msg} {json.dumps(extra, default=str)[:240]}")
    except OSError as exc:
        return {"error": repr(exc)[:200]}
    return {"counts": dict(counts.most_common(8)), "last": list(tail)}


def main_thread_top(dump: str, frames: int = 6) -> str:
    """The first frames of a py-spy dump's main thread: where the service's loop was."""
    lines = dump.splitlines()
    for i, line in enumerate(lines):
        if "MainThread" in line:
            return " < ".join(x.strip() for x in lines[i + 1:i + 1 + frames] if x.strip())
    return ""


def write_post_mortem(path: Path, bootstrap: str, pids: dict[str, int], logs: Path | None = None) -> None:
    """Everything above in one JSON file; never raises (it runs on the way to reporting a failure)."""
    report: dict[str, Any] = {}
    try:
        report["groups"] = group_report(bootstrap)
    except Exception as exc:
        report["groups_error"] = repr(exc)[:300]
    report["stacks"] = stack_dumps(pids)
    if logs is not None:
        report["warnings"] = {name: log_digest(logs / f"{name}.log") for name in pids}
    with contextlib.suppress(OSError):
        path.write_text(json.dumps(report, indent=1, default=str))


def lagging_summary(path: Path, limit: int = 12) -> str:
    """One line from a post-mortem file: each group's lagging partitions (committed/end) and members, for a
    failure message that must stand alone (CI shows the output, not the files)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"no post-mortem ({exc})"
    if "groups_error" in report:
        return f"post-mortem: {report['groups_error']}"
    parts = []
    for group, entry in sorted(report.get("groups", {}).items()):
        lagging = entry.get("lagging", {})
        shown = ", ".join(f"{tp} {v.get('committed')}/{v.get('end')}" for tp, v in list(lagging.items())[:limit])
        err = entry.get("describe_error") or entry.get("offsets_error") or ""
        parts.append(f"{group}: {entry.get('state', '?')}, {len(entry.get('members', []))} members, "
                     f"{len(lagging)} lagging{': ' + shown if shown else ''}{' ' + err if err else ''}")
        service = group.removeprefix("streamcrawl-")
        if lagging:  # what the lagging service's instances (parser, parser-2, ...) said, and where their loops were
            names = sorted({*report.get("warnings", {}), *report.get("stacks", {})})
            for name in [n for n in names if n == service or n.startswith(service + "-")]:
                digest = report.get("warnings", {}).get(name)
                if digest:
                    parts.append(f"{name} warnings {digest.get('counts', digest.get('error'))}, "
                                 f"last: {digest.get('last', [])}")
                top = main_thread_top(report.get("stacks", {}).get(name, ""))
                if top:
                    parts.append(f"{name} main thread: {top}")
    return "post-mortem: " + ("; ".join(parts) if parts else "no streamcrawl groups")
