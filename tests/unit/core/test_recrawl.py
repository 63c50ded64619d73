"""Recrawl interval rules and the change-rate estimator."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcrawl_core.recrawl import (
    ChangeHistory,
    RecrawlConfig,
    adapt_interval,
    change_rate,
    estimate_interval,
    is_unchanged_status,
    next_interval,
    scale_for_importance,
)

CFG = RecrawlConfig()
H, D = 3600.0, 86400.0


class TestDoubling:
    def test_changed_halves_unchanged_doubles(self) -> None:
        assert next_interval(8 * H, True) == 4 * H
        assert next_interval(8 * H, False) == 16 * H

    def test_clamped_to_bounds(self) -> None:
        assert next_interval(H, True) == H
        assert next_interval(20 * D, False) == 30 * D

    def test_missing_previous_starts_from_initial(self) -> None:
        for prev in (None, 0.0, -5.0, math.nan, math.inf):
            assert next_interval(prev, False) == 2 * CFG.initial_interval_s

    def test_importance_shortens_and_is_clamped(self) -> None:
        assert next_interval(8 * H, False, importance=4.0) == 4 * H
        assert next_interval(H, True, importance=100.0) == H
        assert next_interval(20 * D, False, importance=0.5) == 30 * D

    def test_importance_does_not_compound_when_persisting_adapt(self) -> None:
        interval = D
        for _ in range(3):
            interval = adapt_interval(interval, False)
        assert interval == 8 * D
        assert scale_for_importance(interval, 2.0) == 4 * D

    def test_bad_importance(self) -> None:
        for bad in (0.0, -1.0, math.nan, math.inf):
            with pytest.raises(ValueError):
                next_interval(D, False, importance=bad)

    def test_304_is_unchanged(self) -> None:
        assert is_unchanged_status(304)
        assert not is_unchanged_status(200) and not is_unchanged_status(None)

    def test_config_validation(self) -> None:
        with pytest.raises(ValueError):
            RecrawlConfig(min_interval_s=10 * D, max_interval_s=D)
        with pytest.raises(ValueError):
            RecrawlConfig(grow_factor=0.5)
        with pytest.raises(ValueError):
            RecrawlConfig(shrink_factor=0.0)
        with pytest.raises(ValueError):
            RecrawlConfig(estimator="magic")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            RecrawlConfig(min_observations=0)

    @given(
        prev=st.none() | st.floats(allow_nan=True, allow_infinity=True),
        changed=st.booleans(),
        importance=st.floats(0.01, 1000),
    )
    def test_always_within_bounds(self, prev: float | None, changed: bool, importance: float) -> None:
        assert CFG.min_interval_s <= next_interval(prev, changed, importance) <= CFG.max_interval_s


class TestChangeHistory:
    def test_first_visit_is_baseline(self) -> None:
        h = ChangeHistory().record(100.0, changed=True)
        assert (h.fetch_count, h.change_count, h.first_seen, h.last_change) == (1, 0, 100.0, None)

    def test_counts_and_times(self) -> None:
        h = ChangeHistory().record(0.0, False).record(10.0, True).record(20.0, False)
        assert (h.fetch_count, h.change_count, h.last_fetch, h.last_change) == (3, 1, 20.0, 10.0)

    def test_validation(self) -> None:
        with pytest.raises(ValueError):
            ChangeHistory(fetch_count=2, change_count=2)
        with pytest.raises(ValueError):
            ChangeHistory(fetch_count=-1)
        with pytest.raises(ValueError):
            ChangeHistory().record(math.nan, False)


class TestChangeRate:
    def test_not_enough_data(self) -> None:
        assert change_rate(ChangeHistory()) is None
        assert change_rate(ChangeHistory().record(5.0, False)) is None
        assert change_rate(ChangeHistory(2, 0, 5.0, 5.0, None)) is None  # zero span

    def test_no_change_seen_means_max_interval(self) -> None:
        cfg = RecrawlConfig(estimator="change_rate")
        h = ChangeHistory()
        for t in range(5):
            h = h.record(t * D, False)
        assert change_rate(h) == 0.0
        assert estimate_interval(h, 4 * D, cfg) == cfg.max_interval_s

    def test_estimator_recovers_poisson_rate(self) -> None:
        # Simulate a page changing as a Poisson process with mean interval 2 days, visited daily.
        rng = random.Random(42)
        true_rate = 1 / (2 * D)
        h = ChangeHistory().record(0.0, False)
        next_change = rng.expovariate(true_rate)
        for visit in range(1, 400):
            t = visit * D
            changed = next_change <= t
            while next_change <= t:
                next_change += rng.expovariate(true_rate)
            h = h.record(t, changed)
        est = change_rate(h)
        assert est is not None
        naive = h.change_count / (h.last_fetch - h.first_seen)  # type: ignore[operator]
        assert abs(est - true_rate) / true_rate < 0.15
        assert naive < est  # the naive estimate under-counts multiple changes between visits
        cfg = RecrawlConfig(estimator="change_rate")
        assert estimate_interval(h, h.last_fetch or 0.0, cfg) == pytest.approx(1 / est)

    def test_falls_back_to_doubling(self) -> None:
        cfg = RecrawlConfig(estimator="change_rate", min_observations=5)
        h = ChangeHistory().record(0.0, False).record(D, True)
        assert estimate_interval(h, D, cfg, prev_interval_s=4 * H) == 2 * H  # changed at `now`
        assert estimate_interval(h, 2 * D, cfg, prev_interval_s=4 * H) == 8 * H
        assert estimate_interval(h, D, CFG, prev_interval_s=4 * H, importance=2.0) == H

    def test_bad_now(self) -> None:
        with pytest.raises(ValueError):
            estimate_interval(ChangeHistory(), math.inf)
