"""Politeness delay, back-off and Retry-After parsing."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcrawl_core.politeness import (
    HostOverride,
    PolitenessConfig,
    backoff_delay,
    is_backoff_status,
    next_allowed_at,
    parse_retry_after,
    required_delay,
    should_back_off,
)

CFG = PolitenessConfig()


class TestRequiredDelay:
    def test_minimum_delay_for_fast_fetch(self) -> None:
        assert required_delay(0.01, None, CFG) == 1.0

    def test_ten_times_fetch_duration(self) -> None:
        assert required_delay(0.5, None, CFG) == pytest.approx(5.0)

    def test_crawl_delay_used_when_larger_and_capped(self) -> None:
        assert required_delay(0.1, 7.0, CFG) == 7.0
        assert required_delay(0.1, 500.0, CFG) == 30.0
        assert required_delay(4.0, 7.0, CFG) == pytest.approx(40.0)  # duration rule still wins

    def test_bad_crawl_delay_ignored(self) -> None:
        for bad in (-3.0, 0.0, math.nan, math.inf):
            assert required_delay(0.01, bad, CFG) == 1.0

    def test_override_allows_lower_and_higher_rates(self) -> None:
        fast = HostOverride(min_delay_s=0.2, delay_factor=1.0)
        assert required_delay(0.05, None, CFG, fast) == pytest.approx(0.2)
        slow = HostOverride(min_delay_s=10.0)
        assert required_delay(0.05, None, CFG, slow) == 10.0
        assert required_delay(2.0, None, CFG, HostOverride(delay_factor=2.0)) == pytest.approx(4.0)
        # robots.txt Crawl-delay still applies to an agreed rate
        assert required_delay(0.05, 3.0, CFG, fast) == 3.0

    def test_negative_duration_is_clock_skew(self) -> None:
        assert required_delay(-5.0, None, CFG) == 1.0

    def test_non_finite_duration_rejected(self) -> None:
        with pytest.raises(ValueError):
            required_delay(math.nan, None, CFG)
        with pytest.raises(ValueError):
            next_allowed_at(math.inf, 0.1, None, CFG)

    def test_next_allowed_at(self) -> None:
        assert next_allowed_at(100.0, 0.3, None, CFG) == pytest.approx(103.0)

    def test_config_validation(self) -> None:
        with pytest.raises(ValueError):
            PolitenessConfig(min_delay_s=-1)
        with pytest.raises(ValueError):
            PolitenessConfig(jitter=1.0)
        with pytest.raises(ValueError):
            HostOverride(min_delay_s=math.nan)
        with pytest.raises(ValueError):
            HostOverride(delay_factor=-1)

    @given(
        d=st.floats(-10, 1e6, allow_nan=False),
        cd=st.none() | st.floats(allow_nan=True),
    )
    def test_delay_never_below_min_nor_above_bounds(self, d: float, cd: float | None) -> None:
        delay = required_delay(d, cd, CFG)
        assert delay >= CFG.min_delay_s
        assert delay <= max(CFG.min_delay_s, CFG.delay_factor * max(d, 0), CFG.crawl_delay_cap_s)


class TestBackoff:
    def test_exponential_without_jitter_at_mid_rng(self) -> None:
        assert [backoff_delay(level, None, 0.5, CFG) for level in range(5)] == [0.0, 5.0, 10.0, 20.0, 40.0]

    def test_jitter_range(self) -> None:
        assert backoff_delay(1, None, 0.0, CFG) == pytest.approx(4.5)
        assert backoff_delay(1, None, 0.999999, CFG) == pytest.approx(5.5, rel=1e-5)

    def test_cap(self) -> None:
        assert backoff_delay(30, None, 0.9, CFG) == CFG.backoff_cap_s
        assert backoff_delay(10_000, None, 0.5, CFG) == CFG.backoff_cap_s

    def test_retry_after_is_lower_bound_capped(self) -> None:
        assert backoff_delay(1, 120.0, 0.5, CFG) == 120.0
        assert backoff_delay(0, 60.0, 0.5, CFG) == 60.0
        assert backoff_delay(4, 1.0, 0.5, CFG) == 40.0
        assert backoff_delay(1, 10 * 86400.0, 0.5, CFG) == CFG.backoff_cap_s
        assert backoff_delay(1, math.nan, 0.5, CFG) == 5.0

    def test_bad_inputs(self) -> None:
        with pytest.raises(ValueError):
            backoff_delay(1, None, 1.0, CFG)
        with pytest.raises(ValueError):
            backoff_delay(1, None, math.nan, CFG)
        with pytest.raises(ValueError):
            backoff_delay(-1, None, 0.5, CFG)

    @given(level=st.integers(0, 200), rng=st.floats(0, 1, exclude_max=True), ra=st.none() | st.floats())
    def test_monotone_in_level_at_fixed_rng(self, level: int, rng: float, ra: float | None) -> None:
        a = backoff_delay(level, ra, rng, CFG)
        b = backoff_delay(level + 1, ra, rng, CFG)
        assert 0 <= a <= b <= CFG.backoff_cap_s

    def test_statuses(self) -> None:
        assert is_backoff_status(429) and is_backoff_status(503)
        assert not is_backoff_status(500) and not is_backoff_status(None) and not is_backoff_status(200)
        assert should_back_off(None) and should_back_off(502) and should_back_off(503)
        assert not should_back_off(500) and not should_back_off(501)
        assert should_back_off(429)
        assert not should_back_off(200) and not should_back_off(404) and not should_back_off(301)


class TestRetryAfter:
    NOW = 1_445_412_480.0  # 2015-10-21 07:28:00 UTC

    def test_delta_seconds(self) -> None:
        assert parse_retry_after("120", self.NOW) == 120.0
        assert parse_retry_after("  0 ", self.NOW) == 0.0

    def test_http_date(self) -> None:
        assert parse_retry_after("Wed, 21 Oct 2015 07:30:00 GMT", self.NOW) == 120.0
        later = format_datetime(datetime.fromtimestamp(self.NOW + 3600, UTC), usegmt=True)
        assert parse_retry_after(later, self.NOW) == pytest.approx(3600.0)

    def test_past_date_is_zero(self) -> None:
        assert parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", self.NOW) == 0.0

    def test_zone_less_date_read_as_utc(self) -> None:
        assert parse_retry_after("Wed, 21 Oct 2015 07:30:00 -0000", self.NOW) == 120.0

    @pytest.mark.parametrize(
        "bad", [None, "", "soon", "-5", "1.5", "12abc", "Wed, 99 Foo 2015", "\u0661\u0662"]
    )
    def test_garbage_is_none(self, bad: str | None) -> None:
        assert parse_retry_after(bad, self.NOW) is None

    @given(st.text(max_size=40))
    def test_never_raises_and_reads_only_numbers_and_dates(self, header: str) -> None:
        result = parse_retry_after(header, self.NOW)
        if header.strip().isascii() and header.strip().isdigit():
            assert result == float(int(header.strip()))
        elif result is not None:  # anything else that parses must have been a date: it names a year
            assert result >= 0 and any(c.isdigit() for c in header)

    @given(st.integers(min_value=0, max_value=10**12))
    def test_any_delta_seconds(self, seconds: int) -> None:
        assert parse_retry_after(str(seconds), self.NOW) == float(seconds)

    @given(st.datetimes(min_value=datetime(1995, 1, 1), max_value=datetime(2099, 12, 31)))
    def test_every_imf_fixdate_is_read_exactly(self, when: datetime) -> None:
        when = when.replace(microsecond=0, tzinfo=UTC)
        header = format_datetime(when, usegmt=True)  # "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 §5.6.7)
        assert parse_retry_after(header, self.NOW) == max(0.0, when.timestamp() - self.NOW)
