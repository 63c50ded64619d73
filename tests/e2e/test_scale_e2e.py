"""End to end, distributed: several instances of every service share one crawl of the synthetic web, and
the frontier and the fetcher are scaled out and in, and crashed, while it runs. Every verdict comes from
the web server's own request log and the generator's ground truth.

The run: 3 parsers, 3 dedups, 2 recrawl schedulers and 2 WARC writers throughout; the frontier and the
fetcher start with one instance each and go 1 → 3 (two more start) → 2 (one stops with SIGTERM, as
Kubernetes stops a pod on scale-in); then one instance of every service is killed with SIGKILL. Judged:
every reachable allowed page fetched, no politeness violation, repeated fetches within 1% (those in flight
at the kill counted apart, as in the single-instance kill test), every fetch in the WARC files once, and
how long the hosts waited after each event beyond their politeness delay (bounded: a joining instance
stops nobody, a graceful handover waits for no lease to expire, a crash for at most the session timeout
and a lease).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from streamcrawl_launcher.crawl import Crawl, CrawlOptions
from streamcrawl_synthweb.log import LogEntry, judged_gaps, load_log

from tests.e2e.page_fetched import read_page_fetched
from tests.e2e.test_crawl_e2e import ENV, check_archive, check_guarantees

pytestmark = [pytest.mark.e2e]

# The shared e2e settings, with a 1 s error back-off base instead of 5 s: this web's 5xx hosts answer 500,
# 502 and five 503s before their good pages (7 back-offs in a row; 10.6 min at 5 s, 2.1 min at 1 s). What
# this test is about is the handover, not the back-off, which the single-instance crawl covers.
# The back-off is also capped at 16 s: the doubling would otherwise reach 256 s on those hosts' last error
# (a kill -9's interrupted request is one more), and the crawl's tail would be minutes of one host's timer.
SCALE_ENV = {**ENV, "STREAMCRAWL_BACKOFF_BASE_S": "1", "STREAMCRAWL_BACKOFF_CAP_S": "16"}

HOSTS = 120
WEB_SEED = 23
SCALED = ("frontier", "fetcher")
ALL = ("frontier", "fetcher", "parser", "dedup", "recrawl", "warc")


def _wait_fetched(crawl: Crawl, n: int, timeout_s: float = 300.0, at_least_s: float = 0.0) -> None:
    """Until ``n`` fetch results are in, and at least ``at_least_s`` have passed (events far enough apart
    that the waits across one are not those of the one before)."""
    start = time.time()
    deadline = start + timeout_s
    while (crawl.progress().fetch_results < n or time.time() < start + at_least_s) and time.time() < deadline:
        dead = crawl.dead_services()
        if dead:
            raise RuntimeError(f"service(s) exited: {dead} (see {crawl.logs})")
        time.sleep(1)


def run_scaled_crawl(workdir: Path) -> tuple[Crawl, list[LogEntry], dict[str, float]]:
    crawl = Crawl(CrawlOptions(workdir=workdir, hosts=HOSTS, web_seed=WEB_SEED, extra_env=SCALE_ENV,
                               log_level=os.environ.get("SCALE_LOG_LEVEL", "WARNING"),
                               synthweb_args=["--profile", "fast", "--robots-timeout", "10"],
                               service_instances={"frontier": 1, "fetcher": 1, "parser": 3, "dedup": 3,
                                                  "recrawl": 2, "warc": 2}))
    events: dict[str, float] = {}
    crawl.start()
    try:
        crawl.seed(crawl.manifest["seeds"])
        _wait_fetched(crawl, 150)
        events["scale_out"] = time.time()
        for name in SCALED:  # 1 → 3
            crawl.start_service(name)
            crawl.start_service(name)
        _wait_fetched(crawl, crawl.progress().fetch_results + 250, at_least_s=20)
        events["sigterm"] = time.time()
        for name in SCALED:  # 3 → 2: the first instance hands its partitions over and exits
            crawl.kill(name, signal.SIGTERM)
        events["sigterm_done"] = time.time()
        _wait_fetched(crawl, crawl.progress().fetch_results + 250, at_least_s=20)
        events["kill"] = time.time()
        for name in ALL:  # one instance of every service crashes
            crawl.kill(crawl.running(name)[0], signal.SIGKILL)
        crawl.wait_idle(idle_s=20, timeout_s=600, every_s=5)
    finally:
        crawl.stop()
    return crawl, load_log(workdir / "requests.jsonl"), events


def excess_waits(entries: list[LogEntry], at: float) -> list[float]:
    """For every host whose requests straddle ``at``: how long it waited for its next request after the
    event, or after its politeness delay ran out if that came later (a host that had been idle since well
    before the event, e.g. waiting for its next link to come through parse and dedup, is charged only the
    time after the event: what the event itself cost it)."""
    out = []
    for _host, prev, e, _gap, required in judged_gaps(entries):
        if prev.sent <= at < e.start:
            out.append(e.start - max(at, prev.sent + required))
    return sorted(out)


def crawl_stall(entries: list[LogEntry], at: float) -> float:
    """Seconds from ``at`` to the first request that started after it (0 when requests kept coming)."""
    later = [e.start for e in entries if e.start > at]
    return round(min(later) - at, 1) if later else float("inf")


def _pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


@pytest.mark.timeout(1800)
def test_scale_out_scale_in_and_kill_9(tmp_path: Path) -> None:
    crawl, entries, events = run_scaled_crawl(tmp_path)
    # at-least-once repeats the requests in flight at the kill; every other repeat (the graceful scale
    # out and in included) within 1%, as in a clean single-instance crawl
    stats = check_guarantees(crawl, entries, 0.01, probes_per_host=2, killed_at=events["kill"])
    # two WARC writers shared the archive topic's partitions and one was killed: every fetch is in the files
    # once, and each page_fetched points at a record that is there
    msgs = read_page_fetched(crawl.settings.kafka_bootstrap, "e2e-scale", want=1)
    stats.update(check_archive(crawl, msgs, tmp_path))
    waits = {name: excess_waits(entries, events[name]) for name in ("scale_out", "sigterm", "kill")}
    report = {name: {"hosts": len(w), "median_s": round(_pct(w, 0.5), 1), "p90_s": round(_pct(w, 0.9), 1),
                     "max_s": round(w[-1], 1) if w else 0.0, "stall_s": crawl_stall(entries, events[name])}
              for name, w in waits.items()}
    print("e2e scale run:", stats, "sigterm took", round(events["sigterm_done"] - events["sigterm"], 1), "s;",
          "waits beyond the politeness delay across each event:", report)
    # A joining instance takes its partitions without stopping the others', and a graceful handover waits
    # for no lease to expire (60 s): the next owner carries on within seconds.
    assert report["scale_out"]["p90_s"] < 20, report
    assert report["sigterm"]["p90_s"] < 20, report
    # A crash is recovered through the group's session timeout (15 s) and lease expiry (60 s at most).
    assert report["kill"]["p90_s"] < 90, report
