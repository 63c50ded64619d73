"""Cheap observation of a running crawl: every service's ``/metrics`` (streamcrawl_runtime.health) scraped,
summed over instances, and kept as a short history, so rates over a window (pages/s over 1 and 5 minutes)
and histogram quantiles come from counters, never from table scans or extra Kafka consumers.

One scrape of a service is one small HTTP GET (streamcrawl_runtime.metrics_scrape); `History` keeps a few
minutes of summed samples. Pure: no I/O here.
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
#: (sample name, sorted labels) -> value, summed over the scraped instances
Sample = dict[tuple[str, Labels], float]


def parse_metrics(text: str) -> Sample:
    """Prometheus text exposition -> samples. Created-timestamps (``*_created``) are dropped."""
    out: Sample = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.endswith("_created"):
                continue
            key = (s.name, tuple(sorted(s.labels.items())))
            out[key] = out.get(key, 0.0) + float(s.value)
    return out


def merge(samples: Iterable[Sample]) -> Sample:
    out: Sample = {}
    for sample in samples:
        for key, value in sample.items():
            out[key] = out.get(key, 0.0) + value
    return out


@dataclass
class Scrape:
    """One round over the targets: their summed samples and, per target, "ok" or why not."""

    t: float
    sample: Sample
    targets: dict[str, str] = field(default_factory=dict)


def _match(labels: Labels, want: Mapping[str, str]) -> bool:
    if not want:
        return True
    d = dict(labels)
    return all(d.get(k) == v for k, v in want.items())


def total(sample: Sample, name: str, **labels: str) -> float:
    """The sum of ``name`` over the label sets that match ``labels``."""
    return sum(v for (n, lab), v in sample.items() if n == name and _match(lab, labels))


def by_label(sample: Sample, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (n, lab), v in sample.items():
        if n == name:
            key = dict(lab).get(label, "")
            out[key] = out.get(key, 0.0) + v
    return out


def quantile_from_buckets(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """Prometheus-style histogram_quantile over cumulative (le, count) buckets (linear within a bucket);
    None without observations. An answer in the +Inf bucket is the largest finite bound."""
    if not buckets:
        return None
    buckets = sorted(buckets)
    count = buckets[-1][1]
    if count <= 0:
        return None
    rank = q * count
    bounds = [b for b, _ in buckets]
    counts = [c for _, c in buckets]
    i = bisect.bisect_left(counts, rank)
    i = min(i, len(buckets) - 1)
    upper = bounds[i]
    if math.isinf(upper):
        finite = [b for b in bounds if not math.isinf(b)]
        return finite[-1] if finite else None
    lower = bounds[i - 1] if i > 0 else 0.0
    below = counts[i - 1] if i > 0 else 0.0
    in_bucket = counts[i] - below
    if in_bucket <= 0:
        return upper
    return lower + (upper - lower) * (rank - below) / in_bucket


def _buckets(sample: Sample, name: str) -> dict[float, float]:
    out: dict[float, float] = {}
    for (n, lab), v in sample.items():
        if n == f"{name}_bucket":
            le = dict(lab).get("le", "+Inf")
            bound = math.inf if le in ("+Inf", "Inf") else float(le)
            out[bound] = out.get(bound, 0.0) + v
    return out


class History:
    """Summed samples over the last ``keep_s`` seconds: window rates and quantiles of counters. A counter
    that went down (an instance restarted) counts from zero again, so a rate never goes negative."""

    def __init__(self, keep_s: float = 330.0) -> None:
        self.keep_s = keep_s
        self.scrapes: deque[Scrape] = deque()

    def add(self, scrape: Scrape) -> None:
        self.scrapes.append(scrape)
        while len(self.scrapes) > 2 and scrape.t - self.scrapes[1].t >= self.keep_s:
            self.scrapes.popleft()

    @property
    def latest(self) -> Scrape | None:
        return self.scrapes[-1] if self.scrapes else None

    def _base(self, seconds: float) -> Scrape | None:
        """The oldest scrape no more than ``seconds`` before the latest (the window's start)."""
        if len(self.scrapes) < 2:
            return None
        end = self.scrapes[-1].t
        for s in self.scrapes:
            if end - s.t <= seconds + 0.5:
                return s if s is not self.scrapes[-1] else None
        return None

    def span(self, seconds: float) -> float:
        """How many seconds the window of ``seconds`` actually covers (less right after a start)."""
        base = self._base(seconds)
        return 0.0 if base is None or self.latest is None else self.latest.t - base.t

    def delta(self, seconds: float, name: str, **labels: str) -> float | None:
        base, last = self._base(seconds), self.latest
        if base is None or last is None:
            return None
        now, then = total(last.sample, name, **labels), total(base.sample, name, **labels)
        return now - then if now >= then else now

    def rate(self, seconds: float, name: str, **labels: str) -> float | None:
        d = self.delta(seconds, name, **labels)
        span = self.span(seconds)
        return None if d is None or span <= 0 else d / span

    def delta_by(self, seconds: float, name: str, label: str) -> dict[str, float]:
        base, last = self._base(seconds), self.latest
        if base is None or last is None:
            return {}
        now, then = by_label(last.sample, name, label), by_label(base.sample, name, label)
        return {k: (v - then.get(k, 0.0) if v >= then.get(k, 0.0) else v) for k, v in now.items()}

    def quantile(self, seconds: float, name: str, q: float) -> float | None:
        """The q-quantile of histogram ``name`` over the window (or since the start without history)."""
        last = self.latest
        if last is None:
            return None
        now = _buckets(last.sample, name)
        base = self._base(seconds)
        then = _buckets(base.sample, name) if base is not None else {}
        if any(now.get(b, 0.0) < c for b, c in then.items()):
            then = {}  # an instance restarted: use its counts since then
        window = [(b, now[b] - then.get(b, 0.0)) for b in now]
        return quantile_from_buckets(window, q)
