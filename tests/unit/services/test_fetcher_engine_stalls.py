"""An engine's stall is never the host's response time: the fetcher times the HTTP exchange alone, and a
retry after an engine failed (the run loop retries a TransientError) is not taken for a crash."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from streamcrawl_contracts.messages import FetchResult
from streamcrawl_runtime.memory import MemoryBlobStore
from streamcrawl_runtime.ports.blobs import StoredPage
from streamcrawl_runtime.ports.errors import TransientError

from .fakes import Reply, ScriptedHTTP, TinyDNS
from .test_fetcher_handler import HOST, Rig


@pytest.fixture(scope="module")
def dns_server() -> Iterator[TinyDNS]:
    srv = TinyDNS({HOST: "127.0.0.1"})
    yield srv
    srv.close()


@pytest.fixture
def web() -> Iterator[ScriptedHTTP]:
    srv = ScriptedHTTP()
    yield srv
    srv.close()


@pytest.fixture
def rig(dns_server: TinyDNS, web: ScriptedHTTP) -> Rig:
    return Rig(dns_server.port, web)


def test_robots_time_excludes_the_write_of_its_rules(rig: Rig) -> None:
    """host_state's write of the rules (Cassandra, here stalled 1.5 s) is after the exchange's end."""
    put = rig.state.host_put_robots

    async def slow_put(*args: object) -> None:
        time.sleep(1.5)  # a stalled engine: nothing else runs meanwhile
        await put(*args)  # type: ignore[arg-type]

    rig.state.host_put_robots = slow_put  # type: ignore[method-assign]
    rig.web.routes["/robots.txt"] = Reply(200, b"User-agent: *\nAllow: /\n")
    t0 = time.time()
    res = rig.run(rig.request("/p"))
    done = time.time()
    assert res.outcome == "robots_fetched" and res.status == 200
    assert res.fetch_s is not None and res.fetch_s < 0.5, res.fetch_s
    assert res.ended_at is not None and t0 <= res.ended_at <= done - 1.4


def test_probe_ends_before_its_answer_is_written(rig: Rig) -> None:
    rig.allow_all(soft404=None)
    put = rig.state.host_put_soft404

    async def slow_put(*args: object) -> None:
        time.sleep(1.5)
        await put(*args)  # type: ignore[arg-type]

    rig.state.host_put_soft404 = slow_put  # type: ignore[method-assign]
    done_before = time.time()
    res = rig.run(rig.request("/x"))
    assert res.outcome == "probe_fetched"
    assert res.ended_at is not None and res.ended_at <= done_before + 0.5


class FlakyStore(MemoryBlobStore):
    """S3 unavailable for the first ``failures`` stores."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def store_page(self, body: bytes) -> StoredPage:
        if self.failures:
            self.failures -= 1
            raise TransientError("s3 down")
        return super().store_page(body)


def test_a_retry_after_the_store_failed_counts_the_real_exchange(dns_server: TinyDNS, web: ScriptedHTTP) -> None:
    """The page was served, then S3 failed and the loop retried 1.5 s later: no second request, and the
    host's delay basis is the exchange (milliseconds) from its end, not the 1.5 s since the start."""
    flaky = Rig(dns_server.port, web, blobs=FlakyStore(1))
    flaky.allow_all()
    web.routes["/p"] = Reply(200, b"<html>body</html>", {"Content-Type": "text/html"})
    req = flaky.request("/p")
    with pytest.raises(TransientError):
        flaky.run(req)
    served = time.time()
    time.sleep(1.5)
    res = flaky.run(req)  # the loop's retry: the same request, not fresh
    assert isinstance(res, FetchResult) and res.outcome == "interrupted"
    assert res.fetch_s is not None and res.fetch_s < 0.5, res.fetch_s
    assert res.ended_at is not None and res.ended_at <= served
    assert web.pages().count("/p") == 1


def test_a_retry_after_the_started_mark_failed_sends_the_request(rig: Rig) -> None:
    """The started mark's write timed out (yet landed, as a Cassandra write may): nothing was sent, so the
    retry is no crash replay: it fetches the page."""
    put = rig.state.host_put_started_lease
    failures = [1]

    async def flaky(host: str, lease_id: str, at: float) -> None:
        await put(host, lease_id, at)
        if failures:
            failures.pop()
            raise TransientError("cassandra timeout")

    rig.state.host_put_started_lease = flaky  # type: ignore[method-assign]
    rig.allow_all()
    rig.web.routes["/p"] = Reply(200, b"<html>body</html>", {"Content-Type": "text/html"})
    req = rig.request("/p")
    with pytest.raises(TransientError):
        rig.run(req)
    assert rig.web.pages() == []
    res = rig.run(req)
    assert res.outcome == "fetched" and res.status == 200
    assert rig.web.pages() == ["/p"]


def test_a_retry_after_the_fetched_mark_failed_produces_the_result_once_fetched(rig: Rig) -> None:
    """The fetched mark's write timed out yet landed (Cassandra): the replay rule would read the lease as
    finished and produce nothing, leaving the host leased until its expiry. The retry in the same process
    writes again and produces the result it built, with no second request."""
    put = rig.state.host_put_fetched_lease
    failures = [1]

    async def flaky(*args: object) -> None:
        await put(*args)  # type: ignore[arg-type]
        if failures:
            failures.pop()
            raise TransientError("cassandra timeout")

    rig.state.host_put_fetched_lease = flaky  # type: ignore[method-assign]
    rig.allow_all()
    rig.web.routes["/p"] = Reply(200, b"<html>body</html>", {"Content-Type": "text/html"})
    req = rig.request("/p")
    with pytest.raises(TransientError):
        rig.run(req)
    res = rig.run(req)
    assert res.outcome == "fetched" and res.status == 200
    assert rig.web.pages() == ["/p"]
    assert len(rig.handler.exchanges) == 0  # forgotten once produced
