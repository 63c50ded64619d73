"""docker-compose.yml against the Compose Specification's JSON schema, offline: the schema vendored by the
pinned check-jsonschema package (compose is never run here: no Docker engine)."""

from __future__ import annotations

import copy
import json
from importlib.resources import files
from typing import Any

import jsonschema
import pytest
import yaml

from tests.unit.deploy.helmrun import ROOT

SHARED = {"STREAMCRAWL_KAFKA_BOOTSTRAP", "STREAMCRAWL_CASSANDRA_HOSTS", "STREAMCRAWL_CASSANDRA_PORT",
          "STREAMCRAWL_CASSANDRA_KEYSPACE", "STREAMCRAWL_CASSANDRA_REPLICATION", "STREAMCRAWL_S3_ENDPOINT",
          "STREAMCRAWL_S3_BUCKET", "STREAMCRAWL_S3_ACCESS_KEY", "STREAMCRAWL_S3_SECRET_KEY", "STREAMCRAWL_PARTITIONS",
          "STREAMCRAWL_MIN_DELAY_S", "STREAMCRAWL_DELAY_FACTOR"}
SERVICES = ("frontier", "fetcher", "parser", "dedup", "recrawl", "warc", "control")


def _schema() -> dict[str, Any]:
    text = (files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json").read_text()
    schema: dict[str, Any] = json.loads(text)
    assert schema["title"] == "Compose Specification"
    return schema


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return loaded


def _validator() -> jsonschema.protocols.Validator:
    schema = _schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_compose_file_matches_the_compose_specification() -> None:
    errors = sorted(_validator().iter_errors(_compose()), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)


@pytest.mark.parametrize("breakage", ["unknown key", "wrong type", "bad depends_on"])
def test_the_schema_catches_a_broken_compose_file(breakage: str) -> None:
    broken = copy.deepcopy(_compose())
    svc = broken["services"]["fetcher"]
    if breakage == "unknown key":
        svc["commandd"] = ["x"]
    elif breakage == "wrong type":
        svc["read_only"] = {"yes": 1}
    else:
        broken["services"]["provision"]["depends_on"] = 5
    assert list(_validator().iter_errors(broken))


def test_compose_uses_the_per_service_setting_names() -> None:
    services = _compose()["services"]
    for name in SERVICES:
        env = services[name]["environment"]
        assert set(env) >= SHARED, name
        own = {k for k in env if k.startswith("STREAMCRAWL_")} - SHARED
        assert own and all(k.startswith(f"STREAMCRAWL_{name.upper()}_") for k in own), (name, own)
        assert services[name]["read_only"] is True and services[name]["tmpfs"] == ["/tmp"]
    assert services["control"]["environment"]["STREAMCRAWL_CONTROL_LISTEN_PORT"] == "8080"
