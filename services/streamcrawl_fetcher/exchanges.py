"""What this fetcher process knows of the requests it made under each lease, so that a retry after an
engine failure is not mistaken for a crash.

The run loop retries a request whose handling raised a TransientError (Cassandra or S3 unavailable), with
the checks a replay gets: the lease row then shows the request *started* and not *finished*, which after a
crash means "under way, outcome lost, the host may have served it until now". In the same process that is
not so: either the request never went out (the started mark's write is what failed, or the lease ran out
before the send) or it went out and its exchange is known here, with its real duration and end. Counting
the time since the start instead charged an engine's stall as the host's response time: a host whose first
request straddled a 30 s Cassandra freeze was held 10x 30 s.

One entry per lease, bounded (oldest dropped first); lost with the process, when the replay rule applies.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class Exchange:
    sent: bool  # a request went out (or may have) under the lease
    fetch_s: float | None = None  # the exchange's duration, once it ended (None: not known to have ended)
    ended_at: float | None = None  # when it ended (epoch seconds, the fetcher's clock)


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

    def get(self, lease_id: str) -> Exchange | None:
        return self._by_lease.get(lease_id)

    def forget(self, lease_id: str) -> None:
        """The lease's result is produced: no retry will ask again."""
        self._by_lease.pop(lease_id, None)

    def __len__(self) -> int:
        return len(self._by_lease)
