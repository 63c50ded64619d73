"""The synthetic web's request log (JSON lines) and the politeness checker that judges a crawl from it.

One line per HTTP request the server answered (robots.txt included)::

    {"host": "h0003.synth.test", "ip": "127.10.0.3", "port": 8480, "client": "127.0.0.1",
     "method": "GET", "path": "/p/1.html?x=1", "status": 200, "start": 1767225600.123,
     "end": 1767225600.125, "bytes": 2345, "ua": "streamcrawl/0.1", "if_none_match": null,
     "if_modified_since": null, "aborted": false, "last_write": 1767225600.1249}

``start`` is when the request head had been parsed, ``end`` when the last body byte had been handed to
the socket (``time.time()`` seconds). ``last_write`` is stamped just before that last hand-over, so the
response left the server between ``last_write`` and ``end``; the two are microseconds apart unless the
kernel held the server in between (it shares the machine with the crawler it judges). ``bytes`` counts
body bytes as sent (after compression). ``aborted`` means the client went away before the response was
complete (``last_write`` is then null).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

__all__ = ["LogEntry", "RequestLog", "Violation", "judged_gaps", "load_log", "politeness_violations", "server_holds"]


@dataclass(frozen=True)
class LogEntry:
    host: str
    ip: str
    port: int
    client: str
    method: str
    path: str
    status: int
    start: float
    end: float
    bytes: int
    ua: str
    if_none_match: str | None = None
    if_modified_since: str | None = None
    aborted: bool = False
    last_write: float | None = None

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def sent(self) -> float:
        """The earliest time the last byte can have left: ``last_write`` when stamped, else ``end``."""
        return self.end if self.last_write is None else min(self.last_write, self.end)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))


class RequestLog:
    """Buffered JSON-lines writer, flushed every ``flush_interval_s`` and on close.

    Writes are synchronous appends to a buffered file (cheap); flushing on a timer keeps the file
    close to live for an external judge without a syscall per request."""

    def __init__(self, path: str | Path | None, flush_interval_s: float = 0.5) -> None:
        self.path = Path(path) if path is not None else None
        self.entries_written = 0
        self._fh: IO[str] | None = None
        self._interval = flush_interval_s
        self._task: asyncio.Task[None] | None = None
        self.memory: list[LogEntry] | None = None if path is not None else []

    def open(self) -> None:
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        self._task = asyncio.get_running_loop().create_task(self._flusher())

    def write(self, entry: LogEntry) -> None:
        self.entries_written += 1
        if self._fh is not None:
            self._fh.write(entry.to_json() + "\n")
        elif self.memory is not None:
            self.memory.append(entry)

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            self.flush()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._fh is not None:
            self._fh.flush()
            self._fh.close()
            self._fh = None


def load_log(path: str | Path) -> list[LogEntry]:
    """Read a request log; a torn last line (server killed mid-write) is skipped."""
    fields = set(LogEntry.__dataclass_fields__)
    out = []
    with Path(path).open(encoding="utf-8") as fh:
        for line in fh:
            try:
                raw: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                continue
            out.append(LogEntry(**{k: v for k, v in raw.items() if k in fields}))
    return out


@dataclass(frozen=True)
class Violation:
    """``kind`` is "overlap" (a request began before the previous one to the host ended) or
    "short_gap" (``gap`` = start - previous end was below ``required`` minus the tolerance)."""

    host: str
    kind: str
    previous: LogEntry
    entry: LogEntry
    gap: float
    required: float


def judged_gaps(
    entries: Iterable[LogEntry],
    min_delay_s: float = 1.0,
    factor: float = 10.0,
    crawl_delays: Mapping[str, float] | None = None,
) -> Iterator[tuple[str, LogEntry, LogEntry, float, float]]:
    """Per host, in start order: (host, previous, entry, gap, required) for every request after the
    first, where the required gap after a request is max(min_delay_s, factor x its duration,
    crawl_delays[host]). robots.txt fetches count as requests. "Previous" is the earlier request that
    ended last, so a long request cannot hide an overlap.

    The previous response ended somewhere between its ``last_write`` and ``end`` stamps; gap and duration
    are read at the earliest of them (``LogEntry.sent``), which is when the crawler can first have seen
    it. The two stamps normally differ by microseconds; when the kernel held the server between them, the
    later one would charge the crawler for the hold twice (a later end and, through the 10x rule, a
    longer exchange)."""
    delays = crawl_delays or {}
    by_host: dict[str, list[LogEntry]] = {}
    for e in entries:
        by_host.setdefault(e.host, []).append(e)
    for host, items in sorted(by_host.items()):
        items.sort(key=lambda e: (e.start, e.end))
        prev: LogEntry | None = None
        for e in items:
            if prev is not None:
                required = max(min_delay_s, factor * (prev.sent - prev.start), delays.get(host, 0.0))
                yield host, prev, e, e.start - prev.sent, required
            if prev is None or e.end >= prev.end:
                prev = e


def politeness_violations(
    entries: Iterable[LogEntry],
    min_delay_s: float = 1.0,
    factor: float = 10.0,
    crawl_delays: Mapping[str, float] | None = None,
    tolerance_s: float = 0.05,
) -> list[Violation]:
    """The gaps of ``judged_gaps`` that break the rule: an overlap, or a gap below the required one minus
    ``tolerance_s``."""
    out: list[Violation] = []
    for host, prev, e, gap, required in judged_gaps(entries, min_delay_s, factor, crawl_delays):
        if gap < 0:
            out.append(Violation(host, "overlap", prev, e, gap, required))
        elif gap < required - tolerance_s:
            out.append(Violation(host, "short_gap", prev, e, gap, required))
    return out


def server_holds(entries: Iterable[LogEntry]) -> list[float]:
    """``end - last_write`` of every completed response, largest first: how long the server was held
    between handing over a response's last bytes and stamping its end (a check on the judge itself)."""
    return sorted((e.end - e.last_write for e in entries if e.last_write is not None), reverse=True)
