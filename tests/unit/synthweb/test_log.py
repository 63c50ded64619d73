"""The politeness checker on hand-made logs, and load_log round-trips."""

from __future__ import annotations

import pytest
from streamcrawl_synthweb import LogEntry, load_log, politeness_violations
from streamcrawl_synthweb.log import server_holds


def e(start: float, end: float, host: str = "h0001.synth.test", path: str = "/",
      last_write: float | None = None) -> LogEntry:
    return LogEntry(
        host=host, ip="127.10.0.1", port=8480, client="127.0.0.1", method="GET", path=path,
        status=200, start=start, end=end, bytes=10, ua="streamcrawl", last_write=last_write,
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


def test_a_hold_between_the_last_write_and_the_end_stamp_is_not_charged():
    # A 100 ms exchange whose end was stamped 20 ms late: at the end stamp it would need 1.2 s of quiet
    # and leave a 1.08 s gap (short by 0.12 s); at its last write it needs 1.0 s and got 1.1 s.
    held = [e(0.0, 0.12, last_write=0.10), e(1.2, 1.21)]
    assert politeness_violations(held) == []
    assert [x.kind for x in politeness_violations([e(0.0, 0.12), e(1.2, 1.21)])] == ["short_gap"]
    # a real short gap is still one when the stamps agree, and an overlap with the bytes is an overlap
    assert [x.kind for x in politeness_violations([e(0.0, 0.01, last_write=0.01), e(0.8, 0.81)])] == ["short_gap"]
    assert [x.kind for x in politeness_violations([e(0.0, 0.5, last_write=0.45), e(0.4, 0.6)])] == ["overlap"]
    # a last_write after the end (clock step) never moves the end later
    assert e(0.0, 0.1, last_write=0.2).sent == 0.1
    assert server_holds([e(0.0, 0.12, last_write=0.10), e(1.2, 1.21), e(2.0, 2.001, last_write=2.0)]) == \
        pytest.approx([0.02, 0.001])


def test_load_log_reads_logs_without_last_write(tmp_path):
    path = tmp_path / "old.jsonl"
    line = e(0, 1).to_json().replace(',"last_write":null', "")
    assert "last_write" not in line
    path.write_text(line + "\n", encoding="utf-8")
    assert load_log(path) == [e(0, 1)] and load_log(path)[0].sent == 1
