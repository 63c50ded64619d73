"""Children: the same label children (and series) as metric.labels(), looked up once."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from streamcrawl_runtime.metrics import Children


def test_children_are_the_metrics_own_and_looked_up_once() -> None:
    registry = CollectorRegistry()
    counter = Counter("t_events_total", "events", ["service", "outcome"], registry=registry)
    calls: list[tuple[Any, ...]] = []
    real = counter.labels

    def spy(*values: Any) -> Counter:
        calls.append(values)
        return real(*values)

    counter.labels = spy  # type: ignore[method-assign]
    children = Children(counter)
    assert registry.get_sample_value("t_events_total", {"service": "s", "outcome": "ok"}) is None  # lazy
    for _ in range(3):
        children("s", "ok").inc()
    children("s", "retry").inc(2)
    assert children("s", "ok") is real("s", "ok")
    assert calls == [("s", "ok"), ("s", "retry")]
    assert registry.get_sample_value("t_events_total", {"service": "s", "outcome": "ok"}) == 3.0
    assert registry.get_sample_value("t_events_total", {"service": "s", "outcome": "retry"}) == 2.0


def test_histogram_children() -> None:
    registry = CollectorRegistry()
    hist = Histogram("t_seconds", "time", ["service"], registry=registry)
    Children(hist)("s").observe(0.5)
    assert registry.get_sample_value("t_seconds_sum", {"service": "s"}) == 0.5
