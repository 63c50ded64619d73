"""What the local stack's modules share: where things live (.stack/ or STREAMCRAWL_STACK_DIR), the engines'
ports, one-line failures that name the engine and its log, and running a logged command."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STACK = Path(os.environ.get("STREAMCRAWL_STACK_DIR", ROOT / ".stack"))
LOGS = STACK / "logs"
RUN = STACK / "run"
DATA = STACK / "data"
HERE = ROOT / "stack"

KAFKA_PORT = int(os.environ.get("STREAMCRAWL_KAFKA_PORT", "19092"))
KAFKA_CONTROLLER_PORT = int(os.environ.get("STREAMCRAWL_KAFKA_CONTROLLER_PORT", "19093"))
CASSANDRA_PORT = int(os.environ.get("STREAMCRAWL_CASSANDRA_PORT", "19042"))
CASSANDRA_STORAGE_PORT = int(os.environ.get("STREAMCRAWL_CASSANDRA_STORAGE_PORT", "17000"))
S3_PORT = int(os.environ.get("STREAMCRAWL_S3_PORT", "19000"))
#: "single" (one node of each engine) or "cluster" (three Kafka and three Cassandra nodes: stack_cluster).
PROFILE = os.environ.get("STREAMCRAWL_STACK_PROFILE", "single")
VERSITYGW_MODULE = "github.com/versity/versitygw/cmd/versitygw@v1.8.0"
S3_ACCESS, S3_SECRET = "streamcrawl", "streamcrawl-secret"

FETCH_TIMEOUT_S = 900
READY_TIMEOUT_S = {"kafka": 120, "cassandra": 240, "s3": 30}


class StackError(RuntimeError):
    """One-line, user-facing failure: names the engine and the log to read."""


def rel(path: Path) -> str:
    """A path relative to the repository when it lies inside it (shorter messages), else absolute."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def log_path(name: str) -> Path:
    return LOGS / f"{name}.log"


def fail(engine: str, what: str, log: Path | None = None) -> StackError:
    where = f" (see {rel(log)})" if log else ""
    return StackError(f"stack: {engine}: {what}{where}")


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def run_logged(engine: str, cmd: list[str], log: Path, env: dict[str, str] | None = None,
               timeout: float = FETCH_TIMEOUT_S, cwd: Path | None = None) -> None:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n".encode())
        fh.flush()
        try:
            proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, timeout=timeout, cwd=cwd)
        except subprocess.TimeoutExpired as exc:
            raise fail(engine, f"'{cmd[0]}' did not finish in {timeout:.0f}s (a registry that does not answer?)",
                       log) from exc
        except FileNotFoundError as exc:
            raise fail(engine, f"'{cmd[0]}' is not installed", log) from exc
    if proc.returncode != 0:
        raise fail(engine, f"'{' '.join(cmd[:3])} ...' failed with exit code {proc.returncode}", log)
