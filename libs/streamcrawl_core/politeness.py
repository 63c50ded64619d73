"""Per-host politeness arithmetic: how long to wait before the next request to a host.

Rules (design write-ups, "The Politeness Rule"):

* delay = max(min_delay, delay_factor x last fetch duration, min(Crawl-delay, cap))
  -- Mercator's adaptive delay: a slow (probably loaded) server is hit less often.
* An agreed per-host rate (``HostOverride``) replaces ``min_delay``/``delay_factor`` for that host.
  It is the ONLY way to go below the global minimum; robots.txt Crawl-delay still applies.
* 429/503 and other server errors back the host off exponentially (``backoff_base * 2**(level-1)``)
  with +/- ``jitter`` and a cap; ``Retry-After`` is honoured as a lower bound, itself capped at
  ``backoff_cap_s`` so a hostile header cannot park a host forever.

Everything is pure: time (``now``) and randomness (``rng_value`` in [0, 1)) are passed in.
Bad numeric input (NaN, infinities, negative where meaningless) raises ``ValueError``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from email._parseaddr import mktime_tz, parsedate_tz

__all__ = [
    "HostOverride",
    "PolitenessConfig",
    "backoff_delay",
    "is_backoff_status",
    "next_allowed_at",
    "parse_retry_after",
    "required_delay",
    "should_back_off",
]

# 2**62 seconds is far beyond any cap; bounding the exponent keeps the float finite.
_MAX_BACKOFF_EXPONENT = 62


@dataclass(frozen=True)
class PolitenessConfig:
    min_delay_s: float = 1.0
    delay_factor: float = 10.0
    crawl_delay_cap_s: float = 30.0
    backoff_base_s: float = 5.0
    backoff_cap_s: float = 3600.0
    jitter: float = 0.1

    def __post_init__(self) -> None:
        for name in ("min_delay_s", "delay_factor", "crawl_delay_cap_s", "backoff_base_s", "backoff_cap_s"):
            _check_non_negative(name, getattr(self, name))
        if not 0.0 <= self.jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {self.jitter!r}")


@dataclass(frozen=True)
class HostOverride:
    """What an operator agreed with one host (the control plane's host_overrides row); ``None`` keeps the
    global value. The frontier applies the rate (``min_delay_s``, ``delay_factor``), dedup the page
    budget per crawl cycle; ``note`` and ``updated_at`` are for people."""

    min_delay_s: float | None = None
    delay_factor: float | None = None
    page_budget: int | None = None
    note: str | None = None
    updated_at: datetime | None = None

    @property
    def rate(self) -> tuple[float | None, float | None]:
        """The part of the override that changes politeness timing."""
        return self.min_delay_s, self.delay_factor

    def __post_init__(self) -> None:
        if self.min_delay_s is not None:
            _check_non_negative("min_delay_s", self.min_delay_s)
        if self.delay_factor is not None:
            _check_non_negative("delay_factor", self.delay_factor)


def _check_non_negative(name: str, value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def required_delay(
    fetch_duration_s: float,
    crawl_delay_s: float | None,
    config: PolitenessConfig,
    override: HostOverride | None = None,
) -> float:
    """Seconds to wait after a fetch from a host ends before the next one may start."""
    if not math.isfinite(fetch_duration_s):
        raise ValueError(f"fetch_duration_s must be finite, got {fetch_duration_s!r}")
    # A negative duration can only come from clock skew between fetcher and frontier: count it as 0.
    duration = max(0.0, fetch_duration_s)
    min_delay = config.min_delay_s
    factor = config.delay_factor
    if override is not None:
        if override.min_delay_s is not None:
            min_delay = override.min_delay_s
        if override.delay_factor is not None:
            factor = override.delay_factor
    delay = max(min_delay, factor * duration)
    # Crawl-delay is not in RFC 9309; we honour it but cap it so one robots.txt cannot stall us.
    if crawl_delay_s is not None and math.isfinite(crawl_delay_s) and crawl_delay_s > 0:
        delay = max(delay, min(crawl_delay_s, config.crawl_delay_cap_s))
    return delay


def next_allowed_at(
    fetch_end: float,
    fetch_duration_s: float,
    crawl_delay_s: float | None,
    config: PolitenessConfig,
    override: HostOverride | None = None,
) -> float:
    """Earliest epoch time the host may be contacted again after a fetch that ended at ``fetch_end``."""
    if not math.isfinite(fetch_end):
        raise ValueError(f"fetch_end must be finite, got {fetch_end!r}")
    return fetch_end + required_delay(fetch_duration_s, crawl_delay_s, config, override)


def backoff_delay(
    level: int, retry_after_s: float | None, rng_value: float, config: PolitenessConfig
) -> float:
    """Back-off after ``level`` consecutive overload/error answers (level 0 = not backing off).

    ``base * 2**(level-1)`` scaled by a jitter factor in [1 - jitter, 1 + jitter) drawn from
    ``rng_value``, capped at ``backoff_cap_s``. ``Retry-After`` is a lower bound (the server knows
    best when it will recover) but is capped too.
    """
    if not 0.0 <= rng_value < 1.0:
        raise ValueError(f"rng_value must be in [0, 1), got {rng_value!r}")
    if level < 0:
        raise ValueError(f"level must be >= 0, got {level!r}")
    delay = 0.0
    if level > 0:
        exponent = min(level - 1, _MAX_BACKOFF_EXPONENT)
        # Jitter spreads hosts that failed together (one outage) so they do not retry in lock-step.
        delay = config.backoff_base_s * (2.0**exponent) * (1.0 + config.jitter * (2.0 * rng_value - 1.0))
    if retry_after_s is not None and math.isfinite(retry_after_s) and retry_after_s > 0:
        delay = max(delay, retry_after_s)
    return min(delay, config.backoff_cap_s)


def parse_retry_after(header: str | None, now: float) -> float | None:
    """Seconds to wait from ``now`` per a ``Retry-After`` header (RFC 9110 §10.2.3).

    Accepts delta-seconds (``"120"``) and HTTP-date (``"Wed, 21 Oct 2015 07:28:00 GMT"``).
    A date in the past gives 0.0. Anything else (garbage, negative, empty) gives ``None``.
    """
    if header is None:
        return None
    value = header.strip()
    if not value:
        return None
    if value.isascii() and value.isdigit():
        return float(int(value))
    try:
        # email._parseaddr is the parser behind email.utils.parsedate_to_datetime, without email.utils'
        # import of socket (core modules load no I/O module). All three HTTP-date forms of RFC 9110
        # §5.6.7 parse; a zone-less or "-0000" date counts as UTC, as HTTP-dates are GMT.
        parts = parsedate_tz(value)
        if parts is None:
            return None
        when = mktime_tz(parts if parts[9] is not None else (*parts[:9], 0))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, float(when) - now)


def is_backoff_status(status: int | None) -> bool:
    """429 Too Many Requests and 503 Service Unavailable: the host explicitly says "slow down"."""
    return status in (429, 503)


def should_back_off(status: int | None) -> bool:
    """Whether a fetch result raises the host's back-off level.

    Explicit overload (429/503), gateway trouble (502/504) and ``None`` (timeout, connection
    refused, DNS failure) suggest a struggling host. A 500 or 501 is one page's error, not a sign of
    load: like 2xx/3xx/4xx it resets the level (backing a host off for its broken pages would starve
    its good ones for minutes).
    """
    if status is None:
        return True
    return is_backoff_status(status) or status in (502, 504)
