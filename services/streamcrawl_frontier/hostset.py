"""Bookkeeping for the frontier's bounded memory: what memory holds of each host's durable queue
(`HostWindow`), and where each owned partition's host index is read next (`HostScan`). Pure.

A host in memory holds a window of its queue: the URLs read so far, in queue order (priority, then
fingerprint), and the key of the last row read (`after`). Every queued URL of the host that is not in
memory sorts after that key, so the next read starts there and never rereads the finished rows (their
tombstones) before it; a new URL that would sort before it joins the window instead. `tail` says the host
may have queued URLs beyond the window.

The host index of a partition is read bucket by bucket, page by page, loading hosts while there is room.
A scan that completes with every host loaded is done; one that had to stop for room, or during which a
host went back to Cassandra (cold), starts over. A done scan is restarted now and then (the frontier's
index sweep), so rows that a crash left behind for hosts with nothing queued are found and dropped.
"""

from __future__ import annotations

from streamcrawl_core.partition import HOST_BUCKETS
from streamcrawl_runtime.ports.state import QueueKey


class HostWindow:
    __slots__ = ("after", "indexed", "pending", "tail")

    def __init__(self, indexed: bool = False) -> None:
        self.after: QueueKey | None = None  # the last row read from the durable queue (None: none yet)
        self.tail = False  # the durable queue may hold URLs beyond what memory holds
        self.indexed = indexed  # the host's row in its partition's index is known to exist
        # Work under way for the host that memory does not show yet (its load, a new URL's queue write):
        # while it runs the host is not idle, whatever its queue in memory says.
        self.pending = 0


class HostScan:
    __slots__ = ("_buckets", "after", "bucket", "dirty", "done")

    def __init__(self, buckets: int = HOST_BUCKETS) -> None:
        self.bucket = 0
        self.after: str | None = None  # the last host read in the current bucket
        self.done = False  # every indexed host is (or was, since nothing went cold) in memory
        self.dirty = False  # some host stayed or went cold during this pass: another pass is needed
        self._buckets = buckets

    def advance(self, hosts: list[str], full: bool) -> None:
        """A page of ``hosts`` was read; ``full``: the page was as long as asked (there may be more)."""
        if full and hosts:
            self.after = hosts[-1]
            return
        self.bucket += 1
        self.after = None
        if self.bucket >= self._buckets:  # the end of a pass
            self.bucket = 0
            if self.dirty:
                self.dirty = False
            else:
                self.done = True

    def skipped(self) -> None:
        """The scan stopped for lack of room: the hosts after this point are still cold."""
        self.dirty = True

    def restart(self) -> None:
        """Read the index again from its start (the periodic sweep: rows a crash left behind)."""
        self.done, self.dirty = False, False
        self.bucket, self.after = 0, None

    def went_cold(self) -> None:
        """A host of the partition is (again) in the index but not in memory."""
        if self.done:
            self.restart()
        else:
            self.dirty = True
