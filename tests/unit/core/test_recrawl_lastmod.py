"""The change-rate estimator with known modification times (HTTP Last-Modified, sitemap lastmod)."""

from __future__ import annotations

import math
import random
import statistics

import pytest
from streamcrawl_core.recrawl import (
    LASTMOD_SKEW_S,
    ChangeHistory,
    RecrawlConfig,
    change_rate,
    estimate_interval,
    lastmod_change_rate,
    parse_http_date,
    plan_visit,
)

GAP = 3600.0  # visits every hour
FAST = RecrawlConfig(min_interval_s=1.0, max_interval_s=1e9, estimator="change_rate")


def _simulate(rate_per_gap: float, visits: int, rng: random.Random) -> ChangeHistory:
    """A page changing as a Poisson process (``rate_per_gap`` changes per visit gap on average) visited
    every GAP seconds, ``visits`` times after the first; each visit knows the page's last modification
    time (the newest change at or before it, or the page's creation)."""
    end = visits * GAP
    changes: list[float] = []
    t = 0.0
    while True:
        t += rng.expovariate(rate_per_gap / GAP)
        if t > end:
            break
        changes.append(t)
    history = ChangeHistory().record(0.0, False, -86400.0)
    last_mod, i = -86400.0, 0
    for k in range(1, visits + 1):
        now = k * GAP
        changed = False
        while i < len(changes) and changes[i] <= now:
            last_mod, changed, i = changes[i], True, i + 1
        history = history.record(now, changed, last_mod)
    return history


def _estimates(rate_per_gap: float, pages: int = 300, visits: int = 40) -> tuple[list[float], list[float]]:
    rng = random.Random(14)
    visit_rates, lastmod_rates = [], []
    for _ in range(pages):
        h = _simulate(rate_per_gap, visits, rng)
        v, lm = change_rate(h), lastmod_change_rate(h)
        assert v is not None and lm is not None
        visit_rates.append(v * GAP)
        lastmod_rates.append(lm * GAP)
    return visit_rates, lastmod_rates


def _rmse(values: list[float], truth: float) -> float:
    return math.sqrt(statistics.fmean((v - truth) ** 2 for v in values))


class TestConvergence:
    def test_converges_on_the_poisson_rate_with_lower_error(self) -> None:
        visit, lastmod = _estimates(3.0)  # three changes per visit gap on average
        assert statistics.fmean(lastmod) == pytest.approx(3.0, rel=0.05)
        assert _rmse(lastmod, 3.0) < 0.85 * _rmse(visit, 3.0)
        assert statistics.pstdev(lastmod) < statistics.pstdev(visit)

    def test_keeps_up_with_a_page_faster_than_its_visits(self) -> None:
        # The visit-history estimator cannot exceed ln(2n + 1) per gap: it sees at most one change a visit.
        visit, lastmod = _estimates(6.0)
        assert statistics.fmean(visit) < 0.8 * 6.0
        assert statistics.fmean(lastmod) == pytest.approx(6.0, rel=0.05)
        assert _rmse(lastmod, 6.0) < 0.7 * _rmse(visit, 6.0)

    def test_slow_page_unbiased(self) -> None:
        _, lastmod = _estimates(0.5)
        assert statistics.fmean(lastmod) == pytest.approx(0.5, rel=0.05)

    def test_plan_visit_uses_the_dates(self) -> None:
        # Changed at every hourly visit, each time 5 minutes before it: the dates say "about every 5 minutes
        # or so"; the visit history alone only knows "at least once an hour".
        with_dates, without = ChangeHistory(), ChangeHistory()
        for k in range(6):
            now = k * GAP
            with_dates = plan_visit(with_dates, now, k > 0, GAP, 1.0, FAST, modified_at=now - 300.0).history
            without = plan_visit(without, now, k > 0, GAP, 1.0, FAST).history
        dated = estimate_interval(with_dates, 5 * GAP, FAST)
        undated = estimate_interval(without, 5 * GAP, FAST)
        assert dated == pytest.approx(300.0 * 5 / 4)  # n / (n - 1) x 300 s
        assert undated == pytest.approx(GAP / math.log(11))
        assert with_dates.lm_visits == 5 and without.lm_visits == 0


class TestEdgeCases:
    def _two(self, modified_at: float | None, changed: bool) -> ChangeHistory:
        return ChangeHistory().record(0.0, False, -5.0).record(GAP, changed, modified_at)

    def test_first_visit_is_only_the_baseline(self) -> None:
        h = ChangeHistory().record(100.0, False, 50.0)
        assert (h.lm_visits, h.lm_changes, h.lm_exposure_s, h.lm_conflicts) == (0, 0, 0.0, 0)

    def test_missing_or_unusable_values_are_ignored(self) -> None:
        for value in (None, math.nan, math.inf, -math.inf):
            h = self._two(value, True)
            assert (h.lm_visits, h.lm_conflicts, h.fetch_count, h.change_count) == (0, 0, 2, 1)

    def test_lastmod_in_the_future_is_ignored(self) -> None:
        h = self._two(GAP + LASTMOD_SKEW_S + 1.0, True)
        assert (h.lm_visits, h.lm_conflicts) == (0, 0)

    def test_lastmod_a_little_ahead_counts_as_now(self) -> None:
        h = self._two(GAP + LASTMOD_SKEW_S / 2, True)
        assert (h.lm_visits, h.lm_changes, h.lm_exposure_s) == (1, 1, 0.0)

    def test_lastmod_older_than_the_previous_visit_is_an_unchanged_gap(self) -> None:
        h = self._two(-1000.0, False)
        assert (h.lm_visits, h.lm_changes, h.lm_exposure_s, h.lm_conflicts) == (1, 0, GAP, 0)
        h = self._two(0.0, False)  # modified exactly at the previous visit: seen by it
        assert (h.lm_visits, h.lm_changes, h.lm_exposure_s) == (1, 0, GAP)

    def test_change_since_the_previous_visit_counts_time_since_it(self) -> None:
        h = self._two(GAP - 600.0, True)
        assert (h.lm_visits, h.lm_changes, h.lm_exposure_s) == (1, 1, 600.0)

    def test_dates_that_contradict_the_body_are_conflicts(self) -> None:
        stale = self._two(-1000.0, True)  # the body changed, the date says not since the last visit
        touched = self._two(GAP - 600.0, False)  # the date moved, the body did not
        for h in (stale, touched):
            assert (h.lm_visits, h.lm_changes, h.lm_exposure_s, h.lm_conflicts) == (0, 0, 0.0, 1)

    def test_out_of_order_visit_adds_no_gap(self) -> None:
        h = ChangeHistory().record(GAP, False, 0.0).record(GAP, True, GAP - 1)
        assert h.lm_visits == 0 and h.lm_conflicts == 0

    def test_too_many_conflicts_fall_back_to_the_visit_history(self) -> None:
        base = ChangeHistory(fetch_count=11, change_count=5, first_seen=0.0, last_fetch=10 * GAP)
        trusted = ChangeHistory(11, 5, 0.0, 10 * GAP, None, lm_visits=8, lm_changes=4, lm_exposure_s=4 * GAP,
                                lm_conflicts=2)
        untrusted = ChangeHistory(11, 5, 0.0, 10 * GAP, None, lm_visits=7, lm_changes=4,
                                  lm_exposure_s=4 * GAP, lm_conflicts=3)
        visit_interval = estimate_interval(base, 10 * GAP, FAST)
        assert estimate_interval(untrusted, 10 * GAP, FAST) == visit_interval
        lm = lastmod_change_rate(trusted)
        assert lm is not None
        assert estimate_interval(trusted, 10 * GAP, FAST) == pytest.approx(1 / lm)
        assert estimate_interval(trusted, 10 * GAP, FAST) != pytest.approx(visit_interval)
        off = RecrawlConfig(min_interval_s=1.0, max_interval_s=1e9, estimator="change_rate", use_lastmod=False)
        assert estimate_interval(trusted, 10 * GAP, off) == visit_interval

    def test_too_few_dated_visits_fall_back(self) -> None:
        h = ChangeHistory(11, 5, 0.0, 10 * GAP, None, lm_visits=2, lm_changes=1, lm_exposure_s=GAP)
        base = ChangeHistory(fetch_count=11, change_count=5, first_seen=0.0, last_fetch=10 * GAP)
        assert estimate_interval(h, 10 * GAP, FAST) == estimate_interval(base, 10 * GAP, FAST)

    def test_no_change_and_instant_changes(self) -> None:
        never = ChangeHistory(5, 0, 0.0, 4 * GAP, None, lm_visits=4, lm_changes=0, lm_exposure_s=4 * GAP)
        assert lastmod_change_rate(never) == 0.0
        assert estimate_interval(never, 4 * GAP, FAST) == FAST.max_interval_s
        # A server stamping every changed response "now": every change seen at the visit itself.
        instant = ChangeHistory(5, 4, 0.0, 4 * GAP, 4 * GAP, lm_visits=4, lm_changes=4, lm_exposure_s=0.0)
        assert lastmod_change_rate(instant) == math.inf
        assert estimate_interval(instant, 4 * GAP, FAST) == FAST.min_interval_s
        assert lastmod_change_rate(ChangeHistory()) is None

    def test_validation(self) -> None:
        with pytest.raises(ValueError):
            ChangeHistory(3, 1, lm_visits=1, lm_changes=2)
        with pytest.raises(ValueError):
            ChangeHistory(3, 1, lm_exposure_s=-1.0)
        with pytest.raises(ValueError):
            ChangeHistory(3, 1, lm_conflicts=-1)
        with pytest.raises(ValueError):
            RecrawlConfig(max_lastmod_conflict_ratio=1.5)


def test_parse_http_date() -> None:
    t = 784111777.0  # Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example)
    assert parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == t
    assert parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT") == t
    assert parse_http_date("Sun Nov  6 08:49:37 1994") == t
    for bad in (None, "", "  ", "yesterday", "Sun, 99 Foo 1994 08:49:37 GMT"):
        assert parse_http_date(bad) is None
