"""The Scrapy side of ``bench/crawl_bench.py``: a self-contained broad-crawl spider over the synthetic web.

    python bench/scrapy_side.py --manifest run/manifest.json --duration 180 --result scrapy.json

Start URLs are the manifest's seeds (every host's home page). The spider follows every ``<a href>`` that
stays inside ``synth.test`` (same-site and cross-site links alike), obeys robots.txt and is configured as
politely as streamcrawl is asked to be: one request at a time per host (``CONCURRENT_REQUESTS_PER_DOMAIN=1``),
``DOWNLOAD_DELAY=1`` without jitter, AutoThrottle off. ``CONCURRENT_REQUESTS`` is high (2000) so the
per-host limit, not the global one, binds.

DNS: ``*.synth.test`` exists only on the synthetic web's DNS server. This spider answers from the
manifest's host -> IP table instead (NXDOMAIN/SERVFAIL hosts fail as they would), through a resolver
installed with Scrapy's ``TWISTED_DNS_RESOLVER`` setting. That makes DNS free and always cached for
Scrapy: an advantage over streamcrawl, which asks the real server.

The spider measures its own CPU (``os.times()``: the kernel's utime/stime, the counters that
``/proc/self/stat`` shows) when it opens and exactly ``--duration`` seconds later, and writes the
window and the CPU as JSON to ``--result`` at the end of the window, and again with Scrapy's stats
when the spider has closed (Scrapy's shutdown still downloads what its per-host queues hold; that
work lies outside the window and is not counted).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.exceptions import ScrapyDeprecationWarning
from scrapy.http import HtmlResponse, Response
from twisted.internet import defer
from twisted.internet.error import DNSLookupError
from twisted.internet.interfaces import IResolverSimple
from zope.interface import implementer

USER_AGENT = f"streamcrawl-bench-scrapy/1.0 (Scrapy {scrapy.__version__}; benchmark on loopback)"
DNS_FAILURE_KINDS = ("dns_nxdomain", "dns_servfail")


def cpu_now() -> float:
    """User + system CPU seconds of this process and its waited-for children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def host_table(manifest: dict[str, Any]) -> dict[str, str | None]:
    """host name -> IP from the manifest; None for hosts whose DNS answer is NXDOMAIN/SERVFAIL."""
    return {name: (None if info.get("kind") in DNS_FAILURE_KINDS else info["ip"])
            for name, info in manifest["hosts"].items()}


@implementer(IResolverSimple)
class ManifestResolver:
    """A Twisted ``IResolverSimple`` answering from the manifest (same hook as Scrapy's resolvers)."""

    def __init__(self, reactor: Any, table: dict[str, str | None]) -> None:
        self.reactor = reactor
        self.table = table

    @classmethod
    def from_crawler(cls, crawler: Crawler, reactor: Any) -> ManifestResolver:
        manifest = json.loads(Path(crawler.settings["BENCH_MANIFEST"]).read_text())
        return cls(reactor, host_table(manifest))

    def install_on_reactor(self) -> None:
        self.reactor.installResolver(self)

    def getHostByName(self, name: str, timeout: Sequence[int] = ()) -> defer.Deferred[str]:
        ip = self.table.get(name.lower().rstrip("."))
        if ip is None:
            return defer.fail(DNSLookupError(name))
        return defer.succeed(ip)


class SynthSpider(scrapy.Spider):
    name = "synthweb"
    allowed_domains = ["synth.test"]

    def __init__(self, seeds: list[str], duration: float, result: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = seeds
        self.duration = duration
        self.result_path = Path(result)
        self.window: dict[str, Any] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> SynthSpider:
        spider: SynthSpider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.on_opened, signal=signals.spider_opened)
        crawler.signals.connect(spider.on_closed, signal=signals.spider_closed)
        return spider

    def on_opened(self, spider: scrapy.Spider) -> None:
        from twisted.internet import reactor

        self.window.update(t_open=time.time(), cpu_open=cpu_now())
        self._write({})  # tells the bench the window has opened
        reactor.callLater(self.duration, self.on_window_end)  # type: ignore[attr-defined,arg-type]

    def on_window_end(self) -> None:
        """Close the measurement window. The result is written now (the bench may not wait for Scrapy's
        shutdown, which keeps downloading what its slot queues hold) and again, with stats, on close."""
        self.window.update(t_end=time.time(), cpu_end=cpu_now())
        self._write({})

    def _write(self, extra: dict[str, Any]) -> None:
        doc = {**self.window, "scrapy": scrapy.__version__, **extra}
        tmp = self.result_path.with_name(self.result_path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1, sort_keys=True))
        os.replace(tmp, self.result_path)

    def on_closed(self, spider: scrapy.Spider, reason: str) -> None:
        assert self.crawler.stats is not None
        stats = {k: (v if isinstance(v, int | float | str) else str(v))
                 for k, v in self.crawler.stats.get_stats().items()}
        self._write({"t_closed": time.time(), "cpu_closed": cpu_now(), "reason": reason, "stats": stats})

    def parse(self, response: Response) -> Iterator[scrapy.Request]:
        if not isinstance(response, HtmlResponse):
            return  # JSON, images, PDFs, ...: nothing to follow
        for href in response.css("a::attr(href)").getall():
            try:
                yield response.follow(href, callback=self.parse)
            except ValueError:
                continue  # javascript:, mailto:, malformed


def settings(manifest: Path, duration: float) -> dict[str, Any]:
    return {
        "BENCH_MANIFEST": str(manifest),
        # Politeness, as configured for streamcrawl: 1 request at a time per host, 1 s apart, no jitter.
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 1.0,
        "RANDOMIZE_DOWNLOAD_DELAY": False,  # deprecated in 2.19 ...
        "DOWNLOAD_DELAY_JITTER": 0.0,  # ... in favour of this; both say "no jitter"
        "AUTOTHROTTLE_ENABLED": False,
        # Throughput: the per-host limit must bind, not the global one.
        "CONCURRENT_REQUESTS": 2000,
        "SCHEDULER_PRIORITY_QUEUE": "scrapy.pqueues.DownloaderAwarePriorityQueue",  # Scrapy's broad-crawl queue
        "USER_AGENT": USER_AGENT,
        "TWISTED_DNS_RESOLVER": f"{__name__}.ManifestResolver",
        # Mirror streamcrawl's fetcher limits (read timeout 30 s, 10 MiB body cap); no cookies, no telnet.
        "DOWNLOAD_TIMEOUT": 30,
        "DOWNLOAD_MAXSIZE": 10 * 1024 * 1024,
        "DOWNLOAD_WARNSIZE": 0,
        "COOKIES_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "CLOSESPIDER_TIMEOUT": duration + 1.0,  # the CPU/time window closes at +duration, before this
        "LOG_LEVEL": "WARNING",
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--manifest", type=Path, required=True, help="the synthetic web's manifest.json")
    p.add_argument("--duration", type=float, default=180.0, help="measurement window, seconds")
    p.add_argument("--result", type=Path, required=True, help="write the window, CPU and stats here (JSON)")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", category=ScrapyDeprecationWarning)  # RANDOMIZE_DOWNLOAD_DELAY
    seeds = json.loads(args.manifest.read_text())["seeds"]
    process = CrawlerProcess(settings(args.manifest.resolve(), args.duration), install_root_handler=True)
    process.crawl(SynthSpider, seeds=seeds, duration=args.duration, result=str(args.result))
    process.start()
    return 0 if args.result.exists() else 1


if __name__ == "__main__":
    raise SystemExit(main())
