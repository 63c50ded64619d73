"""Client CPU per GET through the fetcher's HttpFetcher, by the transport under httpx.

    .venv/bin/python bench/fetch_cost.py --requests 2000 --hosts 200 --in-flight 32 --repeats 3

Why: py-spy put httpx/httpcore (anyio cancel scopes, h11, the connection pool) at about half of the
fetcher's CPU. This measures what one page request costs this process (user + system CPU, all threads,
``getrusage(RUSAGE_SELF)``) through ``HttpFetcher.get`` (resolver cache, request building, the transport,
decoding, the body cap), against the synthetic web (``streamcrawl-synthweb``) run as a separate
process, so the server's CPU is not counted. Modes:

- ``httpcore``: the fetcher's former transport, httpx's own (httpcore) pools sharded by origin
  (``ShardedTransport`` below, kept here verbatim as the baseline);
- ``aiohttp``: ``streamcrawl_fetcher.fetch.AiohttpTransport``, httpx over one aiohttp pool (the fetcher's
  transport since this benchmark);
- ``httpx-aiohttp``: the ``httpx_aiohttp`` package's transport, with a cookie-less session; only when the
  package is importable (it is not a dependency: it is measured for comparison).

Each request is a GET of an HTML page (status 200; brotli, as the server picks for "gzip, br") on one of
``--hosts`` ordinary hosts, taken round-robin so consecutive requests go to different hosts, with
``--in-flight`` requests at a time. Before each measured run one request per host opens the connections
(not counted). Modes interleave, ``--repeats`` times; the table gives medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx
from streamcrawl_fetcher.dns import Resolver, parse_networks
from streamcrawl_fetcher.fetch import AiohttpTransport, HttpFetcher
from streamcrawl_fetcher.settings import DEFAULT_USER_AGENT, FetcherSettings
from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.model import DOMAIN

SEED = 7
PROFILE = "default"


class ShardedTransport:
    """The fetcher's transport before AiohttpTransport (services/streamcrawl_fetcher/fetch.py, verbatim)."""

    def __init__(self, max_connections: int, verify_tls: bool = True, shards: int = 64) -> None:
        per_shard = max(4, max_connections // shards)
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=max(2, per_shard // 2),
                              keepalive_expiry=15.0)
        ctx = httpx.create_ssl_context(verify=verify_tls)
        self.shards = [httpx.AsyncHTTPTransport(verify=ctx, trust_env=False, limits=limits, retries=0)
                       for _ in range(shards)]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        origin = (request.url.host, request.url.port)
        return await self.shards[hash(origin) % len(self.shards)].handle_async_request(request)

    async def aclose(self) -> None:
        for shard in self.shards:
            await shard.aclose()


def _httpx_aiohttp(max_connections: int) -> Any:
    from httpx_aiohttp import AiohttpTransport as PackageTransport

    def session() -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=max_connections, keepalive_timeout=15.0, use_dns_cache=False)
        return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar())

    return PackageTransport(trust_env=False, client=session)


def transports() -> dict[str, Callable[[int], Any]]:
    modes: dict[str, Callable[[int], Any]] = {"httpcore": ShardedTransport, "aiohttp": AiohttpTransport}
    try:
        import httpx_aiohttp  # noqa: F401
    except ImportError:
        pass
    else:
        modes["httpx-aiohttp"] = _httpx_aiohttp
    return modes


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _free_http_port() -> int:
    # Probed on the first synthetic address: the port is then used on all of them.
    with socket.socket() as s:
        s.bind(("127.10.0.1", 0))
        return int(s.getsockname()[1])


def _free_dns_port() -> int:
    """A port free on 127.0.0.1 for both UDP and TCP (the synthetic DNS listens on both)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp, socket.socket() as tcp:
            udp.bind(("127.0.0.1", 0))
            port = int(udp.getsockname()[1])
            try:
                tcp.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port


def targets(n_hosts: int, port: int) -> tuple[list[list[str]], int]:
    """Per ordinary host, the URLs of its 200 HTML pages; and how many hosts the web needs to have them."""
    total = n_hosts
    while True:
        web = generate(total, SEED, PROFILE, port=port)
        normal = [h for h in web.hosts if h.kind == "normal"]
        if len(normal) >= n_hosts:
            break
        total = int(total * 1.3) + 10
    urls = [[web.url(h, p.path) for p in h.pages.values() if p.kind == "html" and p.status == 200]
            for h in normal[:n_hosts]]
    return urls, total


def start_web(n_hosts: int, http_port: int, dns_port: int, wd: Path) -> subprocess.Popen[bytes]:
    ready = wd / "synthweb.ready"
    cmd = [sys.executable, "-m", "streamcrawl_synthweb.main", "--hosts", str(n_hosts), "--seed", str(SEED),
           "--profile", PROFILE, "--http-port", str(http_port), "--dns-port", str(dns_port),
           "--manifest", str(wd / "manifest.json"), "--ready-file", str(ready), "--nice", "0",
           "--log-level", "warning"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=(wd / "synthweb.log").open("wb"),
                            start_new_session=True)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"synthetic web did not start: {(wd / 'synthweb.log').read_text()[-2000:]}")
        time.sleep(0.05)
    return proc


async def run_mode(make: Callable[[int], Any], resolver: Resolver, order: list[str], warm: list[str],
                   in_flight: int) -> tuple[float, float, dict[str, int]]:
    """(CPU µs per request, wall µs per request, outcome counts) of one measured run. The counts include
    "connections": TCP connections opened during the measured run (both transports open theirs through
    the event loop's create_connection)."""
    settings = FetcherSettings()
    client = make(settings.max_connections)
    fetcher = HttpFetcher(client, resolver, DEFAULT_USER_AGENT, settings.connect_timeout_s,
                          settings.read_timeout_s, settings.total_timeout_s)
    counts: dict[str, int] = {}

    async def drive(urls: list[str]) -> None:
        it = iter(urls)

        async def worker() -> None:
            for url in it:
                try:
                    resp = await fetcher.get(url, settings.max_body_bytes)
                    key = f"{resp.status}{' truncated' if resp.truncated else ''}"
                    encoding = f"bytes {resp.headers.get('content-encoding', 'identity')}"
                    counts[encoding] = counts.get(encoding, 0) + len(resp.body)
                except Exception as exc:
                    key = type(exc).__name__
                counts[key] = counts.get(key, 0) + 1

        await asyncio.gather(*(worker() for _ in range(in_flight)))

    loop = asyncio.get_running_loop()
    create_connection = loop.create_connection

    async def counted(*a: Any, **kw: Any) -> Any:
        counts["connections"] = counts.get("connections", 0) + 1
        return await create_connection(*a, **kw)

    loop.create_connection = counted  # type: ignore[method-assign]
    try:
        await drive(warm)
        counts.clear()
        c0, t0 = _cpu(), time.perf_counter()
        await drive(order)
        cpu, wall = _cpu() - c0, time.perf_counter() - t0
    finally:
        loop.create_connection = create_connection  # type: ignore[method-assign]
        await client.aclose()
    return 1e6 * cpu / len(order), 1e6 * wall / len(order), counts


async def measure(args: argparse.Namespace, dns_port: int, urls: list[list[str]]) -> None:
    resolver = Resolver("127.0.0.1", dns_port, 3.0, parse_networks("127.0.0.0/8"))
    for host_urls in urls:  # every name resolved once: the resolver's cache is warm for every mode
        await resolver.resolve(httpx.URL(host_urls[0]).host)
    order = [urls[i % len(urls)][(i // len(urls)) % len(urls[i % len(urls)])] for i in range(args.requests)]
    warm = [host_urls[0] for host_urls in urls]
    modes = transports()
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in modes}
    connections: dict[str, list[int]] = {name: [] for name in modes}
    for rep in range(args.repeats):
        for name, make in modes.items():
            cpu, wall, counts = await run_mode(make, resolver, order, warm, args.in_flight)
            runs[name].append((cpu, wall))
            connections[name].append(counts.get("connections", 0))
            print(f"repeat {rep + 1} {name:>14}: {cpu:6.0f} µs CPU, {wall:6.0f} µs wall per request  {counts}",
                  file=sys.stderr)
            if counts.get("200", 0) != len(order):
                raise SystemExit(f"{name}: not every request was a complete 200: {counts}")
    pages = ", ".join(f"{v / len(order):.0f} B decoded ({k.split()[1]} on the wire)"
                      for k, v in counts.items() if k.startswith("bytes "))
    base = statistics.median(c for c, _ in runs["httpcore"])
    print(f"\n{args.requests} GETs per mode and repeat over {len(urls)} hosts (*.{DOMAIN}), {args.in_flight} in "
          f"flight, {args.repeats} repeats (medians); {os.cpu_count()} CPUs; Python {sys.version.split()[0]}, "
          f"httpx {httpx.__version__}, aiohttp {aiohttp.__version__}; mean page {pages}\n")
    print("| transport | client CPU µs per request | vs httpcore | wall µs per request | connections opened per "
          "request |\n|---|---|---|---|---|")
    for name, results in runs.items():
        cpu = statistics.median(c for c, _ in results)
        wall = statistics.median(w for _, w in results)
        opened = statistics.median(connections[name]) / len(order)
        print(f"| {name} | {cpu:.0f} | {cpu / base:.2f} | {wall:.0f} | {opened:.2f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=2000, help="measured GETs per mode and repeat")
    p.add_argument("--hosts", type=int, default=200, help="ordinary hosts the GETs go to")
    p.add_argument("--in-flight", type=int, default=32)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    http_port, dns_port = _free_http_port(), _free_dns_port()
    urls, total = targets(args.hosts, http_port)
    with tempfile.TemporaryDirectory(prefix="fetch-cost-") as tmp:
        web = start_web(total, http_port, dns_port, Path(tmp))
        try:
            manifest = json.loads((Path(tmp) / "manifest.json").read_text())
            assert manifest["n_hosts"] == total
            asyncio.run(measure(args, dns_port, urls))
        finally:
            web.send_signal(signal.SIGTERM)
            try:
                web.wait(10)
            except subprocess.TimeoutExpired:
                web.kill()


if __name__ == "__main__":
    main()
