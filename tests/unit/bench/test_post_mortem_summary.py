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
