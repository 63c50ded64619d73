"""`pip install` of the project into a fresh venv, as a user would (with -c requirements.txt, so the pinned
versions are used; pip's cache keeps it quick), then its commands run from that venv: the declared
dependencies are enough, the console scripts exist, and the CQL migrations and JSON Schemas ship inside."""

from __future__ import annotations

import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md", "libs", "services", "tools", "schemas")

pytestmark = pytest.mark.packaging


def _run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the project installed from a copy of the checkout (pip builds in the source folder)."""
    base = tmp_path_factory.mktemp("pip-install")
    src = base / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        elif path.exists():
            shutil.copy2(path, src / name)
    env_dir = base / "venv"
    venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    py = env_dir / "bin" / "python"
    res = _run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-compile",
                "-c", str(ROOT / "requirements.txt"), str(src)], timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    shutil.rmtree(src)  # nothing below may read the copy: the venv must stand on its own
    return env_dir / "bin"


def test_streamcrawl_help(installed: Path) -> None:
    res = _run([str(installed / "streamcrawl"), "--help"])
    assert res.returncode == 0, res.stderr
    assert "service" in res.stdout and "version" in res.stdout
    res = _run([str(installed / "streamcrawl"), "version"])
    assert res.returncode == 0 and res.stdout.strip() == "streamcrawl 0.1.0", res.stdout + res.stderr
    assert _run([str(installed / "streamcrawl"), "no-such-command"]).returncode == 2


def test_service_help_from_the_installed_scripts(installed: Path) -> None:
    res = _run([str(installed / "streamcrawl-fetcher"), "--help"])
    assert res.returncode == 0, res.stderr
    assert "The fetcher: for each leased fetch request" in res.stdout and "STREAMCRAWL_KAFKA_BOOTSTRAP" in res.stdout
    res = _run([str(installed / "streamcrawl"), "service", "parser", "--help"])
    assert res.returncode == 0 and "usage: streamcrawl-parser" in res.stdout, res.stderr
    for name in ("frontier", "dedup", "recrawl", "control"):
        assert _run([str(installed / f"streamcrawl-{name}"), "--help"]).returncode == 0, name
    assert (installed / "streamcrawl-provision").exists()


def test_schemas_ship_inside_the_package(installed: Path) -> None:
    code = ("import streamcrawl_schemas as s, streamcrawl_runtime.provision as p, json; "
            "print(json.dumps([str(s.migrations_dir()), str(s.json_schemas_dir()), "
            "str(p.ProvisionSettings().migrations_dir)]))")
    res = _run([str(installed / "python"), "-c", code])
    assert res.returncode == 0, res.stderr
    import json

    cql, schemas, provision = (Path(p) for p in json.loads(res.stdout))
    assert "site-packages" in cql.parts and cql == provision
    assert sorted(p.name for p in cql.glob("*.cql")) == sorted(p.name for p in (ROOT / "schemas" / "cql").glob("*.cql"))
    assert sorted(p.name for p in schemas.glob("*.json")) == \
        sorted(p.name for p in (ROOT / "schemas" / "json").glob("*.json"))
    assert (cql / "0001_url_host_state.cql").read_bytes() == (ROOT / "schemas/cql/0001_url_host_state.cql").read_bytes()


def test_no_dependency_conflicts(installed: Path) -> None:
    res = _run([str(installed / "python"), "-m", "pip", "check"])
    assert res.returncode == 0, res.stdout + res.stderr


def test_runtime_dependencies_only(installed: Path) -> None:
    """The install pulls the declared runtime dependencies, not the test tools."""
    res = _run([str(installed / "python"), "-c", "import pytest"])
    assert res.returncode != 0 and "No module named 'pytest'" in res.stderr
