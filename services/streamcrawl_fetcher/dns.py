"""Host name → IP address for the fetcher: dnspython against a configured server, with a TTL cache,
negative caching and the SSRF guard (streamcrawl_core.addresses: private, loopback, link-local, metadata
and other special addresses are refused unless an allow-list opens them).

Every address returned has been checked, and it is the address the request connects to (fetch.py puts
it in the request URL; the Host header and the SNI name carry the name): no second lookup happens
between the check and the connection, so a rebinding DNS answer cannot slip in. Of several addresses in
an answer the first one the policy accepts is used; when none is, the first one's refusal is raised.

Why not the OS resolver: the crawler must resolve through a server we choose (the synthetic web's DNS
in tests and demos), must see TTLs to cache correctly, and must cache failures (RFC 2308) so that one
dead domain with 10,000 queued URLs costs one query per negative TTL rather than 10,000.
`server="system"` uses the OS resolver (getaddrinfo, which also reads /etc/hosts) with `default_ttl_s`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import dns.asyncresolver
import dns.exception
import dns.resolver
from prometheus_client import Counter
from streamcrawl_core.addresses import AddressPolicy, IpNetwork, connect_address, parse_networks

from streamcrawl_fetcher.ports import AddressNotAllowed, DnsError

DNS_LOOKUPS = Counter("streamcrawl_fetcher_dns_lookups", "DNS lookups by result", ["result"])
BLOCKED = Counter("streamcrawl_fetcher_blocked_addresses", "Addresses refused by the SSRF guard")
DNS_RECORD_FAILURES = Counter("streamcrawl_fetcher_dns_record_failures",
                              "Fresh DNS answers that could not be recorded in host_state")

log = logging.getLogger("streamcrawl.fetcher")

#: Told of every answer that did not come from the cache: (host, ip or None, error or None, seconds it is kept).
OnAnswer = Callable[[str, str | None, str | None, float], Awaitable[None]]

__all__ = ["AddressNotAllowed", "DnsError", "Resolver", "parse_networks"]


@dataclass(frozen=True)
class _Entry:
    ips: tuple[str, ...]
    error: str | None
    expires_at: float


class Resolver:
    def __init__(
        self,
        server: str = "system",
        port: int = 53,
        timeout_s: float = 3.0,
        allowed_networks: tuple[IpNetwork, ...] = (),
        negative_ttl_s: float = 300.0,
        error_ttl_s: float = 30.0,
        min_ttl_s: float = 30.0,
        max_ttl_s: float = 3600.0,
        default_ttl_s: float = 300.0,
        max_entries: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        on_answer: OnAnswer | None = None,
    ) -> None:
        self.policy = AddressPolicy(allowed_networks)
        self.on_answer = on_answer
        self.negative_ttl_s, self.error_ttl_s = negative_ttl_s, error_ttl_s
        self.min_ttl_s, self.max_ttl_s, self.default_ttl_s = min_ttl_s, max_ttl_s, default_ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._verdicts: dict[str, tuple[str | None, str]] = {}  # address → (refusal, connect address)
        self._system = server == "system"
        self._dns: dns.asyncresolver.Resolver | None = None
        if not self._system:
            r = dns.asyncresolver.Resolver(configure=False)
            r.nameservers = [server]
            r.port = port
            r.timeout = timeout_s
            r.lifetime = timeout_s
            r.cache = None  # our own cache also keeps negative answers
            self._dns = r

    def _verdict(self, ip: str) -> tuple[str | None, str]:
        """(why the policy refuses ``ip`` or None, the address to connect to), memoized: parsing and
        classifying an address costs more than a cache hit of the lookup itself."""
        verdict = self._verdicts.get(ip)
        if verdict is None:
            try:
                addr = ipaddress.ip_address(ip)
            except ValueError:
                verdict = (f"not an IP address: {ip[:100]!r}", ip)
            else:
                verdict = (self.policy.refusal(addr), str(connect_address(addr)))
            if len(self._verdicts) >= self.max_entries:
                self._verdicts.clear()
            self._verdicts[ip] = verdict
        return verdict

    def check_allowed(self, ip: str) -> str:
        """The address to connect to for ``ip``; AddressNotAllowed when the policy refuses it."""
        refusal, target = self._verdict(ip)
        if refusal is not None:
            BLOCKED.inc()
            raise AddressNotAllowed(refusal)
        return target

    def _pick(self, ips: tuple[str, ...]) -> str:
        for ip in ips:
            refusal, target = self._verdict(ip)
            if refusal is None:
                return target
        return self.check_allowed(ips[0])  # raises

    async def resolve(self, host: str) -> str:
        """An IP for `host` (an IP literal is returned as is). Raises DnsError or AddressNotAllowed."""
        literal = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        # Only a name that could be an address is parsed (a failed parse raises twice, v4 then v6).
        if ":" in literal or literal[:1].isdigit():
            try:
                ipaddress.ip_address(literal)
            except ValueError:
                pass
            else:
                return self.check_allowed(literal)
        now = self.clock()
        entry = self._cache.get(host)
        if entry is not None and entry.expires_at > now:
            self._cache.move_to_end(host)
            DNS_LOOKUPS.labels("hit" if entry.ips else "negative_hit").inc()
        else:
            entry = await self._lookup(host, now)
            self._cache[host] = entry
            self._cache.move_to_end(host)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
            if self.on_answer is not None:
                await self._tell(host, entry, now)
        if not entry.ips:
            raise DnsError(entry.error or "unresolved", host)
        return self._pick(entry.ips)

    async def _tell(self, host: str, entry: _Entry, now: float) -> None:
        """Record a fresh answer (the host view shows it); a failure to record never fails the fetch."""
        assert self.on_answer is not None
        try:
            await self.on_answer(host, entry.ips[0] if entry.ips else None, entry.error, entry.expires_at - now)
        except Exception as exc:  # the engine behind the hook is down: the answer is still cached and used
            DNS_RECORD_FAILURES.inc()
            log.warning("dns answer not recorded", extra={"error": repr(exc)[:200]})

    def _ttl(self, ttl: float) -> float:
        return min(max(ttl, self.min_ttl_s), self.max_ttl_s)

    async def _lookup(self, host: str, now: float) -> _Entry:
        if self._dns is None:
            return await self._lookup_system(host, now)
        last_error = "no_address"
        for rdtype in ("A", "AAAA"):
            try:
                answer = await self._dns.resolve(host, rdtype, search=False)
            except dns.resolver.NXDOMAIN:
                DNS_LOOKUPS.labels("nxdomain").inc()
                return _Entry((), "NXDOMAIN", now + self.negative_ttl_s)
            except dns.resolver.NoAnswer:
                continue  # NODATA for A: try AAAA
            except dns.resolver.NoNameservers:
                last_error = "SERVFAIL"
                break
            except dns.exception.Timeout:
                last_error = "timeout"
                break
            except dns.exception.DNSException as exc:
                last_error = f"dns error {type(exc).__name__}"
                break
            rrset = answer.rrset
            if rrset is None or len(rrset) == 0:
                continue
            DNS_LOOKUPS.labels("resolved").inc()
            return _Entry(tuple(str(r) for r in rrset), None, now + self._ttl(float(rrset.ttl)))
        DNS_LOOKUPS.labels("error").inc()
        # NODATA is a negative answer (RFC 2308) like NXDOMAIN; SERVFAIL/timeouts may be brief.
        ttl = self.negative_ttl_s if last_error == "no_address" else self.error_ttl_s
        return _Entry((), last_error, now + ttl)

    async def _lookup_system(self, host: str, now: float) -> _Entry:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            DNS_LOOKUPS.labels("error").inc()
            nx = exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME))
            return _Entry((), "NXDOMAIN" if nx else f"resolver error {exc.errno}",
                          now + (self.negative_ttl_s if nx else self.error_ttl_s))
        ips = tuple(dict.fromkeys(str(sockaddr[0]) for family in (socket.AF_INET, socket.AF_INET6)
                                  for fam, _t, _p, _c, sockaddr in infos if fam == family))
        if ips:
            DNS_LOOKUPS.labels("resolved").inc()
            return _Entry(ips, None, now + self.default_ttl_s)
        DNS_LOOKUPS.labels("error").inc()
        return _Entry((), "no_address", now + self.negative_ttl_s)
