"""Bearer-token authentication of the control plane: every mutating endpoint needs
``Authorization: Bearer <token>``; read endpoints too unless reads are opened by a setting.

The token comes from STREAMCRAWL_CONTROL_API_TOKEN or the file named by STREAMCRAWL_CONTROL_API_TOKEN_FILE (a
mounted Secret). It is compared in constant time and never logged or echoed. With no token configured
every protected call is refused (401): the plane fails closed.
"""

from __future__ import annotations

import hmac
from pathlib import Path

from fastapi import HTTPException, Request

#: Why a call was refused; the same words whatever was wrong, so a probe learns nothing about the token.
UNAUTHORIZED = "missing or wrong API token: send 'Authorization: Bearer <token>'"
NOT_CONFIGURED = ("the control plane has no API token configured (set STREAMCRAWL_CONTROL_API_TOKEN or "
                  "STREAMCRAWL_CONTROL_API_TOKEN_FILE): protected calls are refused")


class TokenError(ValueError):
    """The token file cannot be read or is empty."""


def load_token(value: str | None, file: Path | None) -> str | None:
    """The configured token: the file's first line if a file is named, else the value (None: none set)."""
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise TokenError(f"cannot read the API token file {file}: {type(exc).__name__}") from exc
        if not text:
            raise TokenError(f"the API token file {file} is empty")
        return text.splitlines()[0].strip()
    return value or None


class BearerAuth:
    """A FastAPI dependency: ``Depends(auth.write)`` on mutating routes, ``Depends(auth.read)`` on reads."""

    def __init__(self, token: str | None, open_reads: bool = False) -> None:
        self._token = token.encode() if token else None
        self.open_reads = open_reads

    @property
    def configured(self) -> bool:
        return self._token is not None

    def check(self, request: Request) -> None:
        if self._token is None:
            raise HTTPException(401, NOT_CONFIGURED, headers={"WWW-Authenticate": "Bearer"})
        header = request.headers.get("authorization", "")
        scheme, _, presented = header.partition(" ")
        # compare_digest runs in time independent of where the strings differ (it does leak the length).
        ok = scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), self._token)
        if not ok:
            raise HTTPException(401, UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})

    def write(self, request: Request) -> None:
        self.check(request)

    def read(self, request: Request) -> None:
        if not self.open_reads:
            self.check(request)
