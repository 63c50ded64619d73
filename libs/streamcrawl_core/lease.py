"""Leases: how the crawler keeps at most one request per host in flight across processes and crashes.

The frontier grants a lease for one request to a host and makes it durable (host_state) before the
request exists. The fetcher marks the lease *started* right before it sends the request and *finished*
before it produces the result; the frontier ends the lease when the result arrives. With those marks:

- **Fencing** (`replay_check`): a request delivered again after a crash (at-least-once) whose lease is no
  longer the host's current one is superseded; one whose lease was finished is skipped; one whose lease
  was started and not finished was under way when its fetcher stopped (`INTERRUPTED`: its outcome is
  lost, and the host may have served it until now); otherwise it was never sent.
- **Guard** (`may_send`): no request starts in a lease's last `guard_s`, so at the expiry the frontier
  cannot miss the started mark of a request that went out.
- **Expiry** (`on_expiry`): a lease whose result never came is released if no request went out under it;
  kept in force while a started request may still run; and after that the host is held back for the
  politeness delay of a request that ran from its start until now.
- **Early check** (`early_check_at`, `confirm_after`, `handled`): a lease whose request is stuck (in a
  producer, the broker, a rebalance, a fetcher's backlog) would block its host for the whole lease. At
  the early check the frontier reads the marks; if nothing was started it *fences* the lease (host_state's
  lease cleared) and reads the marks again; only if they still show nothing is the lease ended and the URL
  put back. A request starting at or after `confirm_after` (carried in the request) writes its started mark
  and then reads the lease row again, and sends nothing if the lease is no longer current. The two write-
  then-read sequences (frontier: fence, marks; fetcher: started, lease) cannot both miss each other: either
  the frontier sees the start and keeps the host blocked, or the fetcher sees the fence and sends nothing.
  Requests that start earlier than `confirm_after` (the normal case) pay no extra read; the margin between
  `confirm_after` and the check covers the same clock skew and write latency as the guard.

`LeaseTable` is the frontier's in-memory book of live leases, one per host, with their expiry times.
Pure logic, no I/O.
"""

from __future__ import annotations

import heapq
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple


class LeaseMarks(NamedTuple):
    """The lease columns of a host's durable state."""

    lease_id: str | None  # the current lease: the fencing token (None: no lease in force)
    fetched_lease: str | None  # the lease the fetcher last finished its work under
    started_lease: str | None = None  # the lease the fetcher last began a request under
    started_at: float | None = None  # when (fetcher clock, epoch seconds)


NO_MARKS = LeaseMarks(None, None)


@dataclass(frozen=True)
class Lease:
    lease_id: str
    url: str
    url_fp: int
    part: int
    expires_at: float


def grant(url: str, url_fp: int, part: int, now: float, lease_s: float) -> Lease:
    """A new lease for one request to ``url``'s host, valid for ``lease_s`` from ``now``."""
    return Lease(uuid.uuid4().hex, url, url_fp, part, now + lease_s)


class Replay(Enum):
    NOT_STARTED = "not_started"  # never sent: fetch it
    FINISHED = "finished"  # its result was produced (or is about to be): nothing to do
    SUPERSEDED = "superseded"  # not the host's current lease: done or replaced; no request
    INTERRUPTED = "interrupted"  # under way when its fetcher stopped: no request now


def replay_check(lease_id: str, marks: LeaseMarks) -> Replay:
    """What to do with a request under ``lease_id`` that may have been handled before."""
    if marks.fetched_lease == lease_id:
        return Replay.FINISHED
    if marks.lease_id != lease_id:
        return Replay.SUPERSEDED
    if marks.started_lease == lease_id and marks.started_at is not None:
        return Replay.INTERRUPTED
    return Replay.NOT_STARTED


#: How much earlier than the frontier's earliest early check a fetcher starts confirming its lease: covers
#: clock skew between the processes and the latency of the started write (like the fetcher's lease guard).
CONFIRM_MARGIN_S = 5.0


def early_check_at(granted_at: float, lease_s: float, check_s: float, start_delay_s: float = 0.0) -> float | None:
    """When the frontier first looks at a lease granted at ``granted_at`` (None: no early check).

    Never before ``granted_at + check_s`` (the fetcher confirms every request starting from
    `confirm_after`, which assumes that). Later while requests take long to start anyway:
    ``start_delay_s`` is the recent time from grant to the fetcher's start (a CPU-bound fetcher's backlog
    legitimately holds requests ~20 s); checking at twice that keeps such leases from being fenced and
    re-leased in a loop. No check when it would come within ``CONFIRM_MARGIN_S`` of the expiry."""
    if check_s <= 0:
        return None
    at = granted_at + max(check_s, 2.0 * max(0.0, start_delay_s))
    if at >= granted_at + lease_s - CONFIRM_MARGIN_S:
        return None
    return at


def confirm_after(granted_at: float, lease_s: float, check_s: float) -> float:
    """From when a request under a lease granted at ``granted_at`` confirms its lease after writing its
    started mark (0.0: never, no early check)."""
    if early_check_at(granted_at, lease_s, check_s) is None:
        return 0.0
    return granted_at + check_s - CONFIRM_MARGIN_S


def handled(lease_id: str, marks: LeaseMarks) -> bool:
    """True if the fetcher began work under ``lease_id`` that the frontier must wait for: a request was
    started (it may be running), or the work was finished (its result is on its way)."""
    return marks.fetched_lease == lease_id or (marks.started_lease == lease_id and marks.started_at is not None)


def must_confirm(now: float, confirm_at: float) -> bool:
    """True if a request starting at ``now`` reads its lease again after its started mark (the frontier
    may have fenced the lease by now). ``confirm_at`` 0: a request from before early checks, never."""
    return 0.0 < confirm_at <= now


def may_send(now: float, expires_at: float, guard_s: float) -> bool:
    """True while a request may still start under a lease expiring at ``expires_at``."""
    return now <= expires_at - guard_s


def interrupted_fetch_s(started_at: float, now: float) -> float:
    """The longest a request started at ``started_at`` can have kept the host busy: until now (its
    connection closed when its process died, at the latest)."""
    return max(0.0, now - started_at)


def interrupted_delay_basis(elapsed_s: float, last_fetch_s: float | None) -> float:
    """The fetch time the 10x politeness rule counts for a request whose outcome was lost, ``elapsed_s``
    after it started. The host is free for certain once its fetcher is gone (the connection closed with
    it), and the delay runs from then; how slow the host is shows in its last known fetch, not in how long
    the crawler took to notice the crash (a session timeout and a rebalance: tens of seconds, which as a
    fetch time held hosts back for minutes after a kill -9). Without a known fetch the elapsed time counts,
    as before; never more than it."""
    elapsed_s = max(0.0, elapsed_s)
    if last_fetch_s is None or last_fetch_s < 0:
        return elapsed_s
    return min(elapsed_s, last_fetch_s)


@dataclass(frozen=True)
class Extend:
    """Keep the lease in force until ``until``: its started request may still run."""

    until: float


@dataclass(frozen=True)
class Hold:
    """End the lease, put the URL back and hold the host for a request of ``fetch_s`` ending now."""

    fetch_s: float


@dataclass(frozen=True)
class Release:
    """End the lease and put the URL back: no request went out under it."""


Expiry = Extend | Hold | Release


def on_expiry(lease_id: str, marks: LeaseMarks, now: float, max_request_s: float) -> Expiry:
    """The decision when a lease reaches its expiry with no result. ``max_request_s`` is the longest a
    started request can run (the fetcher's total timeout plus connect)."""
    started_at = marks.started_at if marks.started_lease == lease_id and marks.fetched_lease != lease_id else None
    if started_at is None:
        return Release()
    if now < started_at + max_request_s:
        return Extend(started_at + max_request_s)
    return Hold(interrupted_fetch_s(started_at, now))


class LeaseTable:
    """Live leases by host (at most one each) and a heap of their expiry times, so the expiry scan costs
    nothing while no lease is due. A heap entry whose lease has ended or been replaced is skipped."""

    def __init__(self) -> None:
        self._by_host: dict[str, Lease] = {}
        self._heap: list[tuple[float, str, str]] = []  # (expires_at, host, lease_id)

    def __len__(self) -> int:
        return len(self._by_host)

    def __contains__(self, host: str) -> bool:
        return host in self._by_host

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._by_host))

    def get(self, host: str) -> Lease | None:
        return self._by_host.get(host)

    def track(self, host: str, lease: Lease) -> None:
        self._by_host[host] = lease
        heapq.heappush(self._heap, (lease.expires_at, host, lease.lease_id))

    def untrack(self, host: str, lease: Lease) -> None:
        """Forget ``lease`` if it is still the host's (a newer one is kept)."""
        if self._by_host.get(host) is lease:
            del self._by_host[host]

    def end(self, host: str, lease_id: str) -> Lease | None:
        """Remove and return the host's lease if it is ``lease_id``; None otherwise (stale)."""
        lease = self._by_host.get(host)
        if lease is None or lease.lease_id != lease_id:
            return None
        del self._by_host[host]
        return lease

    def recheck_at(self, host: str, lease: Lease, at: float) -> None:
        """Look at ``lease`` again at ``at`` (an extension, or a retry after a failed read)."""
        heapq.heappush(self._heap, (at, host, lease.lease_id))

    def next_due(self, now: float) -> tuple[str, Lease] | None:
        """Pop the next live lease whose (re)check time has come, or None."""
        while self._heap and self._heap[0][0] <= now:
            _, host, lease_id = heapq.heappop(self._heap)
            lease = self._by_host.get(host)
            if lease is not None and lease.lease_id == lease_id:
                return host, lease
        return None

    def next_time(self) -> float | None:
        """When the earliest entry of a live lease is due, or None (stale heads are dropped, so a caller
        that sleeps until then is not woken for a lease that has ended)."""
        heap = self._heap
        while heap:
            _, host, lease_id = heap[0]
            lease = self._by_host.get(host)
            if lease is not None and lease.lease_id == lease_id:
                return heap[0][0]
            heapq.heappop(heap)
        return None

    def drop_parts(self, parts: set[int]) -> None:
        """Forget the leases of revoked partitions (their heap entries are skipped later)."""
        self._by_host = {h: le for h, le in self._by_host.items() if le.part not in parts}

    def hosts(self) -> list[str]:
        return list(self._by_host)
