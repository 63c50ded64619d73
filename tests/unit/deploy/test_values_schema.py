"""values.schema.json, enforced by the real helm: bad values fail `helm template` with a message that names
the value, and the same command without the bad value succeeds (so the refusal is the value's doing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.unit.deploy.helmrun import CHART, template

BAD_VALUES = {
    "wrong type": ("workers:\n  fetcher:\n    replicas: three\n",
                   "at '/workers/fetcher/replicas': got string, want integer"),
    "unknown service": ("workers:\n  fetchr:\n    replicas: 3\n",
                        "at '/workers': additional properties 'fetchr' not allowed"),
    "negative replicas": ("workers:\n  parser:\n    replicas: -1\n",
                          "at '/workers/parser/replicas': minimum: got -1, want 0"),
    "negative control replicas": ("control:\n  replicas: -2\n", "at '/control/replicas': minimum: got -2, want 0"),
    "zero partitions": ("partitions: 0\n", "at '/partitions': minimum: got 0, want 1"),
    "unknown top-level key": ("replicaCount: 3\n", "additional properties 'replicaCount' not allowed"),
    "port out of range": ("workers:\n  dedup:\n    metricsPort: 70000\n",
                          "at '/workers/dedup/metricsPort': maximum: got 70,000, want 65,535"),
    "bad log level": ("logLevel: verbose\n", "at '/logLevel'"),
    "chart-made S3 secret without keys": ("s3Credentials:\n  create: true\n",
                                          "at '/s3Credentials/accessKey': minLength: got 0, want 1"),
    "no S3 secret at all": ("s3Credentials:\n  existingSecret: ''\n",
                            "at '/s3Credentials/existingSecret': minLength: got 0, want 1"),
    "lower-case env name": ("workers:\n  fetcher:\n    env: {dns_server: system}\n",
                            "invalid propertyName 'dns_server'"),
}


def test_default_values_pass_the_schema() -> None:
    res = template()
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("case", sorted(BAD_VALUES))
def test_bad_values_are_refused_with_a_clear_message(case: str, tmp_path: Path) -> None:
    text, message = BAD_VALUES[case]
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    res = template(bad)
    assert res.returncode != 0, f"{case}: accepted"
    assert "values don't meet the specifications of the schema" in res.stderr, res.stderr
    assert message in res.stderr, res.stderr


def test_schema_lists_exactly_the_services_in_values() -> None:
    """Adding a service means one values entry and its name in the schema: the two lists stay equal."""
    import yaml

    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert set(schema["properties"]["workers"]["properties"]) == set(values["workers"])
    assert schema["properties"]["workers"]["additionalProperties"] is False
