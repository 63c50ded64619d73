"""A URL's identity as every service computes it: the normalized URL, the host key it is partitioned
by, and its 64-bit fingerprint. One function, so a seed, an out-link and a redirect target of the same
page always agree on all three."""

from __future__ import annotations

from typing import NamedTuple

from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.partition import host_key
from streamcrawl_core.urls import DEFAULT_CONFIG, NormalizerConfig, host_of, normalize


class UrlIdentity(NamedTuple):
    url: str  # normalized (streamcrawl_core.urls.normalize)
    host: str  # the Kafka key and Cassandra partition of everything about this URL's host
    fingerprint: int  # unsigned 64-bit (streamcrawl_core.fingerprint.url_fingerprint)


def url_identity(raw: str, base: str | None = None, config: NormalizerConfig = DEFAULT_CONFIG) -> UrlIdentity:
    """Normalize ``raw`` (resolved against ``base`` if given) and derive its host key and fingerprint.
    Raises ``streamcrawl_core.urls.UrlError`` (a ValueError) with a reason for a URL that cannot be
    crawled."""
    url = normalize(raw, base, config)
    return UrlIdentity(url, host_key(host_of(url)), url_fingerprint(url))


def host_identity(raw: str, base: str | None = None) -> tuple[str, str]:
    """The normalized URL and its host key, without the fingerprint (for callers that route only)."""
    url = normalize(raw, base)
    return url, host_key(host_of(url))
