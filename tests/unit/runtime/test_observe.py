"""streamcrawl_runtime.observe: Prometheus text parsed and summed over instances, window rates that
survive a restarted instance, and histogram quantiles like Prometheus' histogram_quantile."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from streamcrawl_runtime.observe import History, Scrape, by_label, merge, parse_metrics, quantile_from_buckets, total


def _exposition(results: dict[str, int], observations: list[float]) -> str:
    reg = CollectorRegistry()
    c = Counter("streamcrawl_fetcher_results", "r", ["outcome"], registry=reg)
    for outcome, n in results.items():
        c.labels(outcome).inc(n)
    h = Histogram("streamcrawl_fetcher_fetch_seconds", "f", buckets=(0.1, 0.5, 1, 5), registry=reg)
    for v in observations:
        h.observe(v)
    return generate_latest(reg).decode()


def test_samples_of_two_instances_are_summed_by_label():
    a = parse_metrics(_exposition({"fetched": 3, "dns_error": 1}, [0.2]))
    b = parse_metrics(_exposition({"fetched": 4}, [0.3, 2.0]))
    s = merge([a, b])
    assert total(s, "streamcrawl_fetcher_results_total") == 8
    assert total(s, "streamcrawl_fetcher_results_total", outcome="fetched") == 7
    assert by_label(s, "streamcrawl_fetcher_results_total", "outcome") == {"fetched": 7, "dns_error": 1}
    assert total(s, "streamcrawl_fetcher_fetch_seconds_count") == 3
    assert not any(name.endswith("_created") for name, _ in s)


def test_rates_over_a_window_and_a_restart_never_go_negative():
    h = History()
    key = ("x_total", ())
    for t, v in [(0, 0), (30, 30), (60, 90), (90, 10)]:  # the instance restarted before t=90
        h.add(Scrape(float(t), {key: float(v)}))
    assert h.rate(60.0, "x_total") == pytest.approx(10 / 60)  # 30 -> (restart) 10: counted from zero
    assert h.span(300.0) == 90.0
    assert h.rate(300.0, "x_total") == pytest.approx(10 / 90)
    assert History().rate(60, "x_total") is None


def test_history_keeps_only_the_longest_window():
    h = History(keep_s=100)
    for t in range(0, 500, 10):
        h.add(Scrape(float(t), {}))
    assert h.scrapes[0].t >= 490 - 110 and h.span(100.0) == pytest.approx(100.0)


def test_quantiles_like_prometheus():
    buckets = [(0.1, 10.0), (0.5, 60.0), (1.0, 90.0), (math.inf, 100.0)]
    assert quantile_from_buckets(buckets, 0.5) == pytest.approx(0.1 + 0.4 * 40 / 50)
    assert quantile_from_buckets(buckets, 0.05) == pytest.approx(0.05)
    assert quantile_from_buckets(buckets, 0.99) == 1.0  # in the +Inf bucket: the largest finite bound
    assert quantile_from_buckets([(0.1, 0.0), (math.inf, 0.0)], 0.5) is None


def test_window_quantile_uses_only_the_windows_observations():
    h = History()
    h.add(Scrape(0.0, parse_metrics(_exposition({}, [4.0] * 100))))  # slow, long ago
    h.add(Scrape(60.0, parse_metrics(_exposition({}, [4.0] * 100 + [0.05] * 100))))
    assert h.quantile(60.0, "streamcrawl_fetcher_fetch_seconds", 0.5) == pytest.approx(0.05)
