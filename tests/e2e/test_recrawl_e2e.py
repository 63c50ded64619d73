"""Recrawl end to end, with the intervals scaled down to seconds: every service as its own process on the
real engines, crawling a synthetic web of unchanging hosts (a conditional GET gets a 304) and changing hosts
(every page has a new version every second) for several recrawl cycles. What was requested and answered is
judged from the web server's own log; the intervals from the scheduler's rows in Cassandra."""

from __future__ import annotations

import time
from collections import defaultdict
from itertools import pairwise
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.recrawl import importance_from_depth
from streamcrawl_launcher.crawl import Crawl, CrawlOptions
from streamcrawl_runtime.connect import blocking_cql_session
from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.log import LogEntry, load_log, politeness_violations
from streamcrawl_synthweb.model import PROFILES
from streamcrawl_synthweb.truth import normalize_url

from tests.e2e.page_fetched import read_page_fetched

pytestmark = pytest.mark.e2e

HOSTS = 8
WEB_SEED = 5
RUN_S = 75.0
INITIAL_S, MIN_S, MAX_S = 4.0, 2.0, 30.0
# The README's names for scaling the recrawl down (see "Recrawl").
ENV = {
    "STREAMCRAWL_RECRAWL_INITIAL_INTERVAL_S": str(INITIAL_S),
    "STREAMCRAWL_RECRAWL_MIN_INTERVAL_S": str(MIN_S),
    "STREAMCRAWL_RECRAWL_MAX_INTERVAL_S": str(MAX_S),
    "STREAMCRAWL_RECRAWL_SCAN_INTERVAL_S": "1",
    "STREAMCRAWL_RECRAWL_SCAN_LOOKBACK_S": "600",
    "STREAMCRAWL_FETCHER_READ_TIMEOUT_S": "5",
}


def _url(e: LogEntry) -> str:
    return normalize_url(f"http://{e.host}:{e.port}{e.path}")


@pytest.mark.timeout(600)
def test_recrawl_cycles_with_conditional_gets(tmp_path: Path) -> None:
    crawl = Crawl(CrawlOptions(workdir=tmp_path, hosts=HOSTS, web_seed=WEB_SEED, extra_env=ENV,
                               log_level="WARNING", synthweb_args=["--profile", "recrawl"]))
    crawl.start()
    try:
        crawl.seed(crawl.manifest["seeds"])
        end = time.time() + RUN_S
        while time.time() < end:
            time.sleep(2)
            assert not crawl.dead_services(), crawl.dead_services()
    finally:
        crawl.stop()
    entries = load_log(tmp_path / "requests.jsonl")
    web = generate(HOSTS, WEB_SEED, PROFILES["recrawl"], port=crawl.opt.http_port)
    kinds = {h.name: h.kind for h in web.hosts}
    assert {"normal", "changing"} <= set(kinds.values())
    pages = [e for e in entries if e.status in (200, 304) and not e.path.startswith(("/robots", "/streamcrawl-probe"))]
    by_url: dict[str, list[LogEntry]] = defaultdict(list)
    for e in sorted(pages, key=lambda e: e.start):
        by_url[_url(e)].append(e)

    # refreshes send the validators they got (judged from the server's log)...
    conditional = [e for e in pages if e.if_none_match or e.if_modified_since]
    assert conditional, "no conditional GET reached the server"
    assert any(e.if_none_match for e in conditional) and any(e.if_modified_since for e in conditional)
    # ...every page was visited in at least three recrawl cycles after its first fetch...
    unchanged = {u: es for u, es in by_url.items() if kinds[urlsplit(u).hostname or ""] == "normal"}
    changing = {u: es for u, es in by_url.items() if kinds[urlsplit(u).hostname or ""] == "changing"}
    assert unchanged and changing
    for group in (unchanged, changing):
        cycled = [u for u, es in group.items() if len(es) >= 4]
        assert len(cycled) >= len(group) // 2, {u: len(es) for u, es in group.items()}
    # ...unchanging pages answer the refreshes with 304 and are visited less and less often...
    assert all(e.status == 304 for es in unchanged.values() for e in es[1:] if e.if_none_match)
    assert sum(e.status == 304 for es in unchanged.values() for e in es) >= len(unchanged)
    for u, es in unchanged.items():
        if len(es) >= 4:
            gaps = [b.start - a.start for a, b in pairwise(es)]
            assert gaps[-1] > gaps[0] * 1.5, (u, gaps)
    # ...while changing pages keep getting new bodies (200s to the conditional GETs)
    assert all(sum(e.status == 200 for e in es) >= 3 for es in changing.values() if len(es) >= 4)
    # politeness holds through the refreshes (the server's log is the judge)
    assert politeness_violations(entries) == []

    # the scheduler: intervals from the change-rate estimator over the visits, scaled by importance
    session = blocking_cql_session(crawl.settings)
    try:
        for u in by_url:
            host = urlsplit(u).hostname or ""
            row = session.execute("SELECT depth, change_interval_s, change_count, sched_visits, lm_visits,"
                                  " lm_changes FROM url_state WHERE host = ? AND url_fp = ?",
                                  (host, url_fingerprint(u)))[0]
            first = max(MIN_S, min(MAX_S, INITIAL_S / importance_from_depth(row.depth or 0)))
            if (row.sched_visits or 0) < 4:
                continue
            # The synthetic web sends Last-Modified (the version's time on changing hosts, a fixed past date
            # elsewhere, also on 304s): the visits are dated and the dates agree with the bodies.
            if kinds[host] == "normal":
                assert row.change_count == 0 and row.change_interval_s > first, (u, row)
                assert (row.lm_visits or 0) >= 2 and (row.lm_changes or 0) == 0, (u, row)
            else:
                assert row.change_count >= 2 and row.change_interval_s <= first, (u, row)
                assert (row.lm_changes or 0) >= 2, (u, row)
    finally:
        session.close()

    # changed bodies are published again, with changed=true; unchanging pages only once
    msgs = read_page_fetched(crawl.settings.kafka_bootstrap, "e2e-recrawl")
    changed = {m["url"] for m in msgs if m["changed"]}
    assert changed and all(kinds[urlsplit(u).hostname or ""] == "changing" for u in changed)
    once = defaultdict(int)
    for m in msgs:
        once[m["url"]] += 1
    assert all(once[u] == 1 for u in unchanged if u in once)
    print("recrawl e2e:", {"urls": len(by_url), "requests": len(pages), "conditional": len(conditional),
                           "not_modified": sum(e.status == 304 for e in pages), "changed_published": len(changed)})
