"""The control-plane client of the `streamcrawl` commands: where the API is, the bearer token, and one
exit code per kind of failure, so that a script can tell them apart.

Where: ``--url``, else STREAMCRAWL_CONTROL_URL, else http://127.0.0.1:8080 (the local `streamcrawl run`).
Token: ``--token-file``, else STREAMCRAWL_CONTROL_API_TOKEN, else STREAMCRAWL_CONTROL_API_TOKEN_FILE, else
``run/control.token`` (written by `streamcrawl run`) when it exists.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"
LOCAL_TOKEN = Path("run") / "control.token"

# Exit codes (also in `streamcrawl --help`).
OK = 0
FAILED = 1          # the server failed or an engine behind it is down (5xx)
USAGE = 2           # bad arguments, or the API refused the input (4xx other than below)
PARTIAL = 3         # some of the input was rejected (e.g. some seeds)
UNAUTHORIZED = 4    # missing or wrong token (401)
UNREACHABLE = 5     # no control plane at the URL
NOT_FOUND = 6       # no such host / pattern (404)

EXIT_CODES = """exit codes: 0 ok, 1 server or engine failure, 2 usage error or input refused, 3 part of the input
rejected, 4 missing or wrong API token, 5 control plane unreachable, 6 not found"""


class ApiError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=None,
                        help=f"control-plane URL (default: $STREAMCRAWL_CONTROL_URL or {DEFAULT_URL})")
    parser.add_argument("--token-file", type=Path, default=None,
                        help="file holding the API token (default: $STREAMCRAWL_CONTROL_API_TOKEN, "
                             f"$STREAMCRAWL_CONTROL_API_TOKEN_FILE, or {LOCAL_TOKEN} if present)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON answer as is")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for an answer (default 30)")


def _token(args: argparse.Namespace) -> str | None:
    env = os.environ
    file: Path | None = args.token_file
    if file is None and env.get("STREAMCRAWL_CONTROL_API_TOKEN"):
        return env["STREAMCRAWL_CONTROL_API_TOKEN"].strip()
    if file is None and env.get("STREAMCRAWL_CONTROL_API_TOKEN_FILE"):
        file = Path(env["STREAMCRAWL_CONTROL_API_TOKEN_FILE"])
    if file is None and LOCAL_TOKEN.exists():
        file = LOCAL_TOKEN
    if file is None:
        return None
    try:
        return file.read_text(encoding="utf-8").strip().splitlines()[0].strip()
    except (OSError, UnicodeDecodeError, IndexError) as exc:
        raise ApiError(USAGE, f"cannot read the token file {file}: {type(exc).__name__}") from exc


class Client:
    def __init__(self, args: argparse.Namespace) -> None:
        self.base = (args.url or os.environ.get("STREAMCRAWL_CONTROL_URL") or DEFAULT_URL).rstrip("/")
        token = _token(args)
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.http = httpx.Client(base_url=self.base, headers=headers, timeout=args.timeout, trust_env=False)

    def call(self, method: str, path: str, body: Any = None, ok_statuses: tuple[int, ...] = ()) -> Any:
        """The JSON answer of a 2xx (or of a status in ``ok_statuses``); ApiError with the exit code else."""
        try:
            r = self.http.request(method, f"/v1{path}", json=body)
        except httpx.TransportError as exc:
            raise ApiError(UNREACHABLE, f"no control plane at {self.base}: {exc}") from exc
        data: Any = None
        if r.content:
            try:
                data = r.json()
            except ValueError:
                data = {"detail": r.text[:300]}
        if r.is_success or r.status_code in ok_statuses:
            return data
        detail = data.get("detail") if isinstance(data, dict) else None
        message = f"{r.status_code}: {detail or r.reason_phrase}"
        if r.status_code == 401:
            raise ApiError(UNAUTHORIZED, message)
        if r.status_code == 404:
            raise ApiError(NOT_FOUND, message)
        raise ApiError(FAILED if r.status_code >= 500 else USAGE, message)

    def close(self) -> None:
        self.http.close()


def run_call(args: argparse.Namespace, work: Any) -> int:
    """Run ``work(client)`` (returns an exit code), turning ApiError into its message and code."""
    try:
        client = Client(args)
    except ApiError as exc:
        print(f"streamcrawl: {exc}", file=sys.stderr)
        return exc.code
    try:
        return int(work(client))
    except ApiError as exc:
        print(f"streamcrawl: {exc}", file=sys.stderr)
        return exc.code
    finally:
        client.close()


def dump(data: Any) -> None:
    print(json.dumps(data, indent=2, sort_keys=True))
