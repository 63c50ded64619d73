"""The shared politeness settings reach the core rule: every field, from its environment variable."""

from __future__ import annotations

import pytest
from streamcrawl_core.politeness import PolitenessConfig
from streamcrawl_runtime.settings import PolitenessSettings


def test_defaults_are_the_core_rule() -> None:
    cfg = PolitenessSettings().config()
    core = PolitenessConfig()
    assert (cfg.min_delay_s, cfg.delay_factor, cfg.backoff_base_s, cfg.backoff_cap_s) == (
        core.min_delay_s, core.delay_factor, core.backoff_base_s, core.backoff_cap_s) == (1.0, 10.0, 5.0, 3600.0)


def test_each_setting_is_read_from_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"MIN_DELAY_S": "2", "DELAY_FACTOR": "4", "CRAWL_DELAY_CAP_S": "9", "BACKOFF_BASE_S": "0.5",
                        "BACKOFF_CAP_S": "60"}.items():
        monkeypatch.setenv(f"STREAMCRAWL_{name}", value)
    cfg = PolitenessSettings().config()
    assert (cfg.min_delay_s, cfg.delay_factor, cfg.crawl_delay_cap_s, cfg.backoff_base_s, cfg.backoff_cap_s) == (
        2.0, 4.0, 9.0, 0.5, 60.0)


def test_a_back_off_base_of_zero_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMCRAWL_BACKOFF_BASE_S", "0")
    with pytest.raises(ValueError, match="backoff_base_s"):
        PolitenessSettings()
