"""Runs the real helm binary (built by `make helm`, path in STREAMCRAWL_HELM) on the chart, and loads what
it renders. No mocks: every chart test goes through helm's own template engine and values schema."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "helm" / "streamcrawl"
PRODUCTION = CHART / "values-production.yaml"
#: The Kubernetes version the manifests are rendered for and validated against (kubernetes-validate's
#: bundled schemas; requirements-dev.txt pins the package).
KUBE_VERSION = "1.37.0"
RELEASE, NAMESPACE = "crawl", "crawl"


def helm_binary() -> str:
    path = os.environ.get("STREAMCRAWL_HELM", "")
    if not path or not os.access(path, os.X_OK):
        pytest.fail(f"no helm binary at STREAMCRAWL_HELM={path!r}: run the tests through make (`make helm-check`)")
    return path


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def docs(self) -> list[dict[str, Any]]:
        return [d for d in yaml.safe_load_all(self.stdout) if d]


def helm(*args: str) -> Result:
    proc = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=120, check=False)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def template(*values_files: Path, sets: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> Result:
    args = ["template", RELEASE, str(CHART), "-n", NAMESPACE, "--kube-version", KUBE_VERSION, *extra]
    for f in values_files:
        args += ["-f", str(f)]
    for s in sets:
        args += ["--set", s]
    return helm(*args)


def render(*values_files: Path, sets: tuple[str, ...] = (), extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Render and return the manifests; a failed render fails the test with helm's message."""
    res = template(*values_files, sets=sets, extra=extra)
    assert res.returncode == 0, res.stderr
    return res.docs


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def values(path: Path = CHART / "values.yaml") -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def container(doc: dict[str, Any]) -> dict[str, Any]:
    containers = doc["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    c: dict[str, Any] = containers[0]
    return c


def env_of(doc: dict[str, Any]) -> dict[str, Any]:
    """A container's env as name -> value (a string) or valueFrom (a dict)."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(doc).get("env", [])}


def full(name: str) -> str:
    return f"{RELEASE}-streamcrawl-{name}"
