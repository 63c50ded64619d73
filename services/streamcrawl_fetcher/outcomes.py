"""What a fetch outcome means beyond the fetch result: the URL's url_state status (for outcomes that leave
nothing to parse, written by the fetcher with its fetched mark) and a redirect's target as a candidate URL
of its own host. Dedup used to derive both from every fetch result; the fetcher has them at hand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamcrawl_contracts.messages import FetchRequest, FetchResult, UrlCandidates
from streamcrawl_contracts.topics import URL_CANDIDATES
from streamcrawl_core.identity import url_identity
from streamcrawl_core.urls import UrlError
from streamcrawl_runtime.ports.loop import Output
from streamcrawl_runtime.ports.state import FetcherState

from streamcrawl_fetcher.ports import DnsError

#: url_state status of each outcome that leaves nothing to parse ("error" for any other such outcome). A
#: fetched page's row is dedup's, from the parsed page; robots.txt, probe, expired and interrupted requests
#: fetched nothing of the URL, and write none.
URL_STATUS = {"not_modified": "fetched", "redirect": "redirected", "redirect_loop": "redirect_loop",
              "redirect_limit": "redirect_limit", "redirect_refused": "redirect_refused",
              "robots_disallowed": "disallowed", "robots_unavailable": "disallowed", "soft_404": "soft404",
              "blocked_address": "blocked"}
NO_URL_STATUS = frozenset({"fetched", "robots_fetched", "probe_fetched", "soft404_suspect", "lease_expired",
                           "interrupted"})


def url_status(outcome: str) -> str | None:
    """The url_state status to record for ``outcome``, or None when there is none to record here."""
    return None if outcome in NO_URL_STATUS else URL_STATUS.get(outcome, "error")


#: Statuses of a URL whose body was taken in (dedup's): a 304 leaves them as they are.
BODY_STATUSES = frozenset({"fetched", "noindex", "duplicate", "sitemap"})


def kept_status(prev: str | None) -> str:
    """A 304's url_state status, given the URL's last one: unchanged for a page dedup recorded (noindex,
    duplicate, sitemap, fetched), else "fetched"."""
    return prev if prev in BODY_STATUSES else "fetched"


#: The most of a URL the host view's outcome row keeps: that row goes out in one batch with the lease mark,
#: and Cassandra refuses a batch over 50 KiB, so a bogus 64 KB URL (a hostile-corpus case) would make the
#: write fail and the request be handled again as a possible replay.
SHOWN_URL_CHARS = 2048


def shown_url(url: str) -> str:
    """``url`` as the host view lists it: cut to SHOWN_URL_CHARS, marked with "…" when cut."""
    return url if len(url) <= SHOWN_URL_CHARS else url[:SHOWN_URL_CHARS - 1] + "…"


def redirect_candidate(res: FetchResult) -> list[Output]:
    """The redirect's target as a candidate for its own host's seen-set (a URL of its own: it goes
    through dedup and the frontier like any link), depth unchanged, its redirect chain grown by this URL
    (streamcrawl_core.redirects: the hop limit and the loop check hold wherever it is fetched)."""
    assert res.redirect_to is not None
    try:
        url, host, fp = url_identity(res.redirect_to)
    except UrlError:
        return []
    return [Output(URL_CANDIDATES, host, UrlCandidates(host=host, depth=res.depth, source_url=res.url, urls=[url],
                                                       url_fps=[fp], redirect_chain=[*res.redirect_chain, res.url_fp]))]


def dns_failure(result: Callable[..., FetchResult], exc: DnsError, **fields: Any) -> FetchResult:
    """NXDOMAIN, NODATA and SERVFAIL are answers: dns_error, the URL is done for the cycle. No answer (a
    timeout) says nothing about the name: network_error, which the frontier retries with the host backed
    off; as a dns_error the URL would be dropped for the cycle (seen after a fetcher restart, when a burst
    of cold lookups timed out). SERVFAIL is final because it comes back at once on every try: retrying it
    would hold a dead host's URLs through the whole exponential back-off."""
    if exc.transient:
        return result("network_error", error=f"dns {exc}", **fields)
    return result("dns_error", error=str(exc), **fields)


async def conditional_headers(state: FetcherState, req: FetchRequest) -> dict[str, str]:
    """If-None-Match / If-Modified-Since of a refresh, from the request or the URL's url_state row."""
    etag, last_modified = req.etag, req.last_modified
    # A discovery has never been fetched, so there is nothing to validate: skip the read.
    if etag is None and last_modified is None and req.kind == "refresh":
        st = await state.url_get(req.host, req.url_fp)
        if st is not None:
            etag, last_modified = st.etag, st.last_modified
    headers: dict[str, str] = {}
    if etag:
        headers["If-None-Match"] = etag
    if last_modified:
        headers["If-Modified-Since"] = last_modified
    return headers
