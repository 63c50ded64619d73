"""End to end, engine faults (issue 11 item 6): two crawls of the synthetic web on the real stack. In one,
Cassandra, the S3 store and the Kafka broker are frozen 30 s in turn (SIGSTOP of the engine's process group,
then SIGCONT, through `stack/stackctl.py`, which finds the pids under ``$STREAMCRAWL_STACK_DIR/run``); in
the other each is restarted in turn (stopped, started, probed ready).

Judged from the web server's own request log and the generator's ground truth (streamcrawl_launcher.verdict):
0 politeness violations, every reachable page fetched, and after each thaw no host waits more than
``RECOVERY_S`` beyond what politeness required: an engine's stall is never charged as a host's response
time (a 30 s freeze counted as a fetch would hold a host 300 s), and leases granted around a Kafka freeze do
not block their hosts until the lease expiry. Every service that uses the frozen engine turns not ready
and back. The crawl is the "polite" web: ~100 hosts of 12-32 pages, bounded by politeness (~40 s unfrozen).

This test freezes the engines of the stack it runs against: never point it at a stack others share.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from streamcrawl_launcher.faultrun import run_faults
from streamcrawl_launcher.faults import ENGINE_USERS, Fault, Outage, ReadyzWatcher
from streamcrawl_launcher.verdict import coverage_timeline
from streamcrawl_runtime.health import Readiness

pytestmark = [
    pytest.mark.e2e,
    # It freezes the engines of $STREAMCRAWL_STACK_DIR's stack (the pids under its run/): only on request
    # (`make test-faults` asks, and `make test` for the restart test, each on a stack of its own), never on a
    # stack others share.
    pytest.mark.skipif(os.environ.get("STREAMCRAWL_ENGINE_FAULTS") != "1",
                       reason="freezes the stack's engines: set STREAMCRAWL_ENGINE_FAULTS=1 on a stack of your own"),
]

HOSTS = 100
WEB_SEED = 5
PROFILE = "polite"
FREEZE_S = float(os.environ.get("FAULTS_FREEZE_S", "30"))
#: Results before the first freeze (Cassandra): the hosts' first requests (robots.txt, the soft-404 probe)
#: are under way then, and for a host with no known fetch time a stall counted as one costs 10x in full.
#: Then the pause between two faults (the crawl carries on).
START_AFTER_RESULTS = int(os.environ.get("FAULTS_START_AFTER", "10"))
BETWEEN_S = 6.0
#: After that pause, how long more the next fault waits for the users of the last one's engine to answer
#: ready again (the issue asks that readiness turns not ready and back, not within the 6 s pause: a service
#: whose readiness never returns still fails below, judged until the next outage of an engine it uses).
READY_WAIT_S = 60.0
#: The longest any host may wait after a thaw beyond its politeness delay (the issue's target: 30 s).
RECOVERY_S = 30.0
#: The longest time between the starts of two readiness probes of a healthy service (a probe every interval_s,
#: each given up to timeout_s: 10 + 3 s).
PROBE_GAP_S = Readiness().interval_s + Readiness().timeout_s
FREEZES = tuple(Fault(engine, "freeze", FREEZE_S) for engine in ("cassandra", "s3", "kafka"))
RESTARTS = tuple(Fault(engine, "restart") for engine in ("cassandra", "s3", "kafka"))
ENV = {"STREAMCRAWL_FETCHER_SITEMAPS": "false", "STREAMCRAWL_FETCHER_READ_TIMEOUT_S": "5"}
#: How long the crawl may take to drain after the last fault (a passing run needs ~1-2 min): below the
#: test's own timeout, so that a crawl that never drains is judged and reported (with the post-mortem's
#: lagging partitions and what is still queued) rather than cut off by pytest-timeout with no word why.
IDLE_TIMEOUT_S = 420.0


@pytest.mark.timeout(900)
def test_crawl_survives_engine_freezes(tmp_path: Path) -> None:
    _crawl_and_judge(tmp_path, FREEZES)


@pytest.mark.timeout(900)
def test_crawl_survives_engine_restarts(tmp_path: Path) -> None:
    """Each engine stopped and started again (`stackctl restart`: the same start and readiness probe as
    `make stack-up`), 6 s apart: connections drop and come back on new sockets, not the same ones thawed."""
    _crawl_and_judge(tmp_path, RESTARTS)


def _crawl_and_judge(tmp_path: Path, faults: tuple[Fault, ...]) -> None:
    run = run_faults(tmp_path, HOSTS, WEB_SEED, PROFILE, faults, between_s=BETWEEN_S, env=ENV,
                     log_level=os.environ.get("FAULTS_LOG_LEVEL", "WARNING"),
                     start_after_results=START_AFTER_RESULTS, ready_wait_s=READY_WAIT_S,
                     timeout_s=IDLE_TIMEOUT_S, allow_timeout=True)
    verdict, outages, watcher = run.verdict(), run.outages, run.watcher
    timeline = coverage_timeline(run.entries, run.truth.pages, verdict.first_request_at, every_s=10)
    report = {
        "pages": verdict.pages, "coverage": round(verdict.coverage, 3), "repeats": verdict.repeats,
        "violations": len(verdict.violations), "time_to_full_s": verdict.time_to_full_s,
        "stalls": {s.outage.name: {"excess_s": round(s.excess_s, 1), "host": s.host, "hosts": s.hosts_waiting}
                   for s in verdict.stalls},
        "outages": {o.name: round(o.length_s, 1) for o in outages},
        "coverage_every_10s": [round(c, 2) for _, c in timeline],
        "readiness": _readiness_report(watcher, outages),
        "ready_waits": run.ready_waits,
        "idle": run.idle,
    }
    print("e2e engine faults:", report)
    # every readiness transition with its reasons, for a failure's post-mortem
    (tmp_path / "readyz.jsonl").write_text("".join(
        json.dumps({"t": e.t, "service": e.service, "ready": e.ready, "reasons": e.reasons}) + "\n"
        for e in watcher.events))
    (tmp_path / "outages.json").write_text(json.dumps([o.__dict__ for o in outages]))
    assert not verdict.violations, f"{len(verdict.violations)} politeness violations, e.g. {verdict.violations[:3]}"
    assert not verdict.lost, f"{len(verdict.lost)} pages never fetched, e.g. {verdict.lost[:5]}; {run.not_idle}"
    assert run.idle, f"the crawl did not drain within {IDLE_TIMEOUT_S:.0f} s of the last fault: {run.not_idle}"
    for stall in verdict.stalls:
        # an engine stall charged as a fetch, or a lease left to expire, shows here as a host held far
        # longer than politeness asked after the thaw
        assert stall.excess_s <= RECOVERY_S, (stall.outage.name, stall.host, round(stall.excess_s, 1), report)
        assert stall.hosts_waiting > 0, f"no host had work across {stall.outage.name}: the test proves nothing"
    assert verdict.repeat_ratio <= 0.02, report
    for i, outage in enumerate(outages):
        for service in ENGINE_USERS[_engine(outage)]:
            # judged until the next outage of an engine this service uses (which may keep it not ready for
            # its own reason), else for 60 s after this one
            later = [o.start for o in outages[i + 1:] if service in ENGINE_USERS[_engine(o)]]
            until = min(later[0], outage.end + 60) if later else outage.end + 60
            during = _states(watcher, service, outage.start, outage.end)
            after = _states(watcher, service, outage.end, until)
            # not ready at some point of the outage (it may have turned so in an earlier one and stayed), if
            # the engine surely did not answer for longer than the longest gap between two probes' starts (a
            # restart of the S3 server takes ~1.5 s: no probe need fall in it; a restart's graceful shutdown
            # is not counted, as the engine may answer during it: a 13.2 s Kafka restart once passed
            # between two probes of a 10 s interval); ready again after it in any case
            if outage.unserved_s > PROBE_GAP_S:
                assert False in during, f"{service} stayed ready across {outage.name}: {during}; {report}"
            assert True in after, f"{service} not ready again after {outage.name}: {during} then {after}; {report}"


def _engine(outage: Outage) -> str:
    return outage.name.split()[1]  # "freeze kafka 20s", "restart s3"


def _readiness_report(watcher: ReadyzWatcher, outages: list[Outage]) -> dict[str, dict[str, float | None]]:
    """Per outage and service: seconds from the outage's end until the service was ready again."""
    out: dict[str, dict[str, float | None]] = {}
    for outage in outages:
        back: dict[str, float | None] = {}
        for service in ENGINE_USERS[_engine(outage)]:
            up = next((e.t for e in watcher.events if e.service == service and e.ready and e.t >= outage.end), None)
            back[service] = None if up is None else round(up - outage.end, 1)
        out[outage.name] = back
    return out


def _states(watcher: ReadyzWatcher, service: str, start: float, end: float) -> list[bool]:
    """The service's readiness at ``start`` and at each of its transitions up to ``end``."""
    events = [e for e in watcher.events if e.service == service]
    before = [e.ready for e in events if e.t < start]
    return before[-1:] + [e.ready for e in events if start <= e.t <= end]
