"""Offline vulnerability check of the installed Python distributions against a local copy of the PyPA
advisory database (https://github.com/pypa/advisory-database, OSV YAML under vulns/<package>/).

Why: `make audit` runs pip-audit, which asks a vulnerability service (PyPI's JSON API or OSV) about each
pinned version. Where neither answers (this workplace's registry serves only the simple index, and OSV
does not resolve), this script applies the same OSV records from a checkout of the database instead.
It reads every distribution installed in the running interpreter (the pins and what they pulled in).

    python tools/audit/offline_audit.py /path/to/advisory-database    # exit 1 when something matches
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import sys
from pathlib import Path
from typing import Any

import yaml
from packaging.version import InvalidVersion, Version


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _affected(version: Version, entry: dict[str, Any], name: str) -> bool:
    for aff in entry.get("affected", []):
        pkg = aff.get("package", {})
        if pkg.get("ecosystem") != "PyPI" or _norm(pkg.get("name", "")) != name:
            continue
        if str(version) in {str(v) for v in aff.get("versions", [])}:
            return True
        for rng in aff.get("ranges", []):
            if rng.get("type") != "ECOSYSTEM":
                continue
            introduced: Version | None = None
            for event in rng.get("events", []):
                try:
                    if "introduced" in event:
                        introduced = Version("0" if event["introduced"] == "0" else event["introduced"])
                    elif "fixed" in event and introduced is not None:
                        if introduced <= version < Version(event["fixed"]):
                            return True
                        introduced = None
                    elif "last_affected" in event and introduced is not None:
                        if introduced <= version <= Version(event["last_affected"]):
                            return True
                        introduced = None
                except InvalidVersion:
                    continue
            if introduced is not None and version >= introduced:
                return True  # introduced and never fixed
    return False


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("database", type=Path, help="a checkout of pypa/advisory-database")
    args = ap.parse_args(argv)
    vulns = args.database / "vulns"
    if not vulns.is_dir():
        print(f"offline audit: {vulns} is not a directory", file=sys.stderr)
        return 2
    folders = {_norm(p.name): p for p in vulns.iterdir() if p.is_dir()}
    found: list[str] = []
    checked = 0
    for dist in sorted(importlib.metadata.distributions(), key=lambda d: _norm(d.metadata["Name"] or "")):
        name = _norm(dist.metadata["Name"] or "")
        try:
            version = Version(dist.version)
        except InvalidVersion:
            continue
        checked += 1
        for path in sorted(folders[name].glob("*.yaml")) if name in folders else []:
            entry = yaml.safe_load(path.read_text(encoding="utf-8"))
            if entry.get("withdrawn"):
                continue
            if _affected(version, entry, name):
                aliases = ", ".join(entry.get("aliases", []))
                found.append(f"{name}=={version}: {entry.get('id')} ({aliases}) {entry.get('summary', '')}".strip())
    for line in found:
        print(line)
    print(f"offline audit: {checked} distributions checked against {len(folders)} packages of {args.database}: "
          f"{len(found)} known vulnerabilities")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
