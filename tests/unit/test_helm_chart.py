"""Static checks of the Helm chart (helm itself is not installed here, so nothing is rendered):
Chart.yaml/values.yaml parse, every service has a Deployment template, every `.Values` path and every
included template exists, template actions balance, and the env names match the settings classes."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest
import yaml
from streamcrawl_contracts.topics import HOST_PARTITIONS
from streamcrawl_runtime.settings import StackSettings

CHART = Path(__file__).resolve().parents[2] / "helm" / "streamcrawl"
TEMPLATES = CHART / "templates"
SERVICES = {"frontier", "fetcher", "parser", "dedup", "recrawl", "control"}
WORKERS = SERVICES - {"control"}

_ACTION = re.compile(r"{{-?\s*(.*?)\s*-?}}", re.S)
_VALUES_PATH = re.compile(r"\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


def _values() -> dict:
    return yaml.safe_load((CHART / "values.yaml").read_text())


def _templates() -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(TEMPLATES.iterdir()) if p.is_file()}


def test_chart_yaml():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "streamcrawl" and chart["type"] == "application"
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart["version"])


def test_values_declare_every_service_with_a_template():
    values = _values()
    assert set(values["services"]) == SERVICES
    names = set(_templates())
    for name, svc in values["services"].items():
        assert f"deployment-{name}.yaml" in names, name
        assert isinstance(svc["replicas"], int) and svc["replicas"] >= 0
        assert svc["command"] == [f"streamcrawl-{name}"]
        assert {"requests", "limits"} <= set(svc["resources"])
    for name in WORKERS:
        svc = values["services"][name]
        assert isinstance(svc["metricsPort"], int) and svc["metricsPortEnv"].startswith("STREAMCRAWL_")
    assert "service-control.yaml" in names and "job-provision.yaml" in names and "NOTES.txt" in names


def test_frontier_replicas_within_host_partitions():
    assert _values()["services"]["frontier"]["replicas"] <= HOST_PARTITIONS
    text = _templates()["deployment-frontier.yaml"]
    assert f"gt (int .Values.services.frontier.replicas) {HOST_PARTITIONS}" in text and "fail" in text


def test_console_scripts_exist_for_every_service():
    pyproject = (CHART.parents[1] / "pyproject.toml").read_text()
    for name in SERVICES:
        assert f'streamcrawl-{name} = "streamcrawl_{name}.main:main"' in pyproject


@pytest.mark.parametrize("name", sorted(p.name for p in TEMPLATES.iterdir()))
def test_template_actions_balance(name):
    text = (TEMPLATES / name).read_text()
    assert text.count("{{") == text.count("}}"), "unbalanced {{ }}"
    depth = 0
    for action in _ACTION.findall(text):
        word = action.split()[0] if action.split() else ""
        if word in {"if", "range", "with", "define"}:
            depth += 1
        elif word == "end":
            depth -= 1
            assert depth >= 0, "{{ end }} without an opening block"
    assert depth == 0, "a block is not closed"


def test_every_values_path_exists():
    values = _values()
    for name, text in _templates().items():
        for path in _VALUES_PATH.findall(text):
            node = values
            for part in path.strip(".").split("."):
                assert isinstance(node, dict) and part in node, f"{name}: .Values{path} is not in values.yaml"
                node = node[part]


def test_every_included_template_is_defined():
    templates = _templates()
    defined = set(re.findall(r'define "([^"]+)"', templates["_helpers.tpl"]))
    for name, text in templates.items():
        for used in re.findall(r'include "([^"]+)"', text):
            assert used in defined, f"{name} includes undefined {used}"


def test_worker_helper_only_reads_keys_every_worker_has():
    helper = _templates()["_helpers.tpl"]
    used = set(re.findall(r"\$svc\.([A-Za-z_]+)", helper))
    assert used
    for name in WORKERS:
        assert used <= set(_values()["services"][name]), name


def test_static_yaml_documents_parse_with_actions_stubbed():
    """Templates whose only actions are inline values parse as YAML once each action is replaced."""
    for name in ("service-control.yaml", "configmap.yaml"):
        text = _templates()[name]
        lines = [ln for ln in text.splitlines() if not re.fullmatch(r"\s*{{-?.*-?}}\s*", ln)]
        doc = yaml.safe_load(_ACTION.sub("stub", "\n".join(lines)))
        assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"]


def _env_name(field: str) -> str:
    return f"STREAMCRAWL_{field.upper()}"


def test_configmap_and_secret_keys_are_stack_settings():
    stack_env = {_env_name(f) for f in StackSettings.model_fields}
    text = _templates()["configmap.yaml"]
    keys = set(re.findall(r"^\s+(STREAMCRAWL_[A-Z0-9_]+):", text, re.M))
    assert keys - {"STREAMCRAWL_LOG_LEVEL"} <= stack_env
    assert {"STREAMCRAWL_KAFKA_BOOTSTRAP", "STREAMCRAWL_CASSANDRA_HOSTS", "STREAMCRAWL_CASSANDRA_PORT",
            "STREAMCRAWL_S3_ENDPOINT", "STREAMCRAWL_S3_BUCKET"} <= keys
    helper = _templates()["_helpers.tpl"]
    assert {"STREAMCRAWL_S3_ACCESS_KEY", "STREAMCRAWL_S3_SECRET_KEY"} <= set(
        re.findall(r"name: (STREAMCRAWL_[A-Z0-9_]+)", helper)) <= stack_env


def test_control_env_matches_control_settings():
    from streamcrawl_control.settings import ControlSettings

    fields = {_env_name(f) for f in ControlSettings.model_fields}
    text = _templates()["deployment-control.yaml"]
    assert set(re.findall(r"name: (STREAMCRAWL_[A-Z0-9_]+)", text)) <= fields
    assert "path: /healthz" in text


@pytest.mark.parametrize("name", sorted(WORKERS))
def test_worker_metrics_env_is_a_settings_field(name):
    """The env var the chart sets to open the metrics port must be a field of the service's settings."""
    module = importlib.import_module(f"streamcrawl_{name}.settings")
    classes = [c for c in vars(module).values()
               if isinstance(c, type) and issubclass(c, StackSettings) and c is not StackSettings]
    assert classes, f"no settings class in streamcrawl_{name}.settings"
    fields = {_env_name(f) for c in classes for f in c.model_fields}
    svc = _values()["services"][name]
    assert svc["metricsPortEnv"] in fields
    for key in svc["env"]:
        assert key in fields, f"{name}: {key} is not a settings field"
