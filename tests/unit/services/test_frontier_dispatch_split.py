"""The frontier instance's leases when it is the bottleneck (few leases, many ready hosts): every owned
partition gets its turn, and the discovery/refresh split holds over the whole instance, not within each
partition's own Frontier (docs/benchmarks-refresh-split.md)."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.unit.services.test_frontier_handler import T0, Clock, Rig, part


@pytest.fixture
def clock() -> Clock:
    return Clock(T0)


def hosts_of(partition: int, n: int) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        host = f"h{i}.test"
        if part(host) == partition:
            out.append(host)
        i += 1
    return out


def crawl(rig: Rig, cycles: int, step_s: float = 0.1) -> list[tuple[str, str]]:
    """One lease at a time: tick, answer the request 10 ms later, next tick ``step_s`` on."""
    got: list[tuple[str, str]] = []
    t = T0
    for _ in range(cycles):
        for req in rig.tick(t):
            got.append((req.host, req.kind))
            rig.result(req, t + 0.01, fetch_s=0.01)
        t += step_s
    return got


def test_no_partition_waits_for_the_others_under_a_lease_cap(clock: Clock) -> None:
    rig = Rig(clock)
    rig.h.max_leases = 1
    hosts = [h for p in range(8) for h in hosts_of(p, 2)]
    for h in hosts:
        for i in range(12):
            rig.url(f"http://{h}/{i}")
    got = crawl(rig, 100)  # 10 leases a second, 16 hosts that may each be contacted once a second
    per_part = Counter(part(h) for h, _ in got)
    # Taken partition after partition, the first five took every lease and the last three none.
    assert set(per_part) == set(range(8)), per_part
    assert min(per_part.values()) >= 8, per_part
    assert {h for h, _ in got} == set(hosts)


@pytest.mark.parametrize("refresh_part,discovery_part", [(1, 6), (6, 1)])
def test_the_split_holds_over_partitions_that_each_hold_one_kind(clock: Clock, refresh_part: int,
                                                                 discovery_part: int) -> None:
    rig = Rig(clock)
    rig.h.max_leases = 1
    for h in hosts_of(refresh_part, 12):
        for i in range(12):
            rig.url(f"http://{h}/r{i}", priority=3, kind="refresh")
    for h in hosts_of(discovery_part, 12):
        for i in range(12):
            rig.url(f"http://{h}/d{i}", priority=5, kind="discovery")
    kinds = Counter(k for _, k in crawl(rig, 100))
    # discovery_share 0.3 of the instance's leases; each partition's own Frontier saw one kind only, and
    # the partition taken first took every lease.
    assert sum(kinds.values()) == 100
    assert 27 <= kinds["discovery"] <= 33, kinds


def test_refreshes_of_hosts_whose_window_is_full_of_discoveries_are_leased_at_their_share(clock: Clock) -> None:
    """Each host's memory holds a window of its queue (host_window URLs): a host's discoveries filled it
    first, and the refreshes that came due later waited in Cassandra behind them, so the frontier saw
    almost no host ready for a refresh and leased discoveries whatever the split said."""
    rig = Rig(clock)
    rig.h.max_leases = 1
    hosts = [h for p in range(8) for h in hosts_of(p, 3)]
    for h in hosts:
        for i in range(20):
            rig.url(f"http://{h}/d{i}", priority=4, kind="discovery")
    for h in hosts:
        for i in range(20):
            rig.url(f"http://{h}/r{i}", priority=3, kind="refresh")
    kinds = Counter(k for _, k in crawl(rig, 100))
    assert sum(kinds.values()) == 100
    assert 27 <= kinds["discovery"] <= 33, kinds
