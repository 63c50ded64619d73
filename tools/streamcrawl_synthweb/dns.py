"""Authoritative DNS server (UDP + TCP, asyncio + dnspython) for the synthetic web's ``synth.test`` zone.

* A query for a known host -> its 127.x.y.z address with ``ttl``;
* other record types of a known host -> NOERROR with no answer (NODATA) and the zone SOA;
* hosts of kind ``dns_nxdomain`` -> NXDOMAIN, ``dns_servfail`` -> SERVFAIL (negative-caching tests);
* any other name -> NXDOMAIN. Negative answers under synth.test carry the SOA whose minimum field is
  ``negative_ttl``, the negative-caching TTL of RFC 2308.
Binds loopback only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import struct
from typing import cast

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

from streamcrawl_synthweb.model import DEFAULT_DNS_PORT, DOMAIN, SynthWeb

__all__ = ["SynthDNS"]

log = logging.getLogger("streamcrawl_synthweb.dns")


def _require_loopback(address: str) -> None:
    if not ipaddress.ip_address(address).is_loopback:
        raise ValueError(f"refusing to bind a non-loopback address: {address}")


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, owner: SynthDNS) -> None:
        self.owner = owner
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | int, ...]) -> None:
        reply = self.owner.answer(data)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)


class SynthDNS:
    def __init__(
        self,
        web: SynthWeb,
        host: str = "127.0.0.1",
        port: int = DEFAULT_DNS_PORT,
        ttl: int = 300,
        negative_ttl: int = 60,
    ) -> None:
        _require_loopback(host)
        self.web, self.host, self.port = web, host, port
        self.ttl, self.negative_ttl = ttl, negative_ttl
        self.queries = 0
        self._zone = dns.name.from_text(DOMAIN)
        self._soa = dns.rrset.from_text(
            self._zone, negative_ttl, "IN", "SOA",
            f"ns.{DOMAIN}. hostmaster.{DOMAIN}. 1 3600 600 86400 {negative_ttl}",
        )  # fmt: skip
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        # UDP first: with port=0 the kernel picks a port, and TCP then takes the same number.
        transport, _ = await loop.create_datagram_endpoint(lambda: _Udp(self), local_addr=(self.host, self.port))
        self._udp = transport
        self.port = int(transport.get_extra_info("sockname")[1])
        self._tcp = await asyncio.start_server(self._serve_tcp, self.host, self.port, reuse_address=True)
        log.info("dns listening", extra={"fields": {"host": self.host, "port": self.port}})

    async def stop(self) -> None:
        if self._udp is not None:
            self._udp.close()
            self._udp = None
        if self._tcp is not None:
            self._tcp.close()
            await self._tcp.wait_closed()
            self._tcp = None

    async def _serve_tcp(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (length,) = struct.unpack("!H", await reader.readexactly(2))
                reply = self.answer(await reader.readexactly(length))
                if reply is None:
                    break
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def answer(self, wire: bytes) -> bytes | None:
        """Build the wire-format reply to one query; None for garbage we cannot even echo."""
        self.queries += 1
        try:
            query = dns.message.from_wire(wire)
        except dns.exception.DNSException:
            return None
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        response.flags &= ~dns.flags.RA
        if len(query.question) != 1:
            response.set_rcode(dns.rcode.FORMERR)
            return response.to_wire()
        question = query.question[0]
        qname = question.name.to_text(omit_final_dot=True).lower()
        in_zone = question.name.is_subdomain(self._zone)
        host = self.web.by_name.get(qname)
        if host is not None and host.kind == "dns_servfail":
            response.set_rcode(dns.rcode.SERVFAIL)
        elif host is None or host.kind == "dns_nxdomain":
            if question.name == self._zone and question.rdtype == dns.rdatatype.SOA:
                response.answer.append(self._soa)
            elif question.name != self._zone:
                response.set_rcode(dns.rcode.NXDOMAIN)
            if in_zone and not response.answer:
                response.authority.append(self._soa)
        elif question.rdtype in (dns.rdatatype.A, dns.rdatatype.ANY) and question.rdclass == dns.rdataclass.IN:
            response.answer.append(dns.rrset.from_text(question.name, self.ttl, "IN", "A", host.ip))
        else:
            response.authority.append(self._soa)  # NODATA
        return response.to_wire()
