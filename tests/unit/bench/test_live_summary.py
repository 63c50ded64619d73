"""The launcher's end summary and panel say what their host figure is: hosts with URLs still queued (the
frontiers' summary rows), not hosts crawled, which once read "hosts 5" after a 200-host crawl."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rich.console import Console
from streamcrawl_launcher.crawl import Progress
from streamcrawl_launcher.live import View, panel, summary


def _view() -> View:
    return View(elapsed_s=12.0, progress=Progress(t=0.0, fetch_results=900, pages_published=812, dead_letters=0,
                                                 lag={"parser": 3}),
                pages_now=40.0, pages_1m=38.0, outcomes={"fetched": 850, "http_error": 4}, fetched=850,
                bytes_=1_000_000, duplicates=7, traps=2, hosts_queued=5, queued=41)


def test_the_summary_counts_queued_urls_and_their_hosts_not_hosts_crawled() -> None:
    crawl: Any = SimpleNamespace(settings=SimpleNamespace(s3_bucket="b", s3_endpoint="http://127.0.0.1:1",
                                                          kafka_bootstrap="127.0.0.1:2"))
    text = summary(_view(), crawl)
    assert "  still queued    41 URLs on 5 hosts" in text
    assert "  pages fetched   850   published to" in text
    assert "hosts           " not in text


def test_the_panel_says_the_same() -> None:
    console = Console(width=200, record=True)
    console.print(panel(_view(), "t"))
    assert "queued 41 on 5 hosts" in console.export_text()
