"""Label children of Prometheus metrics, looked up once per label values.

`metric.labels(...)` checks and converts every value and takes the metric's lock on each call (py-spy
showed it at 2–5% of a service's CPU when called per message). It returns the same child object for
the same values, so a dict of the children already seen gives the same series, and like `labels()` it
creates a series only when it is first used."""

from __future__ import annotations

from typing import Generic, TypeVar

from prometheus_client.metrics import MetricWrapperBase

M = TypeVar("M", bound=MetricWrapperBase)


class Children(Generic[M]):
    """``Children(metric)(*values)`` is ``metric.labels(*values)``; values are str (as labels() makes them).
    For metrics whose children are never removed (no ``remove()``/``clear()``), with a bounded set of
    label values."""

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: M) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child
