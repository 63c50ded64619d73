"""What the fetcher records for the host view: each result's outcome and the last fetch end (with the
fetched_lease mark, in one request), and every fresh DNS answer with its expiry."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from streamcrawl_fetcher.dns import DnsError, Resolver, parse_networks

from tests.unit.services import test_fetcher_handler as base
from tests.unit.services.fakes import Reply, TinyDNS
from tests.unit.services.test_fetcher_handler import HOST, Rig

dns_server, web, rig = base.dns_server, base.web, base.rig  # the fixtures of the handler's tests


def test_each_result_records_its_outcome_and_the_last_fetch_end(rig: Rig) -> None:
    rig.allow_all()
    rig.web.routes["/ok"] = Reply(200, b"<html>ok</html>", {"Content-Type": "text/html"})
    rig.web.routes["/gone"] = Reply(404, b"no")
    t0 = time.time()
    ok = rig.run(rig.request("/ok"))
    gone = rig.run(rig.request("/gone"))
    rows = rig.state.outcomes[HOST]
    assert [(r.url, r.outcome, r.status) for r in rows] == [(ok.url, "fetched", 200), (gone.url, "http_error", 404)]
    assert all(r.fetch_ms is not None and r.fetch_ms >= 0 for r in rows)
    assert t0 <= rows[0].at <= rows[1].at <= time.time()
    assert rig.state.last_fetch_end[HOST] == int(rows[1].at * 1000) / 1000


def test_an_expired_lease_records_no_outcome(rig: Rig) -> None:
    rig.run(rig.request("/a", lease_expires_at=time.time() - 1))
    assert HOST not in rig.state.outcomes


def test_fresh_dns_answers_are_told_with_their_lifetime_and_cache_hits_are_not(dns_server: TinyDNS) -> None:
    told: list[tuple[str, str | None, str | None, float]] = []

    async def on_answer(host: str, ip: str | None, error: str | None, ttl_s: float) -> None:
        told.append((host, ip, error, ttl_s))

    resolver = Resolver("127.0.0.1", dns_server.port, 1.0, parse_networks("127.0.0.0/8"), negative_ttl_s=300.0,
                        on_answer=on_answer)

    async def go() -> None:
        for _ in range(2):
            assert await resolver.resolve("other.test") == "127.0.0.1"
            with contextlib.suppress(DnsError):
                await resolver.resolve("gone.test")

    asyncio.run(go())
    assert [(h, ip, err) for h, ip, err, _ in told] == [("other.test", "127.0.0.1", None),
                                                       ("gone.test", None, "NXDOMAIN")]
    assert 30.0 <= told[0][3] <= 3600.0 and told[1][3] == pytest.approx(300.0)


def test_a_dns_answer_that_cannot_be_recorded_is_still_used(dns_server: TinyDNS) -> None:
    async def broken(host: str, ip: str | None, error: str | None, ttl_s: float) -> None:
        raise ConnectionError("cassandra down")

    resolver = Resolver("127.0.0.1", dns_server.port, 1.0, parse_networks("127.0.0.0/8"), on_answer=broken)
    assert asyncio.run(resolver.resolve("other.test")) == "127.0.0.1"
