"""Leases and fencing on the real Cassandra, at the consistency levels the services use: the frontier's lease,
the fetcher's started and finished marks and the replay verdicts they give, and the content claim's
lightweight transaction. On the 3-node profile (stack/cluster.env) the same checks also run with one
Cassandra node stopped: QUORUM of 3 replicas keeps every answer."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from streamcrawl_core.lease import Replay, replay_check
from streamcrawl_runtime.acsylla_session import AcsyllaSession
from streamcrawl_runtime.cassandra_state import CassandraCrawlState
from streamcrawl_runtime.connect import crawl_cql_session

pytestmark = pytest.mark.integration


async def _lease_cycle(state: CassandraCrawlState, host: str) -> list[Replay]:
    """One lease through its life, with the verdict a replayed request would get at each step."""
    verdicts = []
    await state.host_put_lease(host, "L1", f"http://{host}/", time.time() + 60)
    verdicts.append(replay_check("L1", await state.host_lease(host)))  # leased, not sent
    await state.host_put_started_lease(host, "L1", time.time())
    verdicts.append(replay_check("L1", await state.host_lease(host)))  # under way at a crash
    await state.host_put_fetched_lease(host, "L1")
    verdicts.append(replay_check("L1", await state.host_lease(host)))  # done, result about to go out
    await state.host_put_lease(host, "L2", f"http://{host}/2", time.time() + 60)
    verdicts.append(replay_check("L0", await state.host_lease(host)))  # an older lease: fenced off
    return verdicts


EXPECTED = [Replay.NOT_STARTED, Replay.INTERRUPTED, Replay.FINISHED, Replay.SUPERSEDED]


def test_a_lease_its_marks_and_the_replay_verdicts(stack, unique):
    state = CassandraCrawlState(crawl_cql_session(stack))
    assert asyncio.run(_lease_cycle(state, f"lease-{unique}.test")) == EXPECTED


def test_the_first_content_claim_wins(stack, unique):
    async def claims() -> list[str]:
        a = CassandraCrawlState(crawl_cql_session(stack))
        b = CassandraCrawlState(crawl_cql_session(stack))  # another dedup instance
        first = await a.content_claim(f"hash-{unique}", f"http://a-{unique}.test/", "k", time.time())
        second = await b.content_claim(f"hash-{unique}", f"http://b-{unique}.test/", "k", time.time())
        return [first, second]

    assert asyncio.run(claims()) == [f"http://a-{unique}.test/"] * 2


@contextmanager
def _node_stopped(stack_dir: Path, node: int) -> Iterator[None]:
    """Freeze one Cassandra node (SIGSTOP: it neither answers nor is marked down at once), then thaw it."""
    pid = int((stack_dir / "run" / f"cassandra-{node}.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


@pytest.mark.skipif(os.environ.get("STREAMCRAWL_STACK_PROFILE") != "cluster",
                    reason="needs the 3-node stack (source stack/cluster.env); CI runs the single-node one")
@pytest.mark.parametrize("node", [2, 3])
def test_leases_and_claims_survive_a_replica_down(stack, unique, node):
    stack_dir = Path(os.environ["STREAMCRAWL_STACK_DIR"])
    assert len(stack.cassandra_host_list) == 3 and stack.consistency().leases == "QUORUM"
    with _node_stopped(stack_dir, node):
        # Node 1 coordinates (a frozen coordinator would only time out): the test is about a replica down.
        session = AcsyllaSession(["127.0.0.1"], stack.cassandra_port, stack.cassandra_keyspace,
                                 request_timeout_s=30.0, consistency=stack.consistency(), pin_hosts=True)
        state = CassandraCrawlState(session)
        assert asyncio.run(_lease_cycle(state, f"down{node}-{unique}.test")) == EXPECTED
        first = asyncio.run(state.content_claim(f"hd{node}-{unique}", f"http://x-{unique}.test/", "k", time.time()))
        assert first == f"http://x-{unique}.test/"
