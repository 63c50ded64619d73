"""The Mercator-style URL frontier: which URL matters most, and which host may be hit now.

Structure (all in memory, pure; the service persists state and rebuilds with ``restore_host``):

* **Back queues** -- one per host, holding only that host's URLs (a heap per kind ordered by
  priority, then arrival). A host is in exactly one state: IDLE (nothing due), WAITING (in the
  timer heap), READY (timer expired, waiting to be picked) or IN_FLIGHT (leased to a fetcher).
* **Timer heap** of ``(next_allowed_at, host, epoch)``. Entries are invalidated lazily: every state
  change bumps the host's ``epoch`` and stale entries are skipped when popped.
* **Front queues** -- ``F`` priority levels (0 = highest) per kind. A READY host sits in the FIFO
  bucket ``[kind][priority of its best URL of that kind]``. A *smooth weighted round robin* cycle
  over the levels (level ``p`` appears ``weight[p]`` times, default ``F - p``) skips empty levels:
  strongly biased, yet every non-empty level is served at least once per cycle of ``sum(weights)``
  picks (no starvation), and an empty level banks no credit, so it cannot burst on return.
* **Discovery/refresh split** -- *stride scheduling* over the two kinds (default 30/70), so a
  flood of new links cannot starve recrawls and vice versa; a kind with nothing ready cedes its
  share to the other and re-enters at the current virtual time (again no banked credit).
* **URLs with ``not_before`` in the future** wait in a separate heap and join their host's queue
  when due.

Politeness guarantees: ``next(now)`` only returns a URL of a host whose timer is <= ``now`` and
which has no fetch in flight; it leases the host until ``done`` or ``release``. ``now`` must be
non-decreasing across calls (the due-check for ``not_before`` relies on the latest ``now`` seen).

Complexity (B hosts, U queued URLs, F levels, a constant): ``add`` O(log U); ``next`` amortised
O(log B + log U + W) -- each host moves timer heap -> bucket once per lease with one heap pop; the
level cursor usually takes one step, at most W = sum(weights) (55 by default) when only
low-weight levels are non-empty; ``done``/``release`` O(log B + log U). No operation scans hosts.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque

from streamcrawl_core.frontier_parts import (
    IDLE,
    IN_FLIGHT,
    KIND_INDEX,
    KINDS,
    READY,
    WAITING,
    Entry,
    FrontierConfig,
    FrontierItem,
    HostRecord,
    HostSnapshot,
    Kind,
    KindSplit,
    PriorityCycle,
)
from streamcrawl_core.politeness import HostOverride, backoff_delay, required_delay, should_back_off

__all__ = ["Frontier", "FrontierConfig", "FrontierItem", "HostSnapshot", "Kind"]

class Frontier:
    def __init__(self, config: FrontierConfig | None = None) -> None:
        self._cfg = config if config is not None else FrontierConfig()
        self._pol = self._cfg.politeness
        nprio = self._cfg.num_priorities
        self._hosts: dict[str, HostRecord] = {}
        self._known: dict[str, str] = {}  # url -> host for every URL queued, delayed or in flight
        # (time, tick, host, epoch): the unique tick stops tuple comparison before it reaches the
        # host object (and avoids slow string compares when many timers are equal, e.g. at start).
        self._timer: list[tuple[float, int, HostRecord, int]] = []
        self._tick = 0
        self._delayed: list[tuple[float, int, str, str, int, int, float]] = []
        self._buckets = [[deque[tuple[HostRecord, int]]() for _ in range(nprio)] for _ in KINDS]
        self._live = [[0] * nprio for _ in KINDS]
        self._ready = [0, 0]  # live bucket entries per kind
        self._levels = [PriorityCycle(self._cfg.weights()) for _ in KINDS]
        share = self._cfg.discovery_share
        self._kinds = KindSplit(share)
        self._rng = random.Random(self._cfg.seed)
        self._seq = 0
        self._queued = 0
        self._in_flight = 0
        self._now = 0.0  # latest `now` seen; not_before <= this is already due

    # ----------------------------------------------------------------- state transitions
    def _host(self, name: str) -> HostRecord:
        h = self._hosts.get(name)
        if h is None:
            h = self._hosts[name] = HostRecord(name)
        return h

    def _schedule(self, h: HostRecord) -> None:
        """Host is not in flight: put it on the timer heap if it has due URLs, else IDLE."""
        h.epoch += 1
        if h.queues[0] or h.queues[1]:
            h.state = WAITING
            self._tick += 1
            heapq.heappush(self._timer, (h.next_allowed, self._tick, h, h.epoch))
        else:
            h.state = IDLE

    def _slot(self, h: HostRecord) -> None:
        h.state = READY
        q0, q1 = h.queues
        slot, ready = h.slot, self._ready
        if q0:
            p = slot[0] = q0[0][0]
            self._buckets[0][p].append((h, h.epoch))
            self._live[0][p] += 1
            ready[0] += 1
        if q1:
            p = slot[1] = q1[0][0]
            self._buckets[1][p].append((h, h.epoch))
            self._live[1][p] += 1
            ready[1] += 1

    def _unslot(self, h: HostRecord) -> None:
        slot, ready = h.slot, self._ready
        p = slot[0]
        if p >= 0:
            self._live[0][p] -= 1
            ready[0] -= 1
            slot[0] = -1
        p = slot[1]
        if p >= 0:
            self._live[1][p] -= 1
            ready[1] -= 1
            slot[1] = -1
        h.epoch += 1  # makes every bucket entry of this host stale

    def _enqueue(self, h: HostRecord, k: int, entry: Entry) -> None:
        heapq.heappush(h.queues[k], entry)
        if h.state == IDLE:
            self._schedule(h)
        elif h.state == READY:
            current = h.slot[k]
            if current < 0 or entry[0] < current:
                self._unslot(h)
                self._slot(h)

    # ----------------------------------------------------------------- public API
    def add(
        self,
        url: str,
        host: str,
        priority: int = 5,
        not_before: float = 0.0,
        kind: Kind = "discovery",
        *,
        enqueued_at: float = 0.0,
    ) -> bool:
        """Queue ``url``; False (and no change) if it is already queued or in flight."""
        if url in self._known:
            return False
        if not url or not host:
            raise ValueError("url and host must be non-empty")
        if not isinstance(priority, int) or not 0 <= priority < self._cfg.num_priorities:
            raise ValueError(f"priority must be in [0, {self._cfg.num_priorities}), got {priority!r}")
        k = KIND_INDEX.get(kind)
        if k is None:
            raise ValueError(f"kind must be 'discovery' or 'refresh', got {kind!r}")
        if not math.isfinite(not_before):
            raise ValueError(f"not_before must be finite, got {not_before!r}")
        h = self._host(host)
        self._known[url] = host
        self._seq += 1
        self._queued += 1
        if not_before > self._now:
            h.delayed += 1
            heapq.heappush(self._delayed, (not_before, self._seq, url, host, priority, k, enqueued_at))
        else:
            self._enqueue(h, k, (priority, self._seq, url, enqueued_at, not_before))
        return True

    def _promote(self, now: float) -> None:
        """URLs whose not_before has come join their host's queue; hosts whose timer expired become READY."""
        if now > self._now:
            self._now = now
        delayed = self._delayed
        while delayed and delayed[0][0] <= now:
            nb, seq, url, name, prio, k, enq = heapq.heappop(delayed)
            h = self._hosts[name]
            h.delayed -= 1
            self._enqueue(h, k, (prio, seq, url, enq, nb))
        timer = self._timer
        while timer and timer[0][0] <= now:
            _, _, h, epoch = heapq.heappop(timer)
            if h.epoch == epoch and h.state == WAITING:
                self._slot(h)

    def ready(self, now: float) -> tuple[int, int]:
        """(discovery, refresh): hosts that ``next(now, kind)`` could lease a URL of that kind from (a host
        with both kinds counts in both)."""
        self._promote(now)
        return self._ready[0], self._ready[1]

    def next(self, now: float, kind: Kind | None = None) -> FrontierItem | None:
        """Lease the best URL of a host that may be contacted at ``now``; None if none may. ``kind``: a URL of
        that kind only (a caller that shares the split between several frontiers); None: this frontier's own
        discovery/refresh split decides."""
        self._promote(now)
        ready = self._ready
        if kind is not None:
            k = KIND_INDEX[kind]
            if not ready[k]:
                return None
        elif ready[0]:
            k = self._kinds.pick() if ready[1] else 0
        elif ready[1]:
            k = 1
        else:
            return None
        p = self._levels[k].pick(self._live[k])
        bucket = self._buckets[k][p]
        while True:  # live count > 0 guarantees a valid entry; stale ones are dropped on the way
            h, epoch = bucket.popleft()
            if h.epoch == epoch:
                break
        self._unslot(h)
        entry = heapq.heappop(h.queues[k])
        h.state = IN_FLIGHT
        h.inflight = (k, entry)
        self._queued -= 1
        self._in_flight += 1
        return FrontierItem(entry[2], h.name, entry[0], KINDS[k], entry[3], entry[4])

    def done(
        self,
        host: str,
        now: float,
        fetch_s: float,
        status: int | None,
        crawl_delay_s: float | None = None,
        retry_after_s: float | None = None,
    ) -> float:
        """Finish the host's fetch; set and return its next allowed time.

        Delay = politeness rule; on 429/502/503/504/network error the back-off level rises and the delay
        is at least the (jittered, capped) back-off, honouring Retry-After; success resets it.
        A ``done`` for a host that is not in flight (late report after ``release``) only pushes
        the timer later, never earlier, and touches no queue.
        """
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        h = self._hosts.get(host) or self._host(host)
        if crawl_delay_s is not None:
            h.crawl_delay = crawl_delay_s
        delay = required_delay(fetch_s, h.crawl_delay, self._pol, h.override)
        # Fast path for the common 2xx-4xx answers; should_back_off is the rule of record.
        if (status is None or status >= 500 or status == 429) and should_back_off(status):
            h.backoff_level = min(h.backoff_level + 1, self._cfg.max_backoff_level)
            delay = max(delay, backoff_delay(h.backoff_level, retry_after_s, self._rng.random(), self._pol))
        else:
            h.backoff_level = 0
        if now > self._now:
            self._now = now
        when = now + delay
        if h.state == IN_FLIGHT and h.inflight is not None:
            del self._known[h.inflight[1][2]]
            h.inflight = None
            self._in_flight -= 1
            h.next_allowed = when
            self._schedule(h)
        elif when > h.next_allowed:
            h.next_allowed = when
            if h.state == READY:
                self._unslot(h)
            if h.state != IDLE:
                self._schedule(h)
        return h.next_allowed

    def release(self, host: str, url: str, now: float, fetch_s: float | None = None) -> bool:
        """Return an expired lease: the URL goes back to its place in the host's queue and the
        host is freed after the minimum delay (the fetch may have happened). ``fetch_s``: a request
        under the lease may have run for up to that long, ending by ``now`` (its outcome was lost),
        so the host waits the politeness delay of such a fetch (see ``hold``). False if ``url`` is
        not the host's leased URL."""
        h = self._hosts.get(host)
        if h is None or h.state != IN_FLIGHT or h.inflight is None or h.inflight[1][2] != url:
            return False
        k, entry = h.inflight
        h.inflight = None
        heapq.heappush(h.queues[k], entry)  # original (priority, seq): it keeps its place
        self._in_flight -= 1
        self._queued += 1
        if now > self._now:
            self._now = now
        min_delay = self._pol.min_delay_s
        if h.override is not None and h.override.min_delay_s is not None:
            min_delay = h.override.min_delay_s
        h.next_allowed = max(h.next_allowed, now + min_delay)
        if fetch_s is not None:
            h.next_allowed = max(h.next_allowed, now + required_delay(fetch_s, h.crawl_delay, self._pol, h.override))
        self._schedule(h)
        return True

    def hold(self, host: str, now: float, fetch_s: float) -> float:
        """A request to the host may have run for up to ``fetch_s`` seconds, ending by ``now``, and its
        outcome is unknown (cut short by a crash): push the host's timer to the politeness delay of
        such a fetch. Later only, never earlier; the back-off level and the queues are untouched (the
        host did nothing wrong), and a host in flight stays leased (its ``done`` sets its timer).
        Returns the host's next allowed time."""
        if not math.isfinite(now):
            raise ValueError(f"now must be finite, got {now!r}")
        h = self._host(host)
        when = now + required_delay(fetch_s, h.crawl_delay, self._pol, h.override)
        if when > h.next_allowed:
            h.next_allowed = when
            if h.state == READY:
                self._unslot(h)
            if h.state in (READY, WAITING):
                self._schedule(h)
        return h.next_allowed

    def set_host_params(
        self, host: str, crawl_delay_s: float | None = None, override: HostOverride | None = None
    ) -> None:
        """Set (None clears) the host's robots.txt Crawl-delay and agreed-rate override."""
        h = self._host(host)
        h.crawl_delay = crawl_delay_s
        h.override = override

    def restore_host(self, host: str, next_allowed_at: float, backoff_level: int) -> None:
        """Rebuild a host's politeness state from durable storage (e.g. after a restart)."""
        if not math.isfinite(next_allowed_at) or backoff_level < 0:
            raise ValueError("next_allowed_at must be finite and backoff_level >= 0")
        h = self._host(host)
        h.next_allowed = next_allowed_at
        h.backoff_level = min(backoff_level, self._cfg.max_backoff_level)
        if h.state == READY:
            self._unslot(h)
        if h.state in (READY, WAITING):
            self._schedule(h)

    def forget(self, host: str) -> bool:
        """Drop an idle host (nothing queued, delayed or in flight) from memory; its timer and back-off
        are the caller's to keep (the service has them in durable storage and restores them with
        ``restore_host`` when the host comes back). False, and no change, if the host is not idle."""
        h = self._hosts.get(host)
        if h is None:
            return True
        if h.state == IN_FLIGHT or h.queues[0] or h.queues[1] or h.delayed:
            return False
        if h.state == READY:
            self._unslot(h)
        h.epoch += 1  # its timer entry, if any, is stale from now on
        h.state = IDLE
        del self._hosts[host]
        return True

    def next_wakeup(self) -> float | None:
        """Earliest time ``next`` may return an item (a lower bound); None if only ``done`` can help."""
        if self._ready[0] or self._ready[1]:
            return self._now
        timer = self._timer
        while timer:  # drop stale heads so the answer is not too early
            _, _, h, epoch = timer[0]
            if h.epoch == epoch and h.state == WAITING:
                break
            heapq.heappop(timer)
        candidates = [timer[0][0]] if timer else []
        if self._delayed:
            candidates.append(self._delayed[0][0])
        return min(candidates) if candidates else None

    def host_snapshot(self, host: str) -> HostSnapshot | None:
        h = self._hosts.get(host)
        if h is None:
            return None
        in_flight = h.state == IN_FLIGHT
        return HostSnapshot(host, h.next_allowed, h.backoff_level, in_flight, self.queued_for(host))

    def queued_for(self, host: str) -> int:
        """URLs of ``host`` queued (due or not yet due), excluding one in flight."""
        h = self._hosts.get(host)
        if h is None:
            return 0
        return len(h.queues[0]) + len(h.queues[1]) + h.delayed

    def queued_of(self, host: str, kind: Kind) -> int:
        """URLs of ``host`` of that kind queued and due (not counting those waiting for their not_before)."""
        h = self._hosts.get(host)
        return 0 if h is None else len(h.queues[KIND_INDEX[kind]])

    def busiest(self, n: int) -> list[tuple[str, int]]:
        """The ``n`` hosts with the most queued URLs (as ``queued_for`` counts them), most first, ties by
        name; hosts with nothing queued are left out. O(B log n): for periodic summaries, not per fetch."""
        counts = ((len(h.queues[0]) + len(h.queues[1]) + h.delayed, h.name) for h in self._hosts.values())
        top = heapq.nsmallest(n, ((-c, name) for c, name in counts if c > 0))
        return [(name, -neg) for neg, name in top]

    def is_known(self, url: str) -> bool:
        return url in self._known

    def __len__(self) -> int:
        """URLs queued (due or not yet due), excluding those in flight."""
        return self._queued

    @property
    def hosts_count(self) -> int:
        """Hosts with state: active back queues plus remembered politeness timers."""
        return len(self._hosts)

    @property
    def in_flight_count(self) -> int:
        return self._in_flight
