"""Fetching the engines once, cached under the stack dir: Kafka's and Cassandra's jars with Maven (from the
POMs in stack/<engine>/), the versitygw S3 gateway with `go install`. A corrupt jar is removed and
reported; a changed POM or module version fetches again."""

from __future__ import annotations

import hashlib
import os
import shutil
import zipfile
from pathlib import Path

from stack_common import HERE, STACK, VERSITYGW_MODULE, fail, log_path, run_logged


def _stamp(*paths: Path, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _check_jars(engine: str, lib: Path, log: Path) -> None:
    jars = list(lib.glob("*.jar"))
    if not jars:
        raise fail(engine, f"no jars in {lib}", log)
    for jar in jars:
        try:
            with zipfile.ZipFile(jar) as zf:
                zf.getinfo("META-INF/MANIFEST.MF") if "META-INF/MANIFEST.MF" in zf.namelist() else None
        except (zipfile.BadZipFile, OSError) as exc:
            jar.unlink(missing_ok=True)
            raise fail(engine, f"corrupt download {jar.name} (removed; run again to re-fetch)", log) from exc


def fetch_maven(engine: str) -> Path:
    """Gather the engine's runtime jars with Maven (from the POM in stack/<engine>/)."""
    pom = HERE / engine / "pom.xml"
    lib = STACK / engine / "lib"
    stamp_file = STACK / engine / ".fetched"
    stamp = _stamp(pom)
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return lib
    log = log_path(f"{engine}-fetch")
    shutil.rmtree(lib, ignore_errors=True)
    lib.mkdir(parents=True)
    run_logged(engine, ["mvn", "-B", "-q", "--strict-checksums", "-f", str(pom), "dependency:copy-dependencies",
                        f"-DoutputDirectory={lib}", "-DincludeScope=runtime"], log)
    _check_jars(engine, lib, log)
    stamp_file.write_text(stamp)
    return lib


def fetch_versitygw() -> Path:
    """Build the versitygw S3 gateway (Apache-2.0) with `go install`, into .stack/bin."""
    binary = STACK / "bin" / "versitygw"
    stamp_file = STACK / "bin" / ".versitygw"
    if binary.exists() and stamp_file.exists() and stamp_file.read_text() == VERSITYGW_MODULE:
        return binary
    log = log_path("s3-fetch")
    env = dict(os.environ, GOBIN=str(binary.parent), GOFLAGS="-buildvcs=false")
    binary.parent.mkdir(parents=True, exist_ok=True)
    run_logged("s3", ["go", "install", VERSITYGW_MODULE], log, env=env)
    run_logged("s3", [str(binary), "--version"], log, timeout=30)
    stamp_file.write_text(VERSITYGW_MODULE)
    return binary
