"""robots.txt rules per host: in-memory LRU in front of Cassandra host_state, refetched when due.

Lookup order: memory → host_state (so a restarted fetcher reuses what it knew) → fetch (`refresh`,
which the handler calls instead of a page request: one lease, one request to the host). Policy (what a
status means, how long rules live, the stale-but-fresh fallback on a failed refetch) is entirely
streamcrawl_core.robots; this module only decides where rules come from and where they are kept.

Keyed by host because the whole pipeline (Kafka keys, host_state) is keyed by host; the robots file is
fetched from the scheme and port of the first URL seen for that host.

The host's answer to the soft-404 probe (see handler.py) lives next to its rules, with the same lifetime:
a fresh robots.txt (`refresh`) forgets it here and in host_state (host_put_robots clears the column), so
each host is probed at most once per robots.txt lifetime (24 h by default), and only once one of its
pages has looked like a "not found" page (`want_probe`).
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from prometheus_client import Counter
from streamcrawl_core.robots import RobotsConfig, RobotsRules
from streamcrawl_runtime.ports.state import RobotsState

from streamcrawl_fetcher.ports import HttpResponse

log = logging.getLogger("streamcrawl.fetcher.robots")

ROBOTS_LOOKUPS = Counter("streamcrawl_fetcher_robots_lookups", "robots.txt rule lookups by source",
                         ["source"])
ROBOTS_PERSIST_FAILURES = Counter("streamcrawl_fetcher_robots_persist_failures",
                                  "robots.txt rules that could not be written to host_state")
ROBOTS_FETCHES = Counter("streamcrawl_fetcher_robots_fetches", "robots.txt fetches by resulting kind",
                         ["kind"])

SOFT404_PERSIST_FAILURES = Counter("streamcrawl_fetcher_soft404_persist_failures",
                                   "Soft-404 probe answers that could not be written to host_state")

#: The stored probe answer of a host that does not serve soft 404s (or could not be probed).
NO_SOFT404 = "none"
_SIGNATURE_RE = re.compile(r"[0-9a-f]{16}")

#: (robots URL, the list to append each answered hop's (URL, start time, response) to) → final (status,
#: body); status None = unreachable.
RobotsHops = list[tuple[str, float, HttpResponse]]
RobotsFetch = Callable[[str, RobotsHops], Awaitable[tuple[int | None, bytes | None]]]


class RobotsCache:
    def __init__(self, state: RobotsState, fetch: RobotsFetch, config: RobotsConfig,
                 max_entries: int = 100_000) -> None:
        self.state = state
        self.fetch = fetch
        self.config = config
        self.max_entries = max_entries
        self._mem: OrderedDict[str, RobotsRules] = OrderedDict()
        self._soft404: dict[str, str] = {}  # host -> probe answer; evicted with the host's rules
        # Hosts not probed yet one of whose pages looked like a "not found" page: their next lease goes to
        # the probe. Memory only: lost on a restart or a partition move, the page is fetched again, looks
        # the same and asks again (one request more, on that host only).
        self._probe_wanted: set[str] = set()

    def forget(self, host: str) -> None:
        self._mem.pop(host, None)
        self._soft404.pop(host, None)
        self._probe_wanted.discard(host)

    def want_probe(self, host: str) -> None:
        """A page of `host` looked like a "not found" page: probe the host before its next page."""
        if host in self._mem:  # the rules were just used: the mark is evicted with them
            self._probe_wanted.add(host)

    def probe_wanted(self, host: str) -> bool:
        return host in self._probe_wanted

    async def cached(self, host: str, now: float) -> RobotsRules | None:
        """Rules for `host` from memory or host_state, or None when robots.txt must be (re)fetched.

        Cassandra errors propagate (TransientError: the run loop retries the request later).
        """
        rules = self._mem.get(host)
        source = "memory"
        if rules is None:
            rules, source = await self._load(host), "cassandra"
        else:
            self._mem.move_to_end(host)
        if rules is None or rules.needs_refetch(now):
            ROBOTS_LOOKUPS.labels("miss").inc()
            return None
        ROBOTS_LOOKUPS.labels(source).inc()
        return rules

    async def refresh(self, host: str, origin: str, now: float, hops: RobotsHops | None = None) -> RobotsRules:
        """Fetch `origin`/robots.txt and store the resulting rules (memory and host_state). The answered
        requests (a redirect chain has several) are appended to `hops` (for the WARC writer)."""
        rules = await self.fetch_rules(host, origin, now, hops)
        await self.persist(host, rules)
        return rules

    async def fetch_rules(self, host: str, origin: str, now: float, hops: RobotsHops | None = None) -> RobotsRules:
        """`refresh` without the write to host_state (`persist`): the rules are in memory only. The
        fetcher times the host's exchange between the two."""
        previous = self._mem.get(host)
        status, body = await self.fetch(origin + "/robots.txt", hops if hops is not None else [])
        rules = RobotsRules.from_fetch(status, body, now, self.config, previous=previous)
        ROBOTS_FETCHES.labels("stale_fallback" if rules.stale_fallback else rules.kind).inc()
        self._remember(host, rules)
        if not rules.stale_fallback:
            self._soft404.pop(host, None)  # new rules, new probe (persist clears host_state's copy)
            self._probe_wanted.discard(host)
        return rules

    async def persist(self, host: str, rules: RobotsRules) -> None:
        """Write fetched rules to host_state (a stale fallback keeps the copy host_state holds already)."""
        if not rules.stale_fallback:
            try:
                await self.state.host_put_robots(host, rules.status, rules.text or None, rules.fetched_at,
                                                 rules.crawl_delay())
            except Exception as exc:
                # Not fatal: the rules are in memory. Failing would make the loop retry this lease, which
                # would then find the rules cached and request the page: two requests in one lease.
                ROBOTS_PERSIST_FAILURES.inc()
                log.warning("robots not persisted", extra={"error": repr(exc)[:300]})

    async def drop_fetched_since(self, host: str, since: float) -> bool:
        """Forget `host`'s rules if they were fetched at or after `since` (here, and in host_state, where they
        are written back as fetched at time 0: stale, so the next lookup misses and robots.txt is fetched
        again). For a lease that a crash interrupted after its robots.txt request: the rules were persisted
        before the lease's outputs were durable, so the request's archive records went down with the
        process, and without this the robots.txt a host was crawled under would never be archived (seen in
        a kill -9 e2e run). The cost: one more robots.txt request, under a lease of its own. Returns whether
        it dropped them. Cassandra errors propagate (the run loop retries the record; this runs again)."""
        rules = self._mem.get(host) or await self._load(host)
        if rules is None or rules.stale_fallback or rules.fetched_at < since:
            return False
        self.forget(host)
        await self.state.host_put_robots(host, rules.status, rules.text or None, 0.0, rules.crawl_delay())
        return True

    async def soft404(self, host: str) -> str | None:
        """The host's soft-404 probe answer ("%016x" signature or NO_SOFT404), or None when the host has
        not been probed under its current robots.txt. Read from host_state once when not in memory."""
        value = self._soft404.get(host)
        if value is None and host not in self._mem:
            # Rules in memory came with their probe answer (_load) or were just fetched (no answer yet);
            # only a host whose rules were evicted meanwhile needs the row.
            hs = await self.state.host_get(host)
            value = hs.soft404_signature if hs is not None else None
            if value is None or not _valid_soft404(value):
                return None  # unknown (or a corrupt row, overwritten by the next probe)
            if host in self._mem:
                self._soft404[host] = value
        return value

    async def put_soft404(self, host: str, value: str) -> None:
        """Remember the host's probe answer (memory and host_state)."""
        if not _valid_soft404(value):
            raise ValueError(f"soft-404 answer must be {NO_SOFT404!r} or 16 hex digits, got {value!r}")
        self._probe_wanted.discard(host)
        if host in self._mem:
            self._soft404[host] = value
        try:
            await self.state.host_put_soft404(host, value)
        except Exception as exc:
            # Not fatal, for the same reason as the robots rules: the answer is in memory.
            SOFT404_PERSIST_FAILURES.inc()
            log.warning("soft-404 probe answer not persisted", extra={"error": repr(exc)[:300]})

    async def _load(self, host: str) -> RobotsRules | None:
        hs = await self.state.host_get(host)
        if hs is None or hs.robots_fetched_at is None:
            return None
        body = (hs.robots_body or "").encode("utf-8")
        try:
            rules = RobotsRules.from_fetch(hs.robots_status, body, hs.robots_fetched_at, self.config)
        except ValueError:  # a corrupt row: refetch rather than fail the request
            return None
        self._remember(host, rules)
        # The probe answer is in the same row: keep it now rather than read the row again in soft404().
        if hs.soft404_signature is not None and _valid_soft404(hs.soft404_signature):
            self._soft404[host] = hs.soft404_signature
        return rules

    def _remember(self, host: str, rules: RobotsRules) -> None:
        self._mem[host] = rules
        self._mem.move_to_end(host)
        while len(self._mem) > self.max_entries:
            evicted, _ = self._mem.popitem(last=False)
            self._soft404.pop(evicted, None)
            self._probe_wanted.discard(evicted)


def _valid_soft404(value: str) -> bool:
    return value == NO_SOFT404 or _SIGNATURE_RE.fullmatch(value) is not None
