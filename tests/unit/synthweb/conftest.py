"""Fixtures: a live synthetic web (HTTP + DNS) on loopback, run on its own event loop in a thread."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import socket
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any

import dns.resolver
import httpx
import pytest
from streamcrawl_synthweb import RequestLog, SynthWeb, generate
from streamcrawl_synthweb.dns import SynthDNS
from streamcrawl_synthweb.model import PROFILES, Host
from streamcrawl_synthweb.server import SynthServer

N_HOSTS = 30  # enough for one host of every special kind
TEST_PROFILE = dataclasses.replace(PROFILES["fast"], robots_timeout_s=1.5, change_period_s=1.0)


def free_port(rng: random.Random | None = None) -> int:
    """A port below the kernel's ephemeral range (32768-60999 here), probed on the first synthetic address.
    The server then binds it on every synthetic address and on 127.0.0.1: a port the kernel hands out to
    outgoing connections (a crawl or a Kafka client running beside the tests) could be taken there."""
    while True:
        port = (rng or random).randrange(11000, 16000)
        with socket.socket() as s:
            try:
                s.bind(("127.10.0.1", port))
            except OSError:
                continue
            return port


class LiveWeb:
    def __init__(self, web: SynthWeb, log_path: Path) -> None:
        self.web = web
        self.log_path = log_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.dns = SynthDNS(web, "127.0.0.1", 0, ttl=30)
        self.http = SynthServer(web, RequestLog(log_path, flush_interval_s=0.1))
        self.resolver = dns.resolver.Resolver(configure=False)

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float = 15) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self) -> None:
        self.thread.start()
        self._call(self.dns.start())
        self._call(self.http.start())
        self.resolver.nameservers = ["127.0.0.1"]
        self.resolver.port = self.dns.port
        self.resolver.lifetime = 2.0

    def stop(self) -> None:
        self._call(self.http.stop())
        self._call(self.dns.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    def flush_log(self) -> None:
        self.loop.call_soon_threadsafe(self.http.log.flush)
        self._call(asyncio.sleep(0.05))

    def host(self, kind: str) -> Host:
        return self.web.hosts_of_kind(kind)[0]

    def ip_of(self, host: Host) -> str:
        return str(self.resolver.resolve(host.name, "A")[0].address)

    def url(self, host: Host, path: str) -> str:
        # Connect to the address DNS gives, name the host in the Host header (as a crawler does).
        return f"http://{self.ip_of(host)}:{self.web.port}{path}"

    def get(
        self, kind: str, path: str, headers: dict[str, str] | None = None, method: str = "GET", **kw: Any
    ) -> httpx.Response:
        host = self.host(kind)
        sent = {"Host": f"{host.name}:{self.web.port}", "User-Agent": "streamcrawl-test/1.0", **(headers or {})}
        kw.setdefault("timeout", 5)
        return httpx.request(method, self.url(host, path), headers=sent, **kw)


@pytest.fixture(scope="package")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveWeb]:
    rng = random.Random()
    for attempt in range(20):  # another process may take the port between the probe and the bind
        web = generate(N_HOSTS, seed=11, profile=TEST_PROFILE, port=free_port(rng))
        running = LiveWeb(web, tmp_path_factory.mktemp("synthweb") / "requests.jsonl")
        try:
            running.start()
            break
        except OSError:
            running.stop()
            if attempt == 19:
                raise
    try:
        yield running
    finally:
        running.stop()
