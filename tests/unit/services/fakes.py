"""Test doubles for the service unit tests: an in-memory CrawlState, a tiny DNS server and a scripted
HTTP server, all on 127.0.0.1 (nothing here touches the internet)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
from streamcrawl_core.traps import SOFT404_PROBE_PREFIX
from streamcrawl_runtime.crawl_state import (  # the adapter's own block layout
    DueRow,
    HostOverrideRow,
    HostState,
    LeaseRow,
    QueuedUrl,
    UrlState,
    _candidate_keys,
    _signed,
    _u16_blocks,
)


def _ms(epoch: float | None) -> float | None:
    """Cassandra `timestamp` keeps milliseconds: what a value reads back as."""
    return None if epoch is None else math.floor(epoch * 1000.0) / 1000.0


class FakeCrawlState:
    """CrawlState in dicts, with Cassandra's semantics where they matter: writes are upserts of the
    named columns only, timestamps keep milliseconds, url_get returns a copy (a read, not a live
    reference), content_claim is first-claimer-wins. `calls` logs every write, in order."""

    def __init__(self) -> None:
        self.hosts: dict[str, HostState] = {}
        self.fetched_leases: dict[str, str] = {}  # host → host_state.fetched_lease
        self.started_leases: dict[str, tuple[str, float]] = {}  # host → (started_lease, started_at)
        self.urls: dict[tuple[str, int], UrlState] = {}
        self.robots_writes = 0
        self.queue: dict[tuple[int, str, int], QueuedUrl] = {}
        self.content: dict[str, str] = {}  # content_hash -> canonical url
        # (block, value) -> {(signed fp, url)}: the table's clustering key, so a URL keeps a row per fingerprint
        self.simhash_blocks: dict[tuple[int, int], dict[tuple[int, str], None]] = {}
        self.due: dict[tuple[float, str, int], str] = {}  # (next_visit_at, host, url_fp) -> url
        self.due_depth: dict[tuple[float, str, int], int] = {}
        self.overrides: dict[str, HostOverrideRow] = {}
        self.blocklist: list[str] = []
        self.calls: list[tuple[Any, ...]] = []
        self.host_reads: list[str] = []  # host_get calls, in order

    async def host_get(self, host: str) -> HostState | None:
        self.host_reads.append(host)
        return self.hosts.get(host)

    async def host_put_robots(self, host: str, status: int | None, body: str | None, fetched_at: float,
                              crawl_delay_s: float | None) -> None:
        hs = self.hosts.setdefault(host, HostState(host))
        hs.robots_status, hs.robots_body, hs.robots_fetched_at = status, body, fetched_at
        hs.crawl_delay_s = crawl_delay_s
        hs.soft404_signature = None  # like the CQL statement: new rules start a new probe lifetime
        self.robots_writes += 1

    async def host_put_soft404(self, host: str, signature: str) -> None:
        self.calls.append(("host_put_soft404", host, signature))
        self.hosts.setdefault(host, HostState(host)).soft404_signature = signature

    async def url_get(self, host: str, url_fp: int) -> UrlState | None:
        st = self.urls.get((host, url_fp))
        return None if st is None else dataclasses.replace(st, extra=dict(st.extra))

    # ---------------------------------------------------------------- frontier_queue
    async def queue_put(self, item: QueuedUrl) -> None:
        self.calls.append(("queue_put", item.host, item.url))
        self.queue[(item.part, item.host, item.url_fp)] = dataclasses.replace(
            item, not_before=_ms(item.not_before) or 0.0, enqueued_at=_ms(item.enqueued_at) or 0.0)

    async def queue_delete(self, part: int, host: str, url_fp: int) -> None:
        self.calls.append(("queue_delete", host, url_fp))
        self.queue.pop((part, host, url_fp), None)

    async def queue_finish(self, part: int, host: str, url_fp: int, now: float) -> None:
        self.calls.append(("queue_finish", host, url_fp))
        self._finish(part, host, url_fp, now)

    def _finish(self, part: int, host: str, url_fp: int, now: float) -> None:
        self.queue.pop((part, host, url_fp), None)
        row = self.urls.get((host, url_fp))
        if row is not None:  # like the CQL UPDATE, which would create the row: only mark known URLs here
            row.frontier_done_at = _ms(now)

    async def queue_load(self, part: int) -> list[QueuedUrl]:
        return [dataclasses.replace(q) for (p, _, _), q in self.queue.items() if p == part]

    # ---------------------------------------------------------------- host_state
    async def host_put_politeness(self, host: str, next_allowed_at: float, backoff_level: int,
                                  last_fetch_ms: float | None, crawl_delay_s: float | None) -> None:
        self.calls.append(("host_put_politeness", host, next_allowed_at, backoff_level))
        self._politeness(host, next_allowed_at, backoff_level, last_fetch_ms, crawl_delay_s)

    async def host_politeness_and_finish(self, host: str, next_allowed_at: float, backoff_level: int,
                                         last_fetch_ms: float | None, crawl_delay_s: float | None,
                                         part: int, url_fp: int, now: float) -> None:
        self.calls.append(("host_politeness_and_finish", host, next_allowed_at, backoff_level, url_fp))  # one request
        self._politeness(host, next_allowed_at, backoff_level, last_fetch_ms, crawl_delay_s)
        self._finish(part, host, url_fp, now)

    def _politeness(self, host: str, next_allowed_at: float, backoff_level: int, last_fetch_ms: float | None,
                    crawl_delay_s: float | None) -> None:
        hs = self.hosts.setdefault(host, HostState(host))
        hs.next_allowed_at, hs.backoff_level = _ms(next_allowed_at), backoff_level
        hs.last_fetch_ms, hs.crawl_delay_s = last_fetch_ms, crawl_delay_s
        hs.lease_id = hs.lease_url = None  # like the CQL statement: a finished fetch ends the lease
        hs.lease_expires_at = None

    async def host_put_lease(self, host: str, lease_id: str | None, url: str | None,
                             expires_at: float | None) -> None:
        self.calls.append(("host_put_lease", host, lease_id, url, expires_at))
        hs = self.hosts.setdefault(host, HostState(host))
        hs.lease_id, hs.lease_url, hs.lease_expires_at = lease_id, url, _ms(expires_at)

    async def host_put_budget(self, host: str, cycle: int, urls_this_cycle: int) -> None:
        self.calls.append(("host_put_budget", host, cycle, urls_this_cycle))
        hs = self.hosts.setdefault(host, HostState(host))
        hs.cycle, hs.urls_this_cycle = cycle, urls_this_cycle

    # ---------------------------------------------------------------- url_state
    def _url(self, host: str, url_fp: int, url: str) -> UrlState:
        return self.urls.setdefault((host, url_fp), UrlState(host, url_fp, url))

    async def url_insert_discovered(self, host: str, url_fp: int, url: str, depth: int, now: float,
                                    event_id: str = "") -> None:
        self.calls.append(("url_insert_discovered", host, url))
        st = self._url(host, url_fp, url)
        st.url, st.depth, st.status, st.discovered_at = url, depth, "queued", _ms(now)
        st.discovered_by = event_id or None

    async def url_insert_discovered_many(self, host: str, urls: list[tuple[int, str]], depth: int, now: float,
                                         event_id: str = "") -> None:
        self.calls.append(("url_insert_discovered_many", host, len(urls)))
        for fp, url in urls:
            await self.url_insert_discovered(host, fp, url, depth, now, event_id)

    async def url_put_fetch(self, st: UrlState) -> None:
        self.calls.append(("url_put_fetch", st.host, st.url, st.status))
        self._put_fetch(st)

    async def url_put_fetch_and_simhash(self, st: UrlState) -> None:
        self.calls.append(("url_put_fetch_and_simhash", st.host, st.url, st.status))  # one request
        assert st.simhash is not None
        self._put_fetch(st)
        self._put_simhash(st.simhash, st.url)

    def _put_fetch(self, st: UrlState) -> None:
        row = self._url(st.host, st.url_fp, st.url)
        for name in ("url", "depth", "status", "http_status", "content_type", "content_hash", "simhash",
                     "storage_key", "etag", "last_modified", "fetch_count", "canonical_url"):
            setattr(row, name, getattr(st, name))
        row.fetched_at = _ms(st.fetched_at)

    async def url_put_schedule_and_due(self, host: str, url_fp: int, url: str, depth: int, interval_s: float,
                                       next_visit_at: float, change_count: int, last_changed_at: float | None,
                                       sched_hash: str | None) -> None:
        self.calls.append(("url_put_schedule_and_due", next_visit_at, host, url_fp, interval_s))  # one request
        row = self.urls.setdefault((host, url_fp), UrlState(host, url_fp, ""))
        row.change_interval_s, row.next_visit_at = interval_s, _ms(next_visit_at)
        row.change_count, row.last_changed_at, row.sched_hash = change_count, _ms(last_changed_at), sched_hash
        self._due(next_visit_at, host, url_fp, url, depth)

    # ---------------------------------------------------------------- content dedup
    async def content_claim(self, content_hash: str, url: str, storage_key: str, now: float) -> str:
        return self.content.setdefault(content_hash, url)

    async def simhash_candidates(self, simhash: int) -> list[tuple[int, str]]:
        # Like the CQL read (block IN ? AND value IN ?): the cartesian product of the IN lists, a superset.
        blocks, values = _candidate_keys(simhash)
        found: dict[tuple[int, str], None] = {}
        for b in blocks:
            for v in values:
                found.update(self.simhash_blocks.get((b, v), {}))
        return list(found)

    async def simhash_add(self, simhash: int, url: str) -> None:
        self.calls.append(("simhash_add", simhash, url))
        self._put_simhash(simhash, url)

    def _put_simhash(self, simhash: int, url: str) -> None:
        for key in _u16_blocks(simhash):
            self.simhash_blocks.setdefault(key, {})[(_signed(simhash), url)] = None

    # ---------------------------------------------------------------- due index
    async def due_put(self, next_visit_at: float, host: str, url_fp: int, url: str, depth: int = 0) -> None:
        self.calls.append(("due_put", next_visit_at, host, url_fp))
        self._due(next_visit_at, host, url_fp, url, depth)

    def _due(self, next_visit_at: float, host: str, url_fp: int, url: str, depth: int) -> None:
        self.due[(_ms(next_visit_at) or 0.0, host, url_fp)] = url
        self.due_depth[(_ms(next_visit_at) or 0.0, host, url_fp)] = depth

    async def due_range(self, start: float, end: float, limit: int) -> list[DueRow]:
        rows = sorted(DueRow(t, h, fp, url, self.due_depth.get((t, h, fp), 0))
                      for (t, h, fp), url in self.due.items() if start <= t <= end)
        return rows[:limit]

    async def due_delete(self, next_visit_at: float, host: str, url_fp: int) -> None:
        self.calls.append(("due_delete", next_visit_at, host, url_fp))
        self.due.pop((_ms(next_visit_at) or 0.0, host, url_fp), None)

    # ---------------------------------------------------------------- control plane
    async def host_lease(self, host: str) -> LeaseRow:
        hs = self.hosts.get(host)
        started_lease, started_at = self.started_leases.get(host, (None, None))
        return LeaseRow(hs.lease_id if hs else None, self.fetched_leases.get(host), started_lease,
                        _ms(started_at))

    async def host_put_fetched_lease(self, host: str, lease_id: str) -> None:
        self.calls.append(("host_put_fetched_lease", host, lease_id))
        self.fetched_leases[host] = lease_id

    async def host_put_started_lease(self, host: str, lease_id: str, started_at: float) -> None:
        self.calls.append(("host_put_started_lease", host, lease_id))
        self.started_leases[host] = (lease_id, started_at)

    async def host_overrides(self) -> dict[str, HostOverrideRow]:
        return dict(self.overrides)

    async def blocklist_patterns(self) -> list[str]:
        return list(self.blocklist)


class TinyDNS:
    """UDP DNS server in a thread: A records from `records`; names in `nxdomain` → NXDOMAIN,
    in `servfail` → SERVFAIL, anything else → NXDOMAIN."""

    def __init__(self, records: dict[str, str], servfail: set[str] | None = None) -> None:
        self.records = records
        self.servfail = servfail or set()
        self.queries: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            try:
                data, addr = self.sock.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            query = dns.message.from_wire(data)
            resp = dns.message.make_response(query)
            resp.flags |= dns.flags.AA
            q = query.question[0]
            name = q.name.to_text(omit_final_dot=True).lower()
            self.queries.append(name)
            if name in self.servfail:
                resp.set_rcode(dns.rcode.SERVFAIL)
            elif name in self.records and q.rdtype == dns.rdatatype.A:
                resp.answer.append(dns.rrset.from_text(q.name, 60, "IN", "A", self.records[name]))
            elif name not in self.records:
                resp.set_rcode(dns.rcode.NXDOMAIN)
            self.sock.sendto(resp.to_wire(), addr)

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


Route = Reply | Callable[[dict[str, str]], Reply]


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    at: float = 0.0  # when the server read the request (time.time())


class ScriptedHTTP:
    """HTTP/1.1 server in threads; `routes[path]` is a Reply or a function of the request headers; other
    paths get `default(path)` if set (a catch-all, e.g. a soft-404 host), else a 404."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.default: Callable[[str], Reply] | None = None
        self.seen: list[Seen] = []
        owner = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.seen.append(Seen(self.path, headers, time.time()))
                route = owner.routes.get(self.path)
                if route is None:
                    route = owner.default(self.path) if owner.default else Reply(404, b"not found")
                reply = route(headers) if callable(route) else route
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client stopped reading (body cap)
                    self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1},
                                        daemon=True)
        self._thread.start()

    def pages(self) -> list[str]:
        """Requested paths other than robots.txt and the fetcher's soft-404 probes."""
        return [s.path for s in self.seen if s.path != "/robots.txt" and not s.path.startswith(SOFT404_PROBE_PREFIX)]

    def probes(self) -> list[str]:
        return [s.path for s in self.seen if s.path.startswith(SOFT404_PROBE_PREFIX)]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
