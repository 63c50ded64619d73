"""bench/crawl_bench.py without a crawl: the /proc CPU sampler, the log window counter, the violation
readings and the report; bench/scrapy_side.py's manifest DNS resolver."""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from streamcrawl_synthweb.log import LogEntry

BENCH = Path(__file__).resolve().parents[3] / "bench"


def _load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:  # the bench's modules import each other as siblings (as when run as a script)
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


cb = _load("crawl_bench")
sides = sys.modules["crawl_sides"]


def e(start: float, end: float | None = None, host: str = "h0001.synth.test", path: str = "/p/1.html",
      status: int = 200) -> LogEntry:
    return LogEntry(host=host, ip="127.10.0.1", port=8480, client="127.0.0.1", method="GET", path=path,
                    status=status, start=start, end=start + 0.01 if end is None else end, bytes=10, ua="t")


# ------------------------------------------------------------------ /proc CPU


def test_parse_proc_stat_counts_fields_after_the_last_paren() -> None:
    # comm with spaces and a ')' inside; utime=100 stime=50 cutime=20 cstime=10 ticks
    fields = ["S", "1", "1", "1", "0", "-1", "4194304", "0", "0", "0", "0", "100", "50", "20", "10", "20", "0"]
    line = "4242 (we (ird) name) " + " ".join(fields) + "\n"
    assert cb.parse_proc_stat(line) == pytest.approx(180 / cb.CLK_TCK)
    assert cb.parse_proc_stat(line, children=False) == pytest.approx(150 / cb.CLK_TCK)


def test_cpu_seconds_of_self_tracks_os_times() -> None:
    before = cb.cpu_seconds(os.getpid(), children=False)
    t = time.process_time()
    while time.process_time() - t < 0.3:
        pass
    after = cb.cpu_seconds(os.getpid(), children=False)
    assert before is not None and after is not None
    assert 0.2 <= after - before <= 1.0
    own = os.times()
    assert after == pytest.approx(own.user + own.system, abs=0.05)


def test_cpu_seconds_of_a_busy_child_and_of_a_gone_pid() -> None:
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nt=time.process_time()\nwhile time.process_time()-t<0.4: pass\n"
                              "time.sleep(30)"])
    try:
        deadline = time.time() + 20
        used = 0.0
        while time.time() < deadline and used < 0.35:
            time.sleep(0.1)
            used = cb.cpu_seconds(child.pid) or 0.0
        assert used >= 0.35
        deltas = cb.cpu_delta({"child": 0.0, "gone": 1.0}, cb.sample_cpu({"child": child.pid, "gone": 2**22 + 7}))
        assert set(deltas) == {"child"} and deltas["child"] >= 0.35
    finally:
        child.kill()
        child.wait()
    assert cb.cpu_seconds(child.pid) is None


def test_infra_pids_reads_pidfiles_of_live_processes_only(tmp_path: Path) -> None:
    (tmp_path / "kafka.pid").write_text(f"{os.getpid()}\n")
    (tmp_path / "cassandra.pid").write_text("garbage\n")
    (tmp_path / "s3.pid").write_text(f"{2**22 + 7}\n")
    assert cb.infra_pids(tmp_path) == {"kafka": os.getpid()}


def test_infra_pids_reads_every_node_of_the_cluster_profile(tmp_path: Path) -> None:
    for name in ("kafka-1", "kafka-3", "cassandra-2", "s3"):
        (tmp_path / f"{name}.pid").write_text(f"{os.getpid()}\n")
    (tmp_path / "kafka-2.pid").write_text(f"{2**22 + 7}\n")
    assert cb.infra_pids(tmp_path) == {"kafka-1": os.getpid(), "kafka-3": os.getpid(),
                                       "cassandra-2": os.getpid(), "versitygw": os.getpid()}


def test_machine_busy_is_monotonic() -> None:
    a = cb.machine_busy_s()
    b = cb.machine_busy_s()
    assert 0 < a <= b


# ------------------------------------------------------------------ the log


def test_count_window_excludes_robots_non_200_and_outside_requests() -> None:
    log = [
        e(99.9),  # before the window
        e(100.0, path="/robots.txt"),  # robots: a request, not a page
        e(100.0, host="h0002.synth.test", path="/robots-real.txt"),
        e(100.5),  # page, first bin
        e(101.0, path="/p/1.html"),  # same page again: counted, not distinct
        e(105.0, status=304),  # not a page
        e(112.0, host="h0002.synth.test", path="/p/2.html"),  # page, second bin
        e(119.99, host="h0003.synth.test", path="/"),  # last instant inside
        e(120.0),  # end is exclusive
    ]
    c = cb.count_window(log, 100.0, 120.0, bin_s=10.0)
    assert (c.requests, c.robots, c.pages, c.distinct_pages, c.hosts) == (7, 2, 4, 3, 3)
    assert c.bins == [2, 2]


def test_bin_rates_divide_the_short_last_bin_by_its_width() -> None:
    r = cb.SideResult("x", 10, 0.0, 25.0, cb.WindowCounts(pages=60, bins=[30, 20, 10]), {}, 0.0, {}, 0.0, {})
    assert cb.bin_rates(r, 10.0) == pytest.approx([3.0, 2.0, 2.0])


def test_start_gap_violations() -> None:
    log = [e(0.0, 0.3), e(0.8, 0.81), e(2.0, 2.01),  # 0.8 s start-to-start: short
           e(10.0, 15.0, host="h2"), e(11.0, 11.1, host="h2"), e(13.0, 13.1, host="h2")]  # two under a long one
    assert cb.start_gap_violations(log) == (1, 2)
    assert cb.start_gap_violations([e(0.0), e(0.96), e(2.0)]) == (0, 0)  # within the 0.05 s tolerance


def test_violation_summary_readings() -> None:
    manifest = {"profile": {"crawl_delay_s": 2.0},
                "hosts": {"a": {"kind": "normal"}, "cd": {"kind": "robots_crawl_delay"},
                          "r5": {"kind": "robots_500"}}}
    log = [
        e(0.0, 0.2, host="a"), e(1.5, 1.51, host="a"),  # 1.3 s quiet: fine by 1 s, short of 10 x 0.2 s
        e(0.0, host="cd"), e(1.2, host="cd"),  # 1.19 s after: short of Crawl-delay 2 s only
        e(0.0, host="r5", path="/robots.txt", status=500), e(1.5, host="r5", path="/"),  # robots failed
    ]
    v = cb.violation_summary(log, manifest)
    assert v["project_rule"] == 2 and v["project_rule_hosts"] == 2
    assert v["project_rule_exact"] == 2
    assert v["crawl_delay"] == 1
    # 0.97 s of quiet: inside the 50 ms tolerance, but short of the exact rule
    exact = cb.violation_summary([e(0.0, 0.01, host="a"), e(0.98, 0.99, host="a")], manifest)
    assert exact["project_rule"] == 0 and exact["project_rule_exact"] == 1
    assert v["end_to_start_1s"] == 0 and v["start_to_start_1s"] == 0 and v["overlaps"] == 0
    assert v["robots_unavailable_hits"] == 1
    assert cb.crawl_delays(manifest) == {"cd": 2.0}


# ------------------------------------------------------------------ report


def _result(side: str, pages: int, cpu: float) -> object:
    v = dict.fromkeys(("project_rule", "project_rule_exact", "project_rule_hosts", "crawl_delay", "end_to_start_1s",
                       "start_to_start_1s", "overlaps", "robots_unavailable_hits"), 0)
    return cb.SideResult(side, 2000, 0.0, 180.0, cb.WindowCounts(requests=pages + 100, pages=pages, bins=[pages]),
                         {side: cpu}, 5.0, {"kafka": 9.0}, 300.0, v, {"scrapy_version": "2.19.0", "proc_cpu_s": cpu})


def test_render_table_has_both_sides_and_the_ratio() -> None:
    args = cb.parse_args(["--hosts", "2000", "--duration", "180"])
    info = {"cores": 2, "cpu": "cpu", "python": "3.11", "kernel": "k", "load": (1.0, 1.0, 1.0),
            "load_start": (2.0, 2.0, 2.0)}
    md = cb.render({"streamcrawl": [_result("streamcrawl", 9000, 90.0)], "scrapy": [_result("scrapy", 18000, 90.0)]},
                   args, info, "cmd")
    assert "| **pages/s** (HTTP 200, robots.txt excluded, from the server log) | 50.0 | 100.0 | 0.50× |" in md
    assert "| **crawler CPU-ms per page** | 10.0 | 5.0 | 2.00× |" in md
    assert "| politeness bound (hosts ÷ 1 s) | 2,000 | 2,000 | |" in md
    assert "Scrapy 2.19.0" in md


def test_parse_args_defaults() -> None:
    a = cb.parse_args([])
    assert isinstance(a, argparse.Namespace)
    assert (a.hosts, a.duration, a.only, a.http_port, a.dns_port) == (2000, 180.0, "both", 8480, 8553)


# ------------------------------------------------------------------ scrapy side


def test_manifest_resolver_answers_from_the_manifest() -> None:
    pytest.importorskip("scrapy")
    from twisted.internet.error import DNSLookupError

    ss = _load("scrapy_side")
    table = ss.host_table({"hosts": {"h0001.synth.test": {"ip": "127.10.0.1", "kind": "normal"},
                                     "h0002.synth.test": {"ip": "127.10.0.2", "kind": "dns_nxdomain"}}})
    r = ss.ManifestResolver(None, table)
    got: list[object] = []
    r.getHostByName("H0001.synth.test.").addBoth(got.append)
    r.getHostByName("h0002.synth.test").addBoth(got.append)
    r.getHostByName("nowhere.synth.test").addBoth(got.append)
    assert got[0] == "127.10.0.1"
    assert all(f.check(DNSLookupError) for f in got[1:])  # type: ignore[attr-defined]
    s = ss.settings(Path("/m.json"), 30.0)
    assert (s["CONCURRENT_REQUESTS_PER_DOMAIN"], s["DOWNLOAD_DELAY"], s["ROBOTSTXT_OBEY"],
            s["RANDOMIZE_DOWNLOAD_DELAY"], s["AUTOTHROTTLE_ENABLED"]) == (1, 1.0, True, False, False)
    assert "streamcrawl-bench-scrapy" in s["USER_AGENT"]


# ------------------------------------------------------------------ the streamcrawl side's flow, without the stack


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.10.0.1", 0))
        return int(s.getsockname()[1])


FAKE_SERVICE = """
import json, sys, time, urllib.request
manifest = json.load(open(sys.argv[1]))
normal = [n for n, info in manifest["hosts"].items() if info["kind"] == "normal"]
end = time.time() + 60
while time.time() < end:  # one home page every 0.2 s, round robin over the ordinary hosts
    for name in normal:
        ip = manifest["hosts"][name]["ip"]
        req = urllib.request.Request(f"http://{ip}:{manifest['http_port']}/", headers={"Host": name})
        try:
            urllib.request.urlopen(req, timeout=5).read()
        except Exception:
            pass
        time.sleep(0.2)
"""


def test_run_streamcrawl_flow_with_fake_services(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real synthetic web, the launcher's own process handling, and five stand-in 'services' (one of
    which fetches a few pages) instead of the stack: exercises settle, CPU windows, log counting, stop."""
    launcher = pytest.importorskip("streamcrawl_launcher.crawl")
    seeded: list[list[str]] = []

    class FakeCrawl:
        _spawn = launcher.Crawl._spawn
        _start_synthweb = launcher.Crawl._start_synthweb
        stop = launcher.Crawl.stop
        dead_services = launcher.Crawl.dead_services

        def __init__(self, opt: object) -> None:
            self.opt = opt
            self.procs: dict[str, subprocess.Popen[bytes]] = {}
            self._stopped: set[str] = set()
            self.manifest: dict[str, object] = {}
            self.workdir = opt.workdir.resolve()  # type: ignore[attr-defined]
            self.logs = self.workdir / "logs"

        def env(self) -> dict[str, str]:
            return dict(os.environ)

        def start(self) -> None:
            self._start_synthweb()
            for name in launcher.SERVICES:
                code = FAKE_SERVICE if name == "fetcher" else "import time; time.sleep(600)"
                self._spawn(name, ["-c", code, str(self.workdir / "manifest.json")])

        def seed(self, urls: list[str]) -> int:
            seeded.append(urls)
            return len(urls)

    monkeypatch.setattr(launcher, "Crawl", FakeCrawl)
    monkeypatch.setattr(sides.cpu, "infra_pids", lambda: {"kafka": os.getpid()})
    monkeypatch.setattr(sides.cpu, "scrape", lambda: {})
    args = cb.parse_args(["--hosts", "20", "--duration", "4", "--profile", "fast", "--bin", "2",
                          "--http-port", str(_free_port()), "--dns-port", str(_free_port())])
    r = cb.run_streamcrawl(args, cb.fresh_dir(tmp_path / "sc"))
    assert seeded and len(seeded[0]) == 20
    assert set(r.crawler_cpu) == set(launcher.SERVICES) and "synthweb" not in r.crawler_cpu
    assert r.crawler_cpu["fetcher"] >= 0 and r.synthweb_cpu_s >= 0 and set(r.infra_cpu) == {"kafka"}
    assert 4.0 <= r.window_s < 6.0
    # the stand-in fetcher's requests reached the server log; those inside the window count as pages
    assert r.counts.requests <= r.extra["log_requests_total"]
    assert 5 <= r.counts.pages == r.counts.requests <= 4 / 0.2 + 2
    assert r.pages_per_s == pytest.approx(r.counts.pages / r.window_s)
    assert r.violations["overlaps"] == 0
    assert r.launcher_cpu_s >= 0 and r.ended_by == "window"
    assert r.counters["launcher"] == {"produced|streamcrawl.seeds": 20.0}


# ------------------------------------------------------------------ counters, coverage, the new tables

METRICS = """# HELP streamcrawl_outputs_total Records produced
# TYPE streamcrawl_outputs_total counter
streamcrawl_outputs_total{service="dedup",topic="streamcrawl.urls"} 7.0
streamcrawl_outputs_total{service="dedup",topic="page_fetched"} 3.0
# TYPE streamcrawl_messages_total counter
streamcrawl_messages_total{outcome="ok",service="dedup",topic="streamcrawl.parsed"} 3.0
streamcrawl_messages_total{outcome="dead_letter",service="dedup",topic="streamcrawl.parsed"} 1.0
# TYPE streamcrawl_cql_statements_total counter
streamcrawl_cql_statements_total{op="select",table="url_state"} 4.0
streamcrawl_cql_statements_total{op="insert",table="url_state"} 2.0
# TYPE other_total counter
other_total 9.0
"""


def test_parse_metrics_sums_the_counters_by_row() -> None:
    got = sys.modules["crawl_cpu"].parse_metrics(METRICS)
    assert got == {("produced", "streamcrawl.urls"): 7.0, ("produced", "page_fetched"): 3.0,
                   ("consumed", "streamcrawl.parsed"): 4.0, ("cql", "url_state select"): 4.0,
                   ("cql", "url_state insert"): 2.0}
    delta = sys.modules["crawl_cpu"].counts_delta({"dedup": {("cql", "url_state select"): 1.0}},
                                                  {"dedup": got})
    assert delta["dedup"][("cql", "url_state select")] == 3.0


def test_statement_kind_names_table_and_verb() -> None:
    from streamcrawl_runtime.acsylla_session import statement_kind

    assert statement_kind("SELECT a FROM url_state WHERE host = ?") == ("url_state", "select")
    assert statement_kind("INSERT INTO ks.frontier_queue (a) VALUES (?)") == ("frontier_queue", "insert")
    assert statement_kind("UPDATE host_state SET x = ? WHERE host = ?") == ("host_state", "update")
    assert statement_kind("DELETE FROM due_index WHERE b = ?") == ("due_index", "delete")


def test_truth_lower_bound_and_coverage(tmp_path: Path) -> None:
    log_mod = sys.modules["crawl_log"]
    truth = log_mod.Truth(frozenset({("a", "/"), ("a", "/1"), ("b", "/")}), {"a": 2, "b": 1}, {"b": 5.0})
    assert truth.lower_bound_s == 5.0  # b: 1 page x its 5 s Crawl-delay beats a: 2 pages x 1 s
    entries = [e(10.0, 10.1, host="a", path="/"), e(11.0, 11.2, host="a", path="/1", status=503),
               e(12.5, 12.6, host="a", path="/1"), e(13.0, 13.1, host="b", path="/"),
               e(14.0, 14.1, host="b", path="/")]
    assert log_mod.coverage(entries, truth, 10.0) == (1.0, pytest.approx(3.1))
    assert log_mod.coverage(entries[:3], truth, 10.0) == (pytest.approx(2 / 3), None)
    path = tmp_path / "requests.jsonl"
    tail = log_mod.CoverageTail(path, truth)
    assert tail.poll() == 0
    lines = [x.to_json() for x in entries]
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])  # a torn last line
    assert tail.poll() == 2 and not tail.complete
    with path.open("a") as fh:
        fh.write(lines[3][20:] + "\n")
    assert tail.poll() == 3 and tail.complete


def test_ground_truth_of_the_polite_profile() -> None:
    truth = sys.modules["crawl_log"].ground_truth(100, 7, "polite", 8480)
    assert len(truth.per_host) == 100
    assert all(12 <= n <= 40 for n in truth.per_host.values())
    assert truth.lower_bound_s == max(truth.per_host.values())


def test_render_has_the_per_process_and_counter_tables() -> None:
    args = cb.parse_args(["--hosts", "100", "--duration", "60", "--until-coverage", "--profile", "polite"])
    info = {"cores": 2, "cpu": "cpu", "python": "3.11", "kernel": "k", "load": (1.0, 1.0, 1.0),
            "load_start": (2.0, 2.0, 2.0)}
    sc = _result("streamcrawl", 1000, 0.0)
    sc.crawler_cpu = {"frontier": 1.0, "fetcher": 2.0, "parser": 1.0, "dedup": 1.0, "recrawl": 0.5, "warc": 1.0}  # type: ignore[attr-defined]
    sc.infra_cpu = {"kafka": 2.0, "cassandra": 3.0, "versitygw": 0.5}  # type: ignore[attr-defined]
    sc.counters = {"dedup": {"produced|streamcrawl.urls": 2000.0, "cql|url_state insert": 1000.0}}  # type: ignore[attr-defined]
    sc.coverage_frac, sc.coverage_s = 1.0, 36.0  # type: ignore[attr-defined]
    sp = _result("scrapy", 1000, 3.0)
    truth = sys.modules["crawl_log"].Truth(frozenset({("a", "/")}), {"a": 30}, {})
    md = cb.render({"streamcrawl": [sc], "scrapy": [sp]}, args, info, "cmd", truth)
    assert "| fetcher | 2.0 | 2.00 | 0.67× |" in md  # 2 CPU-s over 1,000 pages vs Scrapy's 3 ms per page
    assert "| warc | 1.0 | 1.00 | 0.33× |" in md  # the WARC writer has its row: the rows add up to the total
    assert "| **all six services** | 6.5 | 6.50 | 2.17× |" in md
    assert "| streamcrawl.urls | 2,000 | 2.00 | dedup 2,000 |" in md
    assert "| url_state insert | 1,000 | 1.00 | dedup 1,000 |" in md
    assert "Politeness lower bound 30.0 s" in md and "| **÷ the lower bound** | 1.20 | not reached |" in md


def test_thread_cpu_splits_the_main_thread_from_the_rest() -> None:
    cpu = sys.modules["crawl_cpu"]
    import threading

    stop = time.time() + 0.3

    def spin() -> None:
        while time.time() < stop:
            pass

    t = threading.Thread(target=spin)
    t.start()
    seen = cpu.thread_cpu(os.getpid())
    t.join()
    assert set(seen) == {"main", "librdkafka", "other"} and seen["main"] > 0
    d = cpu.threads_delta({"s": {"main": 1.0, "librdkafka": 2.0}}, {"s": {"main": 1.5, "librdkafka": 2.25}}, {"s": 1.0})
    assert d == {"s": {"main": 0.5, "librdkafka": 0.25, "other": 0.25}}
