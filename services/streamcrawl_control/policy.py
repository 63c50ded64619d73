"""Pure rules of the control plane: canonical host names, blocklist patterns and matching.

A blocklist pattern is either an exact host (``example.com``: that host only) or a host suffix with a
leading dot (``.example.com``: example.com itself and every subdomain). Patterns are stored in the
canonical spelling the crawler uses for hosts (lowercase, IDN as punycode, no trailing dot).
"""

from __future__ import annotations

from collections.abc import Iterable

from streamcrawl_core.partition import host_key
from streamcrawl_core.urls import UrlError, host_of, normalize

_FORBIDDEN = frozenset("/?#@\\ \t\r\n%")


class InvalidHost(ValueError):
    """Not a host name the crawler could crawl."""


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
        return host_key(host_of(normalize(f"http://{text}/")))
    except (UrlError, ValueError) as exc:
        raise InvalidHost(f"invalid host: {exc}") from exc


def canonical_pattern(raw: str) -> str:
    """Canonical blocklist pattern: ``.suffix`` or an exact host. Raises ``InvalidHost``."""
    text = raw.strip()
    if text.startswith("."):
        suffix = text[1:]
        if suffix.startswith(".") or not suffix:
            raise InvalidHost("a suffix pattern is one leading dot and a host, like .example.com")
        return "." + canonical_host(suffix)
    return canonical_host(text)


def blocked_by(host: str, patterns: Iterable[str]) -> str | None:
    """The first pattern (canonical) that blocks the canonical ``host``, or None."""
    for pattern in patterns:
        if pattern.startswith("."):
            if host == pattern[1:] or host.endswith(pattern):
                return pattern
        elif host == pattern:
            return pattern
    return None
