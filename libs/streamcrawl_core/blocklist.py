"""The blocklist: which hosts the crawler must not touch, one rule for every service (the control plane
refuses blocked seeds, dedup drops blocked URLs).

A pattern is one of:
- an exact host, ``example.com``: that host only;
- a suffix with a leading dot, ``.example.com``: example.com itself and every subdomain;
- a glob with ``*`` (any run of characters, dots included) and ``?`` (one character), e.g.
  ``*.ads.example.net`` or ``tracker-??.example.org``: matched against the whole host.

Patterns are kept in the canonical spelling the crawler uses for hosts (lowercase, IDN as punycode,
no trailing dot): `canonical_pattern` turns user input into that form or raises `InvalidHost`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from streamcrawl_core.identity import host_identity
from streamcrawl_core.urls import UrlError

_FORBIDDEN = frozenset("/?#@\\ \t\r\n%")
_GLOB_OK = re.compile(r"^[a-z0-9.*?_-]+$")


class InvalidHost(ValueError):
    """Not a host name (or pattern) the crawler could crawl (or match)."""


def canonical_host(raw: str) -> str:
    """The canonical spelling of a host as the crawler keys it (see ``partition.host_key``).

    Accepts a bare host name, an IPv4 address or a bracketed IPv6 literal; no port, path or userinfo.
    Raises ``InvalidHost`` with a short reason.
    """
    text = raw.strip()
    if not text:
        raise InvalidHost("empty host")
    if any(c in _FORBIDDEN for c in text):
        raise InvalidHost("a host must not contain '/', '?', '#', '@', '%', '\\' or whitespace")
    if ":" in text and not (text.startswith("[") and text.endswith("]")):
        raise InvalidHost("a host must not carry a port")
    try:
        return host_identity(f"http://{text}/")[1]
    except (UrlError, ValueError) as exc:
        raise InvalidHost(f"invalid host: {exc}") from exc


def canonical_pattern(raw: str) -> str:
    """The canonical form of a blocklist pattern (see the module docstring). Raises ``InvalidHost``."""
    text = raw.strip()
    if "*" in text or "?" in text:
        glob = text.lower().rstrip(".")
        if not _GLOB_OK.match(glob):
            raise InvalidHost("a glob pattern may hold letters, digits, '.', '-', '_', '*' and '?' only "
                              "(write an IDN label in punycode)")
        if glob.strip("*?.") == "":
            raise InvalidHost("a glob pattern must name at least one character of the host")
        return glob
    if text.startswith("."):
        suffix = text[1:]
        if suffix.startswith(".") or not suffix:
            raise InvalidHost("a suffix pattern is one leading dot and a host, like .example.com")
        return "." + canonical_host(suffix)
    return canonical_host(text)


def _glob_regex(pattern: str) -> re.Pattern[str]:
    parts = (".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile("".join(parts) + r"\Z")


class Blocklist:
    """Patterns compiled for matching. Exact hosts are one set lookup; a suffix pattern costs one
    lookup per label of the host; globs are tried in order."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.patterns: list[str] = []
        self._exact: dict[str, str] = {}
        self._suffixes: dict[str, str] = {}  # "example.com" → ".example.com"
        self._globs: list[tuple[re.Pattern[str], str]] = []
        for raw in patterns:
            pattern = raw.strip().lower()
            if not pattern:
                continue
            self.patterns.append(pattern)
            if "*" in pattern or "?" in pattern:
                self._globs.append((_glob_regex(pattern), pattern))
            elif pattern.startswith("."):
                self._suffixes.setdefault(pattern[1:], pattern)
            else:
                self._exact.setdefault(pattern, pattern)

    def __len__(self) -> int:
        return len(self.patterns)

    def blocked_by(self, host: str) -> str | None:
        """The pattern that blocks the canonical ``host``, or None. An exact match wins over a suffix,
        a suffix over a glob."""
        hit = self._exact.get(host)
        if hit is not None:
            return hit
        if self._suffixes:
            name = host
            while True:
                hit = self._suffixes.get(name)
                if hit is not None:
                    return hit
                dot = name.find(".")
                if dot < 0:
                    break
                name = name[dot + 1:]
        for regex, pattern in self._globs:
            if regex.match(host):
                return pattern
        return None

    def __contains__(self, host: str) -> bool:
        return self.blocked_by(host) is not None
