"""Test servers for the service unit tests: a tiny DNS server and a scripted HTTP server, both on
127.0.0.1 (nothing here touches the internet). The in-memory doubles of the project's own ports are in
streamcrawl_runtime.memory."""

from __future__ import annotations

import contextlib
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


class TinyDNS:
    """UDP DNS server in a thread: A and AAAA records from `records` (a name's value is an address or a
    list of them; IPv6 ones are its AAAA records); names in `servfail` → SERVFAIL, unknown names → NXDOMAIN,
    a known name without records of the asked type → NODATA."""

    def __init__(self, records: dict[str, str | list[str]], servfail: set[str] | None = None) -> None:
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
            elif name in self.records and q.rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
                value = self.records[name]
                six = q.rdtype == dns.rdatatype.AAAA
                ips = [ip for ip in ([value] if isinstance(value, str) else value) if (":" in ip) == six]
                if ips:
                    resp.answer.append(dns.rrset.from_text_list(q.name, 60, "IN", "AAAA" if six else "A", ips))
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
