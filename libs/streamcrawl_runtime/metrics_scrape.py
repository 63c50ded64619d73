"""The HTTP side of observation: GET every service's /metrics with one reused client and sum them
(streamcrawl_runtime.observe does the arithmetic)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import httpx

from streamcrawl_runtime.observe import Sample, Scrape, merge, parse_metrics


class Scraper:
    """GETs each target's /metrics with one reused HTTP client (blocking; a few ms per target)."""

    def __init__(self, targets: Sequence[str], timeout_s: float = 2.0) -> None:
        self.targets = list(targets)
        self.client = httpx.Client(timeout=timeout_s, trust_env=False)

    def scrape(self) -> Scrape:
        samples: list[Sample] = []
        status: dict[str, str] = {}
        for url in self.targets:
            try:
                r = self.client.get(url)
                r.raise_for_status()
                samples.append(parse_metrics(r.text))
                status[url] = "ok"
            except (httpx.HTTPError, ValueError) as exc:
                status[url] = f"{type(exc).__name__}: {str(exc)[:120]}"
        return Scrape(time.time(), merge(samples), status)

    def close(self) -> None:
        self.client.close()
