"""Which IP addresses the crawler may connect to: the SSRF guard's rule, pure (no I/O).

A crawler fetches whatever strangers link to, from inside someone's network. Any name may resolve to an
address of that network (a cluster service, a router, the cloud's metadata endpoint at 169.254.169.254),
so the fetcher checks every address it is about to connect to (after DNS, for every request and so for
every redirect hop) and refuses, **by default**, every address that is not a public unicast address:

* IPv4 (IANA special-purpose registry): 0.0.0.0/8, 10/8, 100.64/10 (CGNAT), 127/8, 169.254/16, 172.16/12,
  192.0.0/24, the three documentation /24s, 192.88.99/24 (old 6to4 relays), 192.168/16, 198.18/15
  (benchmarking), 224/4 (multicast), 240/4 (reserved) and 255.255.255.255 (broadcast);
* IPv6: ::, ::1, everything outside 2000::/3 (fc00::/7 unique-local, fe80::/10 link-local, fec0::/10,
  ff00::/8 multicast, 100::/64 discard, the deprecated IPv4-compatible ::/96...), and inside it the IETF
  protocol block 2001::/23 (Teredo 2001::/32 included), 2001:db8::/32 and 3fff::/20 (documentation),
  2002::/16 (6to4), 5f00::/16 (SRv6);
* IPv4 inside IPv6 is judged by the IPv4 address it reaches: IPv4-mapped ::ffff:a.b.c.d and NAT64
  64:ff9b::a.b.c.d (RFC 6052) are refused exactly when a.b.c.d is; the local-use NAT64 prefix
  64:ff9b:1::/48 (RFC 8215, a network's own translator) is refused outright.
* Cloud metadata endpoints (AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle, Alibaba, ECS/EKS) are
  refused even when an allow-list opens the range around them: no crawl ever needs them.

`AddressPolicy(allowed=...)` opens ranges on purpose (the local synthetic web lives on 127.0.0.0/8): an
address inside an allowed network is accepted unless it is a metadata endpoint. An IPv4-mapped address is
matched against the allow-list as the IPv4 address it is. The caller connects to the address it checked
(`connect_address`), never to a name, so a second DNS answer (rebinding) cannot slip in.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

__all__ = ["METADATA_ADDRESSES", "AddressPolicy", "IpAddress", "IpNetwork", "classify", "connect_address",
           "parse_networks"]

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def _nets(*specs: tuple[str, str]) -> tuple[tuple[IpNetwork, str], ...]:
    return tuple((ipaddress.ip_network(net), why) for net, why in specs)


#: Cloud instance-metadata (and neighbouring credential) endpoints: refused even inside an allowed range.
METADATA_ADDRESSES: frozenset[IpAddress] = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",   # AWS IMDS, GCP, Azure IMDS, OpenStack, DigitalOcean, Oracle Cloud
    "169.254.169.253",   # AWS VPC DNS
    "169.254.169.123",   # AWS time sync
    "169.254.170.2",     # AWS ECS task metadata and credentials
    "169.254.170.23",    # AWS EKS Pod Identity agent
    "100.100.100.200",   # Alibaba Cloud metadata
    "192.0.0.192",       # Oracle Cloud Infrastructure (legacy metadata)
    "fd00:ec2::254",     # AWS IMDS over IPv6
    "fd00:ec2::23",      # AWS EKS Pod Identity agent over IPv6
))

# Order matters only where ranges nest: the more specific name comes first.
_V4 = _nets(
    ("255.255.255.255/32", "broadcast"),
    ("0.0.0.0/8", "this-network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "cgnat"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "reserved"),  # IETF protocol assignments
    ("192.0.2.0/24", "documentation"),
    ("192.88.99.0/24", "reserved"),  # deprecated 6to4 relay anycast (RFC 7526)
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
)
_V6_GLOBAL_UNICAST = ipaddress.IPv6Network("2000::/3")
_V6 = _nets(
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "nat64-local"),  # RFC 8215: a network-specific translator
    ("100::/64", "discard"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),  # deprecated (RFC 3879)
    ("ff00::/8", "multicast"),
    ("2001::/32", "teredo"),
    ("2001:db8::/32", "documentation"),
    ("2001::/23", "reserved"),  # IETF protocol assignments (benchmarking, ORCHID, ...)
    ("2002::/16", "6to4"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "srv6"),
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052 well-known prefix: the last 32 bits are IPv4


def parse_networks(spec: str) -> tuple[IpNetwork, ...]:
    """'127.0.0.0/8, ::1/128' → networks. Empty: nothing is opened beyond the public internet.
    Raises ValueError on a malformed entry (a typo must not silently leave a range closed or open)."""
    return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in spec.split(",") if part.strip())


def _embedded_v4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped or NAT64 (well-known prefix) address reaches."""
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFF_FFFF)
    return None


def classify(addr: IpAddress) -> str | None:
    """The special range ``addr`` falls in ("loopback", "private", "metadata", "ipv4-mapped loopback", ...),
    or None for a public unicast address."""
    if addr in METADATA_ADDRESSES:
        return "metadata"
    if isinstance(addr, ipaddress.IPv4Address):
        for net, why in _V4:
            if addr in net:
                return why
        return None
    v4 = _embedded_v4(addr)
    if v4 is not None:
        inner = classify(v4)
        form = "ipv4-mapped" if addr.ipv4_mapped is not None else "nat64"
        return None if inner is None else f"{form} {inner}"
    for net6, why in _V6:
        if addr in net6:
            return why
    if addr not in _V6_GLOBAL_UNICAST:
        return "reserved"
    return None


def connect_address(addr: IpAddress) -> IpAddress:
    """The address a socket is opened to: an IPv4-mapped address is its IPv4 address (the connection goes
    there over IPv4 anyway); anything else is itself."""
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


@dataclass(frozen=True)
class AddressPolicy:
    """Deny by default: public unicast addresses are accepted, every special range is refused unless
    ``allowed`` opens it; metadata endpoints are refused always."""

    allowed: tuple[IpNetwork, ...] = ()

    def refusal(self, address: str | IpAddress) -> str | None:
        """Why ``address`` must not be connected to (e.g. "private address 10.0.0.1"), or None when it may.
        Raises ValueError when ``address`` is not an IP address."""
        addr = ipaddress.ip_address(address) if isinstance(address, str) else address
        why = classify(addr)
        if why is None:
            return None
        if why.endswith("metadata"):  # also its IPv4-mapped and NAT64 forms
            return f"{why} address {addr} (never allowed)"
        if self.allowed:
            target = connect_address(addr)
            if any(target.version == net.version and target in net for net in self.allowed):
                return None
        return f"{why} address {addr} (not in allowed networks)"
