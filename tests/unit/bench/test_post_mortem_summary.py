"""The one-line summary of a crawl's post-mortem that a fault test's failure message carries (CI shows the
output, not the files the post-mortem wrote)."""

from __future__ import annotations

import json
from pathlib import Path

from streamcrawl_launcher.diagnose import lagging_summary


def test_summary_names_each_group_its_lagging_partitions_and_members(tmp_path: Path) -> None:
    path = tmp_path / "not-idle.json"
    path.write_text(json.dumps({"groups": {
        "streamcrawl-frontier": {"state": "STABLE", "members": [{"member_id": "a"}],
                                 "lagging": {"fetch_results[3]": {"committed": 10, "end": 14}}},
        "streamcrawl-dedup": {"state": "EMPTY", "members": [], "lagging": {}},
    }}))
    line = lagging_summary(path)
    assert "streamcrawl-frontier: STABLE, 1 members, 1 lagging: fetch_results[3] 10/14" in line
    assert "streamcrawl-dedup: EMPTY, 0 members, 0 lagging" in line


def test_summary_keeps_the_errors_and_caps_the_partitions(tmp_path: Path) -> None:
    path = tmp_path / "not-idle.json"
    lagging = {f"url_frontier[{i}]": {"committed": i, "end": i + 1} for i in range(30)}
    path.write_text(json.dumps({"groups": {"streamcrawl-fetcher": {"describe_error": "TIMED_OUT",
                                                                   "lagging": lagging}}}))
    line = lagging_summary(path, limit=5)
    assert "30 lagging" in line and "url_frontier[4] 4/5" in line and "url_frontier[5]" not in line
    assert "TIMED_OUT" in line
    path.write_text(json.dumps({"groups_error": "KafkaException(_TRANSPORT)"}))
    assert lagging_summary(path) == "post-mortem: KafkaException(_TRANSPORT)"


def test_a_missing_post_mortem_is_said_so(tmp_path: Path) -> None:
    assert lagging_summary(tmp_path / "absent.json").startswith("no post-mortem")


def test_a_lagging_group_brings_its_services_warnings_and_main_thread(tmp_path: Path) -> None:
    from streamcrawl_launcher.diagnose import log_digest

    log = tmp_path / "parser.log"
    lines = [{"ts": 1, "level": "info", "service": "parser", "msg": "loop", "handled": 3},
             {"ts": 2, "level": "warning", "service": "parser", "msg": "consumer error", "error": "Not coordinator"},
             {"ts": 3, "level": "warning", "service": "parser", "msg": "consumer error", "error": "Not coordinator"},
             {"ts": 4, "level": "error", "service": "parser", "msg": "record not finished", "offset": 7}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n")
    digest = log_digest(log)
    assert digest["counts"] == {"consumer error": 2, "record not finished": 1}
    assert digest["last"][-1].startswith("record not finished") and '"offset": 7' in digest["last"][-1]
    dump = ("Process 1: python\nThread 10 (idle): \"MainThread\"\n"
            "    select (selectors.py:468)\n    run (kafka_loop.py:150)\n")
    path = tmp_path / "not-idle.json"
    path.write_text(json.dumps({
        "groups": {"streamcrawl-parser": {"state": "STABLE", "members": [{"member_id": "a"}],
                                          "lagging": {"fetch_results[3]": {"committed": 1, "end": 9}}},
                   "streamcrawl-dedup": {"state": "STABLE", "members": [{"member_id": "b"}], "lagging": {}}},
        "stacks": {"parser": dump, "dedup": dump, "parser-2": dump, "parserx": dump},
        "warnings": {"parser": digest, "dedup": {"counts": {"quiet": 1}, "last": []}}}))
    line = lagging_summary(path)
    assert "parser warnings {'consumer error': 2, 'record not finished': 1}" in line
    assert "parser main thread: select (selectors.py:468) < run (kafka_loop.py:150)" in line
    assert "parser-2 main thread: select" in line and "parserx" not in line  # each instance of the service
    assert "quiet" not in line and "dedup main thread" not in line  # only lagging groups say more
    assert log_digest(tmp_path / "absent.log")["error"].startswith("FileNotFoundError")
