"""The HTTP side of observation: GET every service's /metrics with one reused client and sum them
(streamcrawl_runtime.observe does the arithmetic).

A target is either a plain URL (`http://127.0.0.1:9101/metrics`) or a `dns+` URL
(`dns+http://streamcrawl-frontier.crawl.svc:9101/metrics`): its host name is resolved at every scrape and
every address it names is scraped. On Kubernetes that name is a headless Service, which answers with the
address of each ready pod, so the sums cover every replica (a ClusterIP Service would answer for one pod
at a time) and follow scale-out and scale-in without a restart."""

from __future__ import annotations

import ipaddress
import socket
import time
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

import httpx

from streamcrawl_runtime.observe import Sample, Scrape, merge, parse_metrics

DNS_PREFIX = "dns+"

#: name, port -> the addresses the name resolves to (IPv4 and IPv6 as strings).
Resolver = Callable[[str, int], list[str]]


def system_resolver(name: str, port: int) -> list[str]:
    """Every address getaddrinfo gives for `name` (TCP), in its order, without repeats."""
    infos = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def expand(target: str, resolve: Resolver) -> list[str]:
    """The plain URLs to GET for one target: itself, or one per address of a `dns+` target's host.
    Raises OSError when the name does not resolve (reported per target, never fatal)."""
    if not target.startswith(DNS_PREFIX):
        return [target]
    parts = urlsplit(target[len(DNS_PREFIX):])
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not a dns+http(s) URL: {target!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    urls = []
    for addr in sorted(resolve(parts.hostname, port), key=_address_order):
        host = f"[{addr}]" if ":" in addr else addr
        urls.append(urlunsplit((parts.scheme, f"{host}:{port}", parts.path, parts.query, "")))
    return urls


def _address_order(addr: str) -> tuple[int, int]:
    ip = ipaddress.ip_address(addr)
    return ip.version, int(ip)


class Scraper:
    """GETs each target's /metrics with one reused HTTP client (blocking; a few ms per target)."""

    def __init__(self, targets: Sequence[str], timeout_s: float = 2.0,
                 resolve: Resolver = system_resolver) -> None:
        self.targets = list(targets)
        self.resolve = resolve
        self.client = httpx.Client(timeout=timeout_s, trust_env=False)

    def scrape(self) -> Scrape:
        samples: list[Sample] = []
        status: dict[str, str] = {}
        for target in self.targets:
            try:
                urls = expand(target, self.resolve)
            except (OSError, ValueError) as exc:
                status[target] = f"unresolvable: {type(exc).__name__}: {str(exc)[:120]}"
                continue
            if not urls:
                status[target] = "no addresses (no ready pod behind the name)"
            for url in urls:
                try:
                    r = self.client.get(url)
                    r.raise_for_status()
                    samples.append(parse_metrics(r.text))
                    status[url] = "ok"
                except (httpx.HTTPError, ValueError) as exc:
                    status[url] = f"{type(exc).__name__}: {str(exc)[:120]}"
        return Scrape(time.time(), merge(samples), status)

    def close(self) -> None:
        self.client.close()
