"""The services' producers linger as StackSettings says (STREAMCRAWL_KAFKA_LINGER_MS, default 20 ms): the
setting reaches the producer the run loop builds, and other producers keep the factory's 5 ms."""

from __future__ import annotations

from typing import Any

import pytest
from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_runtime import kafka_loop
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.kafka_producer import host_keyed_config
from streamcrawl_runtime.settings import StackSettings


def test_the_setting_defaults_to_20_ms_and_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert StackSettings().kafka_linger_ms == 20 == LoopConfig("s", "g", {}, "b").linger_ms
    monkeypatch.setenv("STREAMCRAWL_KAFKA_LINGER_MS", "7")
    assert StackSettings().kafka_linger_ms == 7
    monkeypatch.setenv("STREAMCRAWL_KAFKA_LINGER_MS", "-1")
    with pytest.raises(ValueError):
        StackSettings()


def test_the_run_loop_builds_its_producer_with_the_configured_linger(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[dict[str, Any]] = []

    def fake_producer(bootstrap: str, **overrides: Any) -> object:
        built.append(host_keyed_config(bootstrap, **overrides))
        return object()

    monkeypatch.setattr(kafka_loop, "host_keyed_producer", fake_producer)
    loop = RunLoop(LoopConfig(service="t", group_id="g", subscriptions={"t": SeedMessage},
                              bootstrap="127.0.0.1:1", linger_ms=33), handler=None)  # type: ignore[arg-type]
    loop.consumer.close()
    assert built[0]["linger.ms"] == 33 and built[0]["bootstrap.servers"] == "127.0.0.1:1"
    assert host_keyed_config("127.0.0.1:1")["linger.ms"] == 5  # the control plane's and the tests' producers
