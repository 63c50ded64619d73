"""Per-host page budgets (URLs admitted per host per crawl cycle) that survive restarts and partition moves:
host_state keeps (cycle, urls_this_cycle); a count of an older cycle counts as 0.

* Load: lazily, the first time a host has a new URL in this process (or since its partition was
  assigned again) its host_state row is read once, before that URL is admitted; later URLs consume the
  in-memory counter. Reading every host of a partition in on_assign would mean a scan (host_state is
  keyed by host, not partition) and most of those hosts may never get a candidate in this process.
* Write-behind: an admitted URL only marks its host dirty; dirty counts are written by the handler's
  tick() every budget_flush_s (5 s by default: a busy host costs one write per 5 s, not one per second),
  on_revoke (the revoked partitions' hosts, which are then forgotten) and close().
* Loss bound: a crash (kill -9) loses the increments not yet written, so per crash a host can exceed
  its budget by at most the URLs admitted for it since its last flush: about budget_flush_s
  of admissions, plus those of a flush that was in flight. Tying the flush to the offset commit would
  not remove this loss: a replayed candidate event whose URL was already admitted is re-emitted as a
  "replay" without consuming budget, so an unwritten increment is lost whether or not its offset was
  committed. The same bound covers a partition move where the new owner reads a host before the old
  owner's on_revoke flush has landed.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Collection

from prometheus_client import Counter
from streamcrawl_core.traps import HostBudget, TrapConfig
from streamcrawl_runtime.ports.state import DedupState

log = logging.getLogger("streamcrawl.dedup")

BUDGET_FLUSH_FAILURES = Counter("streamcrawl_dedup_budget_flush_failures_total",
                                "Host budget counts that could not be written to host_state")

_FLUSH_CONCURRENCY = 256  # host_state writes in flight at once during a budget flush


class PersistedBudgets:
    """The dedup handler's per-host budget counters: loaded from host_state, written behind (see above).
    ``owned`` is the handler's own set of owned partitions (shared, not copied): only hosts of owned
    partitions are remembered as loaded or marked dirty."""

    def __init__(self, state: DedupState, traps: TrapConfig, owned: set[int], *, cycle_s: float,
                 flush_s: float) -> None:
        if cycle_s < 1.0:  # host_state.cycle is a CQL int: int(now // cycle_s) must stay below 2**31
            raise ValueError(f"cycle_s must be >= 1 s, got {cycle_s!r}")
        self.state = state
        self.counts = HostBudget(traps)
        self.owned = owned
        self.cycle_s = cycle_s  # the per-host page budget renews every cycle
        self.cycle = 0
        self.flush_s = flush_s
        self._flushed_at = 0.0
        self._hosts: dict[int, set[str]] = {}  # partition → hosts whose count was read from host_state
        self._dirty: dict[str, int] = {}  # host → its partition: count not yet written to host_state
        self._flush_lock = asyncio.Lock()  # one flush at a time: a later write never carries an older count

    async def try_consume(self, part: int, host: str, now: float) -> bool:
        """Count one new URL of ``host`` (a candidate of partition ``part``) against its budget of the cycle
        of ``now``; False: over budget, nothing counted."""
        cycle = int(now // self.cycle_s)
        if cycle != self.cycle:
            self.cycle = cycle
            self.counts.forget_before(cycle)
        await self._load(part, host)
        if not self.counts.try_consume(host, self.cycle):
            return False
        if part in self.owned:  # not a record finishing after its partition moved
            self._dirty[host] = part
        return True

    def refund(self, host: str, n: int) -> None:
        """Give back ``n`` URLs of ``host`` counted in this cycle by an attempt that failed (its message is
        retried, and counts them again)."""
        if n > 0:
            self.counts.set_used(host, self.cycle, max(0, self.counts.used(host, self.cycle) - n))

    def flush_due(self) -> float:
        """When the next write-behind flush is due (inf: nothing dirty)."""
        return self._flushed_at + self.flush_s if self._dirty else math.inf

    async def tick(self, now: float) -> None:
        """The write-behind flush, every flush_s; a failure leaves the counts dirty for the next one."""
        if now - self._flushed_at >= self.flush_s:
            self._flushed_at = now
            try:
                await self.flush()
            except Exception as exc:  # still dirty: the next tick retries; the rest of the tick goes on
                log.warning("budget flush failed", extra={"error": repr(exc)[:300]})

    def forget_partition(self, part: int) -> None:
        """A revoked partition's hosts: the next owner counts on from host_state."""
        for host in self._hosts.pop(part, set()):
            self.counts.forget(host)

    def drop_dirty(self, partitions: Collection[int]) -> None:
        self._dirty = {h: p for h, p in self._dirty.items() if p not in partitions}

    async def flush(self, partitions: Collection[int] | None = None) -> None:
        """Write the dirty hosts' counts (of ``partitions``, or all) to host_state. A host whose write
        fails stays dirty and the first error is raised."""
        async with self._flush_lock:
            hosts = [(h, p) for h, p in self._dirty.items() if partitions is None or p in partitions]
            if not hosts:
                return
            for h, _ in hosts:
                del self._dirty[h]
            cycle = self.cycle  # counts are read now, while marked clean: a later increment marks them again
            writes = [(h, p, self.counts.used(h, cycle)) for h, p in hosts]
            first_error: BaseException | None = None
            for i in range(0, len(writes), _FLUSH_CONCURRENCY):
                chunk = writes[i:i + _FLUSH_CONCURRENCY]
                results = await asyncio.gather(*(self.state.host_put_budget(h, cycle, n) for h, _, n in chunk),
                                               return_exceptions=True)
                for (h, p, _), res in zip(chunk, results, strict=True):
                    if isinstance(res, BaseException):
                        BUDGET_FLUSH_FAILURES.inc()
                        first_error = first_error or res
                        if p in self.owned:
                            self._dirty.setdefault(h, p)
            if first_error is not None:
                raise first_error

    async def _load(self, part: int, host: str) -> None:
        """Read the host's persisted count once (per process, and again after its partition comes back).
        Candidates of one host are handled one after another (the loop serializes a key), so no second
        read of the same host can race with this one."""
        if host in self._hosts.get(part, ()):
            return
        hs = await self.state.host_get(host)
        if hs is not None and hs.cycle == self.cycle:
            self.counts.set_used(host, self.cycle, hs.urls_this_cycle)
        else:  # no row, or a count of an older cycle: 0 in this one
            self.counts.forget(host)
        if part in self.owned:
            self._hosts.setdefault(part, set()).add(host)
