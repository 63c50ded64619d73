"""When to fetch a known page again.

Two estimators:

* ``"doubling"`` (RecrawlConfig's default) -- adaptive interval: changed -> interval x
  ``shrink_factor`` (halve), unchanged (including 304 Not Modified) -> x ``grow_factor`` (double),
  clamped to [1 h, 30 d]. It needs one float of state per URL, reacts after a single observation and
  its clamp bounds both wasted fetches and staleness. The scheduler's setting defaults to
  ``"change_rate"``, which falls back to this rule until it has enough visits (`plan_visit`).
* ``"change_rate"`` -- Cho & Garcia-Molina's estimator for a Poisson change process observed at
  n roughly regular visits of which X saw a change::

      rate = -ln((n - X + 0.5) / (n + 0.5)) / mean_visit_gap,   interval = 1 / rate

  It corrects the naive X / observed-time, which under-counts changes because several changes
  between two visits look like one. It needs ``ChangeHistory`` (counts + first/last times) and a
  few observations (``min_observations``); with fewer it falls back to the doubling result.

With known modification times (a fetched page's HTTP ``Last-Modified``, or a sitemap ``<lastmod>``),
``"change_rate"`` uses Cho & Garcia-Molina's estimator for a known last-change date instead: each visit
tells whether the page changed since the previous one and, if it did, how long it has been unchanged
since (T_i = visit - last change; an unchanged visit contributes its whole gap). Over n such visits of
which X saw a change and T = sum of those times::

    rate = (X - 1 - X / (n ln(1 - X / n))) / T      ((n - 1) / T when X = n)

i.e. the maximum-likelihood X / T with the paper's small-sample bias correction. It keeps working when a
page changes faster than it is visited (the visit-history estimator cannot exceed ln(2n + 1) / gap) and
has lower variance. A modification time counts only when it agrees with the body comparison (changed
since the previous visit exactly when the body changed); a disagreement is a conflict, and a URL with more
than ``max_lastmod_conflict_ratio`` conflicts among its dated visits falls back to the visit history (a
server that stamps every response "now", or a sitemap that never updates its dates). A time up to
``LASTMOD_SKEW_S`` in the future counts as "now" (clock skew); later than that it is ignored.

Importance scales the *visit delay*, not the stored interval: ``visit_delay = interval /
importance`` (importance > 1 = more important, visited sooner), clamped again to the bounds.
Persist ``adapt_interval``'s value; ``next_interval`` (= adapt + importance) is the delay to use
now. Feeding ``next_interval`` back as the next ``prev_interval_s`` would compound importance.
Cho & Garcia-Molina also showed chasing the fastest-changing pages can hurt freshness: the
``min_interval_s`` floor caps how often the hottest pages are fetched.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from email._parseaddr import mktime_tz, parsedate_tz
from typing import Literal

__all__ = [
    "LASTMOD_SKEW_S",
    "ChangeHistory",
    "RecrawlConfig",
    "VisitPlan",
    "adapt_interval",
    "change_rate",
    "estimate_interval",
    "importance_from_depth",
    "is_unchanged_status",
    "lastmod_change_rate",
    "next_interval",
    "parse_http_date",
    "plan_visit",
    "scale_for_importance",
]

Estimator = Literal["doubling", "change_rate"]


@dataclass(frozen=True)
class RecrawlConfig:
    min_interval_s: float = 3600.0
    max_interval_s: float = 30 * 86400.0
    initial_interval_s: float = 86400.0
    grow_factor: float = 2.0
    shrink_factor: float = 0.5
    estimator: Estimator = "doubling"
    min_observations: int = 3  # visits compared before "change_rate" is trusted
    use_lastmod: bool = True  # "change_rate": the known-modification-time estimator when it has data
    max_lastmod_conflict_ratio: float = 0.25  # dated visits that contradicted the body, beyond: not trusted

    def __post_init__(self) -> None:
        values = (self.min_interval_s, self.max_interval_s, self.initial_interval_s)
        if not all(math.isfinite(v) and v > 0 for v in values) or self.min_interval_s > self.max_interval_s:
            raise ValueError("intervals must be finite, > 0 and min_interval_s <= max_interval_s")
        if not (math.isfinite(self.grow_factor) and self.grow_factor >= 1.0):
            raise ValueError("grow_factor must be >= 1")
        if not (math.isfinite(self.shrink_factor) and 0.0 < self.shrink_factor <= 1.0):
            raise ValueError("shrink_factor must be in (0, 1]")
        if self.estimator not in ("doubling", "change_rate"):
            raise ValueError(f"unknown estimator {self.estimator!r}")
        if self.min_observations < 1:
            raise ValueError("min_observations must be >= 1")
        if not (0.0 <= self.max_lastmod_conflict_ratio <= 1.0):
            raise ValueError("max_lastmod_conflict_ratio must be in [0, 1]")


_DEFAULT = RecrawlConfig()


def _clamp(value: float, config: RecrawlConfig) -> float:
    return min(config.max_interval_s, max(config.min_interval_s, value))


def _check_importance(importance: float) -> None:
    if not (math.isfinite(importance) and importance > 0):
        raise ValueError(f"importance must be a finite number > 0, got {importance!r}")


def adapt_interval(prev_interval_s: float | None, changed: bool, config: RecrawlConfig = _DEFAULT) -> float:
    """The new base interval to persist. A missing or unusable previous interval starts at
    ``initial_interval_s``."""
    if prev_interval_s is None or not math.isfinite(prev_interval_s) or prev_interval_s <= 0:
        prev = config.initial_interval_s
    else:
        prev = prev_interval_s
    factor = config.shrink_factor if changed else config.grow_factor
    return _clamp(prev * factor, config)


def scale_for_importance(interval_s: float, importance: float, config: RecrawlConfig = _DEFAULT) -> float:
    """Delay until the next visit: ``interval / importance``, clamped to the bounds."""
    _check_importance(importance)
    return _clamp(interval_s / importance, config)


def next_interval(
    prev_interval_s: float | None,
    changed: bool,
    importance: float = 1.0,
    config: RecrawlConfig = _DEFAULT,
) -> float:
    """Delay until the next visit under the doubling estimator (see module docstring)."""
    _check_importance(importance)
    return scale_for_importance(adapt_interval(prev_interval_s, changed, config), importance, config)


def is_unchanged_status(status: int | None) -> bool:
    """304 Not Modified: the conditional GET says the page did not change."""
    return status == 304


#: A modification time at most this far after the visit counts as the visit's time (clock skew).
LASTMOD_SKEW_S = 300.0


def parse_http_date(value: str | None) -> float | None:
    """An HTTP-date (``Last-Modified``; all three RFC 9110 forms) in epoch seconds, or None."""
    if not value or not value.strip():
        return None
    try:
        # email._parseaddr: the parser behind email.utils, without its import of socket (no I/O module).
        parts = parsedate_tz(value.strip())
        if parts is None:
            return None
        return float(mktime_tz(parts if parts[9] is not None else (*parts[:9], 0)))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


@dataclass(frozen=True)
class ChangeHistory:
    """What we know about one URL's changes. ``fetch_count`` counts successful visits; the first
    one establishes the baseline, so ``fetch_count - 1`` visits could have detected a change.

    ``lm_*``: the visits (after the first) that came with a usable modification time: how many
    (``lm_visits``), how many of them saw a change (``lm_changes``), the summed time each was known
    unchanged before it (``lm_exposure_s``: visit - modification time when changed, the gap since the
    previous visit when not), and how many dated visits contradicted the body comparison
    (``lm_conflicts``, not in the other three)."""

    fetch_count: int = 0
    change_count: int = 0
    first_seen: float | None = None
    last_fetch: float | None = None
    last_change: float | None = None
    lm_visits: int = 0
    lm_changes: int = 0
    lm_exposure_s: float = 0.0
    lm_conflicts: int = 0

    def __post_init__(self) -> None:
        if self.fetch_count < 0 or self.change_count < 0:
            raise ValueError("counts must be >= 0")
        if self.change_count > max(0, self.fetch_count - 1):
            raise ValueError("change_count cannot exceed fetch_count - 1")
        if min(self.lm_visits, self.lm_changes, self.lm_conflicts) < 0 or self.lm_changes > self.lm_visits:
            raise ValueError("lastmod counts must be >= 0 and lm_changes <= lm_visits")
        if not (math.isfinite(self.lm_exposure_s) and self.lm_exposure_s >= 0):
            raise ValueError("lm_exposure_s must be finite and >= 0")

    def record(self, now: float, changed: bool, modified_at: float | None = None) -> ChangeHistory:
        """History after a visit at ``now``. The first visit cannot be a change. ``modified_at``: the
        page's last modification time as known at this visit (HTTP Last-Modified, sitemap lastmod), or
        None."""
        if not math.isfinite(now):
            raise ValueError("now must be finite")
        if self.fetch_count == 0:
            return ChangeHistory(1, 0, now, now, None)
        after = replace(
            self,
            fetch_count=self.fetch_count + 1,
            change_count=self.change_count + (1 if changed else 0),
            last_fetch=now,
            last_change=now if changed else self.last_change,
        )
        return _record_lastmod(after, self.last_fetch, now, changed, modified_at)


def _record_lastmod(after: ChangeHistory, prev: float | None, now: float, changed: bool,
                    modified_at: float | None) -> ChangeHistory:
    """``after`` with this visit's modification time folded into the lm_* statistics (if usable)."""
    if modified_at is None or not math.isfinite(modified_at) or prev is None or not now > prev:
        return after  # nothing known, or no gap to observe
    if modified_at > now + LASTMOD_SKEW_S:
        return after  # from the future: the clock that wrote it says nothing about the page
    modified_at = min(modified_at, now)
    says_changed = modified_at > prev
    if says_changed != changed:
        return replace(after, lm_conflicts=after.lm_conflicts + 1)
    exposure = (now - modified_at) if changed else (now - prev)
    return replace(after, lm_visits=after.lm_visits + 1, lm_changes=after.lm_changes + (1 if changed else 0),
                   lm_exposure_s=after.lm_exposure_s + exposure)


def change_rate(history: ChangeHistory) -> float | None:
    """Cho & Garcia-Molina change-rate estimate in changes/second; None without enough data."""
    n = history.fetch_count - 1
    if n < 1 or history.first_seen is None or history.last_fetch is None:
        return None
    span = history.last_fetch - history.first_seen
    if not math.isfinite(span) or span <= 0:
        return None
    x = min(history.change_count, n)
    return -math.log((n - x + 0.5) / (n + 0.5)) / (span / n)


def lastmod_change_rate(history: ChangeHistory) -> float | None:
    """Cho & Garcia-Molina's estimate with known last-change times, in changes/second (see the module
    docstring); None without a dated visit. ``math.inf`` when every change was "just now" (T = 0)."""
    n, x, t = history.lm_visits, history.lm_changes, history.lm_exposure_s
    if n < 1:
        return None
    if x == 0:
        return 0.0
    corrected = float(n - 1) if x == n else x - 1 - x / (n * math.log(1 - x / n))
    if t <= 0:
        return math.inf if corrected > 0 else None
    return max(0.0, corrected) / t


def _lastmod_trusted(history: ChangeHistory, config: RecrawlConfig) -> bool:
    dated = history.lm_visits + history.lm_conflicts
    return (config.use_lastmod and history.lm_visits >= config.min_observations
            and history.lm_conflicts <= config.max_lastmod_conflict_ratio * dated)


def estimate_interval(
    history: ChangeHistory,
    now: float,
    config: RecrawlConfig = _DEFAULT,
    importance: float = 1.0,
    prev_interval_s: float | None = None,
) -> float:
    """Delay until the next visit using ``config.estimator``.

    ``"change_rate"``: 1 / rate once ``min_observations`` comparisons exist (no change seen yet
    -> ``max_interval_s``): the known-modification-time rate when ``min_observations`` dated visits
    exist and their conflicts are within ``max_lastmod_conflict_ratio`` (and ``use_lastmod``), the
    visit-history rate otherwise; before that, and for ``"doubling"``, the doubling rule applied to
    ``prev_interval_s`` and whether the last visit (at ``now``) saw a change.
    """
    _check_importance(importance)
    if not math.isfinite(now):
        raise ValueError("now must be finite")
    if config.estimator == "change_rate" and _lastmod_trusted(history, config):
        rate = lastmod_change_rate(history)
        if rate is not None:
            interval = config.max_interval_s if rate <= 0 else 1.0 / rate
            return scale_for_importance(_clamp(interval, config), importance, config)
    if config.estimator == "change_rate" and history.fetch_count - 1 >= config.min_observations:
        rate = change_rate(history)
        if rate is not None:
            interval = config.max_interval_s if rate <= 0 else 1.0 / rate
            return scale_for_importance(_clamp(interval, config), importance, config)
    changed = history.last_change is not None and history.last_change == history.last_fetch == now
    return next_interval(prev_interval_s, changed, importance, config)


def importance_from_depth(depth: int, seed_importance: float = 2.0, floor: float = 0.25) -> float:
    """A page's importance from its distance to a seed (links followed from a seed page): seeds count
    ``seed_importance`` and each hop lowers it, ``seed_importance / (1 + depth / 2)``, down to ``floor``:
    depth 0 → 2.0, 1 → 1.33, 2 → 1.0, 4 → 0.67, 14 and more → 0.25 (with the defaults). Seed distance is
    known for every URL without a link graph (in-link counts would need one), and pages near the seeds
    are the ones a crawl was started for."""
    if depth < 0:
        raise ValueError("depth must be >= 0")
    if not (math.isfinite(seed_importance) and seed_importance > 0 and 0 < floor <= seed_importance):
        raise ValueError("need 0 < floor <= seed_importance")
    return max(floor, seed_importance / (1.0 + depth / 2.0))


@dataclass(frozen=True)
class VisitPlan:
    """The next visit after one: its delay from this visit's start, and the history to persist."""

    delay_s: float
    history: ChangeHistory


def plan_visit(history: ChangeHistory, now: float, changed: bool, prev_delay_s: float | None, importance: float,
               config: RecrawlConfig = _DEFAULT, modified_at: float | None = None) -> VisitPlan:
    """The delay until the next visit after a visit at ``now`` (``changed``: the body differs from the
    last visit's; a 304 is unchanged). The first visit waits ``initial_interval_s``; later ones the
    configured estimator's interval (``"change_rate"``: Cho & Garcia-Molina once ``min_observations``
    visits are compared, the doubling rule before), divided by ``importance``. ``prev_delay_s`` is the
    delay the last visit used (importance-scaled): the doubling rule continues from it unscaled.
    ``modified_at``: the page's last modification time known at this visit (HTTP Last-Modified or a
    sitemap lastmod), for the known-modification-time estimator; None when unknown."""
    _check_importance(importance)
    after = history.record(now, changed and history.fetch_count > 0, modified_at)
    if history.fetch_count == 0:
        return VisitPlan(scale_for_importance(config.initial_interval_s, importance, config), after)
    prev_base = None if prev_delay_s is None else prev_delay_s * importance
    base = estimate_interval(after, now, config, 1.0, prev_base)
    return VisitPlan(scale_for_importance(base, importance, config), after)
