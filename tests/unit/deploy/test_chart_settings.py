"""Every environment variable the chart sets is a setting some service reads.

The chart is written for issue 9's per-service prefixes (STREAMCRAWL_<SERVICE>_*) and the shared
STREAMCRAWL_PARTITIONS (StackSettings.partitions). Until a service's settings class uses its own prefix,
its case is an expected failure (xfail, not strict), and it turns into a real check the moment the code
lands."""

from __future__ import annotations

import importlib

import pytest
from pydantic_settings import BaseSettings
from streamcrawl_runtime.settings import env_rows

from tests.unit.deploy.helmrun import env_of, full, one, render

SERVICES = ("frontier", "fetcher", "parser", "dedup", "recrawl", "warc", "control")
SECRETS = {"STREAMCRAWL_S3_ACCESS_KEY", "STREAMCRAWL_S3_SECRET_KEY"}


def _settings_classes(service: str) -> list[type[BaseSettings]]:
    module = importlib.import_module(f"streamcrawl_{service}.settings")
    return [c for c in vars(module).values()
            if isinstance(c, type) and issubclass(c, BaseSettings) and c.__module__ == module.__name__]


def _env_names(cls: type[BaseSettings]) -> set[str]:
    return {env for env, _ in env_rows(cls)}  # nested settings (stack, politeness) keep their own prefix


def _per_service_prefix(service: str) -> bool:
    return any(str(c.model_config.get("env_prefix", "")).upper().startswith(f"STREAMCRAWL_{service.upper()}_")
               for c in _settings_classes(service))


@pytest.fixture(scope="module")
def docs():
    return render()


@pytest.mark.parametrize("service", SERVICES)
def test_service_env_is_read_by_its_settings(service: str, docs, request: pytest.FixtureRequest) -> None:
    if not _per_service_prefix(service):
        request.applymarker(pytest.mark.xfail(reason=f"streamcrawl_{service} settings do not use the "
                                                     f"STREAMCRAWL_{service.upper()}_ prefix yet (issue 9)"))
    classes = _settings_classes(service)
    assert classes, f"no settings class in streamcrawl_{service}.settings"
    known = set().union(*(_env_names(c) for c in classes))
    own = {k for k in env_of(one(docs, "Deployment", full(service))) if k.startswith(f"STREAMCRAWL_{service.upper()}_")}
    own -= {"STREAMCRAWL_CONTROL_API_TOKEN"}  # issue 13's setting
    assert own, service
    assert own <= known, f"{service}: the chart sets {sorted(own - known)}, which its settings do not read"


def test_shared_settings_are_read_by_the_services(docs) -> None:
    shared = set(one(docs, "ConfigMap", full("shared"))["data"]) | SECRETS
    known = set().union(*(_env_names(c) for s in SERVICES for c in _settings_classes(s)))
    assert "STREAMCRAWL_PARTITIONS" in shared
    assert shared <= known, f"read by no service: {sorted(shared - known)}"
