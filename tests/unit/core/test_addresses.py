"""The SSRF guard's address rule (streamcrawl_core.addresses): one case per refused range, its mapped and
NAT64 forms, public addresses, the allow-list, and the default policy (no allow-list) refusing them all."""

from __future__ import annotations

import ipaddress

import pytest
from streamcrawl_core.addresses import METADATA_ADDRESSES, AddressPolicy, classify, connect_address, parse_networks

#: (an address in the range, its expected class); first and last addresses of each range where it matters.
REFUSED_V4 = [
    ("0.0.0.0", "this-network"), ("0.255.255.255", "this-network"),
    ("10.0.0.1", "private"), ("10.255.255.255", "private"),
    ("100.64.0.1", "cgnat"), ("100.127.255.254", "cgnat"),
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"),
    ("169.254.0.1", "link-local"), ("169.254.255.254", "link-local"),
    ("172.16.0.1", "private"), ("172.31.255.254", "private"),
    ("192.0.0.8", "reserved"),
    ("192.0.2.1", "documentation"), ("198.51.100.7", "documentation"), ("203.0.113.200", "documentation"),
    ("192.88.99.1", "reserved"),
    ("192.168.0.1", "private"), ("192.168.255.254", "private"),
    ("198.18.0.1", "benchmarking"), ("198.19.255.254", "benchmarking"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.254", "reserved"),
    ("255.255.255.255", "broadcast"),
]
REFUSED_V6 = [
    ("::", "unspecified"), ("::1", "loopback"),
    ("::127.0.0.1", "reserved"),  # deprecated IPv4-compatible form: outside 2000::/3
    ("64:ff9b:1::a00:1", "nat64-local"),
    ("100::1", "discard"),
    ("fc00::1", "unique-local"), ("fd12:3456::1", "unique-local"), ("fdff:ffff::1", "unique-local"),
    ("fe80::1", "link-local"), ("febf::1", "link-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"), ("ff0e::1", "multicast"),
    ("2001::1", "teredo"), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "teredo"),
    ("2001:db8::1", "documentation"), ("3fff::1", "documentation"),
    ("2001:2::1", "reserved"), ("2001:10::1", "reserved"),
    ("2002:7f00:1::1", "6to4"), ("2002:808:808::1", "6to4"),
    ("5f00::1", "srv6"),
    ("4000::1", "reserved"), ("8000::1", "reserved"), ("e000::1", "reserved"), ("1::1", "reserved"),
]
PUBLIC = ["1.1.1.1", "8.8.8.8", "93.184.215.14", "100.63.255.255", "100.128.0.0", "172.15.255.255",
          "172.32.0.0", "192.167.255.255", "192.169.0.0", "169.253.255.255", "11.0.0.1", "223.255.255.255",
          "2606:4700:4700::1111", "2a00:1450:4001:82a::200e", "2001:4860:4860::8888", "2001:200::1",
          "::ffff:8.8.8.8", "64:ff9b::808:808"]


@pytest.mark.parametrize(("address", "expected"), REFUSED_V4 + REFUSED_V6)
def test_every_special_range_is_classified(address: str, expected: str) -> None:
    assert classify(ipaddress.ip_address(address)) == expected


@pytest.mark.parametrize(("address", "expected"), REFUSED_V4)
def test_ipv4_mapped_and_nat64_forms_are_judged_by_their_ipv4_address(address: str, expected: str) -> None:
    v4 = ipaddress.IPv4Address(address)
    mapped = ipaddress.IPv6Address(f"::ffff:{address}")
    nat64 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(v4))
    want = "metadata" if v4 in METADATA_ADDRESSES else expected
    assert classify(mapped) == f"ipv4-mapped {want}"
    assert classify(nat64) == f"nat64 {want}"
    # the hexadecimal spelling of the mapped form is the same address
    assert classify(ipaddress.IPv6Address(f"::ffff:{int(v4) >> 16:x}:{int(v4) & 0xffff:x}")) == f"ipv4-mapped {want}"


@pytest.mark.parametrize("address", sorted(str(a) for a in METADATA_ADDRESSES))
def test_metadata_endpoints_are_refused_even_when_their_range_is_allowed(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) == "metadata"
    everything = AddressPolicy(parse_networks("0.0.0.0/0, ::/0"))
    assert "metadata" in (everything.refusal(address) or "")
    if ":" not in address:
        assert "metadata" in (everything.refusal(f"::ffff:{address}") or "")


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_accepted(address: str) -> None:
    assert classify(ipaddress.ip_address(address)) is None
    assert AddressPolicy().refusal(address) is None


@pytest.mark.parametrize("address", [a for a, _ in REFUSED_V4 + REFUSED_V6] + sorted(str(a) for a in METADATA_ADDRESSES)
                         + ["::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe",
                            "64:ff9b::7f00:1", "::ffff:7f00:1"])
def test_the_default_policy_refuses_every_private_and_metadata_address(address: str) -> None:
    """No allow-list (the chart's and the settings' default): every special address is refused."""
    reason = AddressPolicy().refusal(address)
    assert reason is not None and str(ipaddress.ip_address(address)) in reason


def test_the_allow_list_opens_only_its_ranges() -> None:
    policy = AddressPolicy(parse_networks("127.0.0.0/8"))
    assert policy.refusal("127.0.0.1") is None and policy.refusal("127.10.3.4") is None
    assert policy.refusal("::ffff:127.0.0.1") is None  # the same IPv4 address, mapped
    for other in ("10.0.0.1", "192.168.1.1", "::1", "169.254.169.254", "64:ff9b::7f00:1", "fd00::2"):
        assert policy.refusal(other) is not None, other
    assert policy.refusal("8.8.8.8") is None  # the public internet stays open
    v6 = AddressPolicy(parse_networks("::1/128, fd00::/64"))
    assert v6.refusal("::1") is None and v6.refusal("fd00::2") is None
    assert v6.refusal("fd01::2") is not None and v6.refusal("127.0.0.1") is not None


def test_connect_address_unwraps_ipv4_mapped_only() -> None:
    assert connect_address(ipaddress.ip_address("::ffff:1.2.3.4")) == ipaddress.ip_address("1.2.3.4")
    assert connect_address(ipaddress.ip_address("64:ff9b::102:304")) == ipaddress.ip_address("64:ff9b::102:304")
    assert connect_address(ipaddress.ip_address("1.2.3.4")) == ipaddress.ip_address("1.2.3.4")


def test_parse_networks() -> None:
    assert parse_networks("") == ()
    assert parse_networks(" 127.0.0.0/8 , ::1/128 ,") == (ipaddress.ip_network("127.0.0.0/8"),
                                                          ipaddress.ip_network("::1/128"))
    assert parse_networks("127.0.0.1/8") == (ipaddress.ip_network("127.0.0.0/8"),)  # host bits ignored
    with pytest.raises(ValueError):
        parse_networks("127.0.0.0/33")
    with pytest.raises(ValueError):
        AddressPolicy().refusal("not-an-ip")
