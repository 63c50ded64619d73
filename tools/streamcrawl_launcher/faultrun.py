"""One crawl of the synthetic web with faults injected on a schedule: engine freezes and restarts
(`faults.inject`) and kill -9 of service instances, which a supervisor here restarts. Judged afterwards
from the web's own request log (`verdict.judge`). Used by the engine-fault e2e test, `bench/engine_faults.py`
(`make bench-faults`) and `bench/chaos.py` (`make chaos`).

Faults act on the stack of ``$STREAMCRAWL_STACK_DIR`` (its pid files under ``run/``): never run this
against a stack others share.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.log import LogEntry, load_log
from streamcrawl_synthweb.truth import GroundTruth

from streamcrawl_launcher.crawl import SERVICES, Crawl, CrawlOptions
from streamcrawl_launcher.faults import ENGINE_USERS, Fault, Outage, ReadyzWatcher, ensure_up, inject, readyz_ports
from streamcrawl_launcher.verdict import Verdict, judge


@dataclass(frozen=True)
class KillLoop:
    """kill -9 a random service instance every ``every_s`` for ``for_s``; each is restarted after
    ``restart_after_s`` (the supervisor: Kubernetes restarts a crashed pod)."""

    for_s: float = 300.0
    every_s: float = 15.0
    restart_after_s: float = 1.0
    services: tuple[str, ...] = ("frontier", "fetcher", "parser", "dedup", "recrawl", "warc")
    seed: int = 1


@dataclass
class FaultRun:
    crawl: Crawl
    truth: GroundTruth
    entries: list[LogEntry]
    outages: list[Outage]
    watcher: ReadyzWatcher
    seeded_at: float
    kills: list[tuple[float, str]] = field(default_factory=list)
    #: The pipeline drained (every consumer group caught up, nothing queued) within the timeout.
    idle: bool = True
    #: Per fault (with ``ready_wait_s``): seconds waited after the pause for the engine's users to be ready
    #: again before the next fault, and whether they were.
    ready_waits: list[tuple[str, float, bool]] = field(default_factory=list)
    #: Why the crawl was not idle in time (``idle`` False): the last progress, what was still queued and
    #: the post-mortem's lagging partitions, for a failure's message.
    not_idle: str = ""

    def verdict(self) -> Verdict:
        return judge(self.entries, self.truth, self.outages)


def _alive_wait(crawl: Crawl, seconds: float, supervise: bool = False) -> None:
    """Sleep, failing at once if a service died (unless ``supervise``: then it is restarted). No Kafka
    call: the broker may be frozen."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        dead = crawl.dead_services()
        if dead and not supervise:
            raise RuntimeError(f"service(s) exited: {dead} (see {crawl.logs})")
        for name in dead:
            crawl.start_service(name.split("-")[0], _instance(name))
        time.sleep(0.5)


def _instance(name: str) -> int:
    return int(name.split("-")[1]) - 1 if "-" in name else 0


def run_faults(workdir: Path, hosts: int, web_seed: int, profile: str, faults: Sequence[Fault],
               first_at_s: float = 15.0, between_s: float = 6.0, env: dict[str, str] | None = None,
               log_level: str = "WARNING", start_after_results: int | None = None,
               kill_loop: KillLoop | None = None, idle_s: float = 10.0, timeout_s: float = 900.0,
               allow_timeout: bool = False, ready_wait_s: float = 0.0) -> FaultRun:
    """Crawl; ``first_at_s`` after seeding (or once ``start_after_results`` results are in) apply
    ``faults`` one after the other, ``between_s`` apart; with ``kill_loop``, kill service instances meanwhile
    (the engine faults are then spread over its span). Wait until the crawl is idle (with ``allow_timeout``,
    a crawl still not idle after ``timeout_s`` is judged as it is, with ``idle`` False). With
    ``ready_wait_s``, after each fault's pause wait up to that long more for every service that uses the
    engine to answer ready (the next fault starts then, ready or not; `FaultRun.ready_waits` says). No
    engine stays frozen or stopped, whatever fails."""
    crawl = Crawl(CrawlOptions(workdir=workdir, hosts=hosts, web_seed=web_seed, extra_env=env or {},
                               log_level=log_level, synthweb_args=["--profile", profile]))
    watcher = ReadyzWatcher(readyz_ports())
    outages: list[Outage] = []
    kills: list[tuple[float, str]] = []
    idle, not_idle = True, ""
    ready_waits: list[tuple[str, float, bool]] = []
    crawl.start()
    try:
        watcher.start()
        crawl.seed(crawl.manifest["seeds"])
        seeded_at = time.time()
        if start_after_results is not None:
            deadline = time.time() + 120
            while crawl.progress().fetch_results < start_after_results and time.time() < deadline:
                _alive_wait(crawl, 0.3)
        else:
            _alive_wait(crawl, first_at_s)
        if kill_loop is None:
            for fault in faults:
                outages.append(inject(fault))
                _alive_wait(crawl, between_s)
                if ready_wait_s > 0:
                    ready_waits.append(_wait_ready(crawl, watcher, fault, ready_wait_s))
        else:
            _kill_loop(crawl, kill_loop, faults, outages, kills)
        idle, not_idle = _wait_idle(crawl, idle_s, timeout_s, allow_timeout)
    finally:
        ensure_up()
        crawl.stop()
        watcher.stop()
        crawl.close()
    truth = generate(hosts, web_seed, profile, port=crawl.opt.http_port).ground_truth(crawl.manifest["seeds"])
    return FaultRun(crawl, truth, load_log(workdir / "requests.jsonl"), outages, watcher, seeded_at, kills, idle,
                    ready_waits, not_idle)


def _wait_ready(crawl: Crawl, watcher: ReadyzWatcher, fault: Fault, limit_s: float) -> tuple[str, float, bool]:
    """Wait up to ``limit_s`` until every user of ``fault``'s engine answers ready (the watcher's last
    probe of each). Returns (fault, seconds waited, all ready)."""
    users = set(ENGINE_USERS[fault.engine])
    start = time.time()
    while users & set(watcher.not_ready_now()) and time.time() - start < limit_s:
        _alive_wait(crawl, 0.5)
    return fault.name, round(time.time() - start, 1), not users & set(watcher.not_ready_now())


def _wait_idle(crawl: Crawl, idle_s: float, timeout_s: float, allow_timeout: bool) -> tuple[bool, str]:
    """`Crawl.wait_idle`, again after an admin call that fails right after a thaw (the broker answers, its
    metadata not yet: UNKNOWN_LEADER_EPOCH). (False, why) when not idle in time (with ``allow_timeout``)."""
    deadline = time.time() + timeout_s
    while True:
        try:
            crawl.wait_idle(idle_s=idle_s, timeout_s=max(1.0, deadline - time.time()), every_s=2, report=False)
            return True, ""
        except TimeoutError as exc:
            if not allow_timeout:
                raise
            return False, str(exc)  # with the post-mortem's summary (Crawl.wait_idle)
        except RuntimeError as exc:
            if not str(exc).startswith("progress:") or time.time() > deadline:
                raise
            time.sleep(2.0)


def _kill_loop(crawl: Crawl, loop: KillLoop, faults: Sequence[Fault], outages: list[Outage],
               kills: list[tuple[float, str]]) -> None:
    rng = random.Random(loop.seed)
    start = time.time()
    ticks = max(1, int(loop.for_s // loop.every_s))
    # the engine faults at evenly spread ticks (not the first: the crawl is under way first)
    fault_at = {1 + round(i * (ticks - 1) / max(1, len(faults))): f for i, f in enumerate(faults)}
    for tick in range(ticks):
        target = start + tick * loop.every_s
        _alive_wait(crawl, max(0.0, target - time.time()), supervise=True)
        name = rng.choice([n for s in loop.services if s in SERVICES for n in crawl.running(s)] or ["fetcher"])
        kills.append((time.time(), name))
        crawl.kill(name, signal.SIGKILL)
        _alive_wait(crawl, loop.restart_after_s, supervise=True)
        crawl.start_service(name.split("-")[0], _instance(name))
        if tick in fault_at:
            t0 = time.time()
            outages.append(inject(fault_at[tick]))
            kills.append((t0, f"engine {fault_at[tick].name}"))
    _alive_wait(crawl, loop.every_s, supervise=True)
