"""What this fetcher process knows of the requests it made under each lease, so that a retry after an
engine failure is not mistaken for a crash.

The run loop retries a request whose handling raised a TransientError (Cassandra or S3 unavailable), with
the checks a replay gets: the lease row then shows the request *started* and not *finished*, which after a
crash means "under way, outcome lost, the host may have served it until now". In the same process that is
not so: either the request never went out (the started mark's write is what failed, or the lease ran out
before the send) or it went out and its exchange is known here, with its real duration and end. Counting
the time since the start instead charged an engine's stall as the host's response time: a host whose first
request straddled a 30 s Cassandra freeze was held 10x 30 s.

And when the request's result was built but its writes failed (host_state's fetched mark: Cassandra), the
retry produces that result, kept here, instead of fetching again: the replay rule would read the fetched
mark (the timed-out write may have landed) as "finished, result produced" and produce nothing, leaving the
host leased until the lease expired (60 s; it was 85 s across three freezes in the engine-fault e2e test).

One entry per lease, bounded (oldest dropped first); lost with the process, when the replay rule applies.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

from streamcrawl_contracts.messages import FetchResult
from streamcrawl_runtime.ports.loop import Output


@dataclass(frozen=True)
class Exchange:
    sent: bool  # a request went out (or may have) under the lease
    fetch_s: float | None = None  # the exchange's duration, once it ended (None: not known to have ended)
    ended_at: float | None = None  # when it ended (epoch seconds, the fetcher's clock)
    result: FetchResult | None = None  # the result built (its writes and produce still to do)
    outputs: tuple[Output, ...] = ()  # the archive records of the lease's own requests, with it


class ExchangeLog:
    def __init__(self, max_entries: int = 50_000) -> None:
        self.max_entries = max_entries
        self._by_lease: OrderedDict[str, Exchange] = OrderedDict()

    def _put(self, lease_id: str, ex: Exchange) -> None:
        self._by_lease[lease_id] = ex
        self._by_lease.move_to_end(lease_id)
        while len(self._by_lease) > self.max_entries:
            self._by_lease.popitem(last=False)

    def begin(self, lease_id: str) -> None:
        """The started mark is about to be written; nothing is sent yet (a retry's begin keeps what is known)."""
        if lease_id not in self._by_lease:
            self._put(lease_id, Exchange(sent=False))

    def sent(self, lease_id: str) -> None:
        """The request goes out now."""
        self._put(lease_id, Exchange(sent=True))

    def ended(self, lease_id: str, fetch_s: float, ended_at: float) -> None:
        """The exchange ended (an answer, or a network error) after ``fetch_s`` seconds, at ``ended_at``."""
        self._put(lease_id, Exchange(True, max(0.0, fetch_s), ended_at))

    def keep(self, lease_id: str, result: FetchResult, outputs: Sequence[Output]) -> None:
        """The lease's result is built: a retry after its writes failed produces this one."""
        ex = self._by_lease.get(lease_id) or Exchange(sent=False)
        self._put(lease_id, replace(ex, result=result, outputs=tuple(outputs)))

    def kept(self, lease_id: str) -> tuple[FetchResult, list[Output]] | None:
        ex = self._by_lease.get(lease_id)
        return None if ex is None or ex.result is None else (ex.result, list(ex.outputs))

    def get(self, lease_id: str) -> Exchange | None:
        return self._by_lease.get(lease_id)

    def forget(self, lease_id: str) -> None:
        """The lease's result is produced: no retry will ask again."""
        self._by_lease.pop(lease_id, None)

    def __len__(self) -> int:
        return len(self._by_lease)
