"""The politeness checker on hand-made logs, and load_log round-trips."""

from __future__ import annotations

from streamcrawl_synthweb import LogEntry, load_log, politeness_violations


def e(start: float, end: float, host: str = "h0001.synth.test", path: str = "/") -> LogEntry:
    return LogEntry(
        host=host, ip="127.10.0.1", port=8480, client="127.0.0.1", method="GET", path=path,
        status=200, start=start, end=end, bytes=10, ua="streamcrawl",
    )  # fmt: skip


def test_clean_log_passes():
    log = [e(0.0, 0.01, path="/robots.txt"), e(1.02, 1.05), e(2.6, 2.7), e(3.8, 3.81, host="h0002.synth.test")]
    assert politeness_violations(log) == []


def test_overlap_and_short_gap_are_caught():
    v = politeness_violations([e(0.0, 0.5), e(0.4, 0.6)])
    assert [x.kind for x in v] == ["overlap"]
    v = politeness_violations([e(0.0, 0.01), e(0.5, 0.51)])
    assert [x.kind for x in v] == ["short_gap"] and v[0].required == 1.0
    # factor x duration: a 0.3 s response demands 3 s of quiet.
    v = politeness_violations([e(0.0, 0.3), e(2.0, 2.01)])
    assert v and abs(v[0].required - 3.0) < 1e-9
    # Crawl-delay raises the bar for its host only.
    log = [e(0.0, 0.01), e(1.5, 1.51)]
    assert politeness_violations(log) == []
    assert politeness_violations(log, crawl_delays={"h0001.synth.test": 2.0})[0].kind == "short_gap"
    # Tolerance: 0.97 s is close enough to 1 s.
    assert politeness_violations([e(0.0, 0.01), e(0.98, 1.0)]) == []


def test_long_request_cannot_hide_an_overlap():
    v = politeness_violations([e(0.0, 5.0), e(0.1, 0.2), e(3.0, 3.1)])
    assert [x.kind for x in v] == ["overlap", "overlap"]


def test_load_log_round_trip(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(e(0, 1).to_json() + "\n" + '{"torn": ', encoding="utf-8")
    assert load_log(path) == [e(0, 1)]
