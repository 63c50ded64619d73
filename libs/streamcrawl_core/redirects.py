"""What to do with a redirect, pure: follow it, or stop at a loop, the hop limit or an unusable Location.

The fetcher never follows a page's redirect itself: each target goes back through normalization, the
seen-set and the host's own politeness queue as a URL of its own (dedup → frontier → fetcher). So that
the hop limit holds across that pipeline, every re-queued target carries its **redirect chain**: the
fingerprints of the URLs that redirected to it, first to last (UrlCandidates, UrlMessage, the frontier's
durable queue row, FetchRequest and FetchResult all carry it). Its length is the hop count.

Rules (``redirect_verdict``), for a URL reached by ``len(chain)`` hops that answers a redirect:

* a Location that does not normalize to an absolute http(s) URL (``ftp:``, ``javascript:``, ``data:``,
  ``file:``, a malformed one) → ``redirect_refused``; http ↔ https is an ordinary hop;
* the target is the URL itself or one of its chain → ``redirect_loop``;
* the URL was already reached by ``max_hops`` (5) hops → ``redirect_limit``: a chain is followed for
  at most 5 hops, so the sixth target is never requested;
* otherwise → ``redirect``: the target is queued with chain + [this URL].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.url_policy import UrlError
from streamcrawl_core.urls import normalize

__all__ = ["MAX_REDIRECT_HOPS", "RedirectVerdict", "redirect_verdict"]

#: A page's redirect chain is followed for at most this many hops (RFC 9110 leaves it to the client;
#: 5 is RFC 9309's figure for robots.txt, applied to pages too).
MAX_REDIRECT_HOPS = 5

RedirectOutcome = Literal["redirect", "redirect_loop", "redirect_limit", "redirect_refused"]


@dataclass(frozen=True)
class RedirectVerdict:
    outcome: RedirectOutcome
    target: str | None = None  # the normalized target (None when the Location is unusable)
    chain: tuple[int, ...] = ()  # the chain the target is queued with (outcome "redirect")
    reason: str | None = None


def redirect_verdict(url: str, url_fp: int, chain: Sequence[int], location: str,
                     max_hops: int = MAX_REDIRECT_HOPS) -> RedirectVerdict:
    """The verdict on ``url`` (fingerprint ``url_fp``, reached through ``chain``) redirecting to ``location``."""
    try:
        target = normalize(location, base=url)
    except UrlError as exc:
        return RedirectVerdict("redirect_refused", reason=f"unusable Location ({exc.reason}): {location[:200]}")
    target_fp = url_fingerprint(target)
    if target_fp == url_fp or target_fp in chain:
        return RedirectVerdict("redirect_loop", target, reason=f"redirect loop after {len(chain) + 1} hops")
    if len(chain) >= max_hops:
        return RedirectVerdict("redirect_limit", target, reason=f"more than {max_hops} redirects")
    return RedirectVerdict("redirect", target, (*chain, url_fp))
