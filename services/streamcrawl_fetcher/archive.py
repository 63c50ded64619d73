"""What the fetcher sends besides its result for fetches that leave nothing to parse: the WARC writer's
archive record (a 304 is a revisit of the URL's last capture; a redirect, an HTTP error and a soft 404
are responses without a body, which the fetcher does not store); the archive records of the fetcher's
own requests, robots.txt (every hop of its redirect chain) and the soft-404 probe, which are fetches too
(Heritrix archives robots.txt the same way); and, on the lease that fetched robots.txt, its Sitemap: URLs
and /sitemap.xml as candidate URLs (fetched like any other: robots.txt and politeness apply; a guessed
/sitemap.xml last of the host's URLs)."""

from __future__ import annotations

import uuid
from urllib.parse import urljoin

from streamcrawl_contracts.messages import ArchiveRecord, FetchResult, HttpExchange, RevisitOf, UrlCandidates
from streamcrawl_contracts.topics import ARCHIVE, URL_CANDIDATES
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.identity import url_identity
from streamcrawl_core.urls import UrlError
from streamcrawl_runtime.ports.blobs import StoredPage
from streamcrawl_runtime.ports.loop import Output

from streamcrawl_fetcher.ports import HttpResponse


def archive_result(res: FetchResult, prev_hash: str | None, prev_fetched_at: float | None,
                   prev_wire_hash: str | None = None) -> Output | None:
    """The archive record of a fetch with a response and nothing to parse (keyed by exchange id). A 304 is
    a revisit naming the payload digest of the URL's last capture: its wire digest (url_state.wire_hash),
    or its content hash when none is kept (a capture recorded before wire bodies were: decoded, and its
    digest over the decoded body; or one with no content coding, where both are the same)."""
    if res.exchange is None:
        return None
    revisit = None
    content_hash = wire_hash = None
    if res.outcome == "not_modified" and prev_hash is not None:
        revisit, content_hash = RevisitOf(url=res.url, fetched_at=prev_fetched_at), prev_hash
        wire_hash = prev_wire_hash or prev_hash
    return Output(ARCHIVE, res.exchange.id, ArchiveRecord(
        url=res.url, host=res.host, url_fp=res.url_fp, fetched_at=res.started_at, fetch_s=res.fetch_s,
        outcome=res.outcome, status=res.status, exchange=res.exchange, content_hash=content_hash,
        out_links=[res.redirect_to] if res.redirect_to else [], revisit_of=revisit, wire_hash=wire_hash))


def archive_exchange(url: str, host: str, sent_at: float, resp: HttpResponse, outcome: str,
                     stored: StoredPage | None,
                     wire: tuple[str, str | None, bytes | None] | None = None) -> Output | None:
    """The archive record of one of the fetcher's own requests (robots.txt, a hop of its redirect chain,
    the soft-404 probe): a response record, with its body when `stored` (a 2xx the fetcher stored; `wire`
    is store_wire's answer for it),
    without one otherwise (as for a redirect or an error), and the Location as its out-link."""
    if not resp.response_head:
        return None
    exchange = HttpExchange(id=uuid.uuid4().hex, ip=resp.ip, request_head=resp.request_head,
                            response_head=resp.response_head)
    location = resp.headers.get("location") if 300 <= resp.status <= 399 else None
    return Output(ARCHIVE, exchange.id, ArchiveRecord(
        url=url, host=host, url_fp=url_fingerprint(url), fetched_at=sent_at, fetch_s=resp.elapsed_s, outcome=outcome,
        status=resp.status, exchange=exchange, content_hash=stored.content_hash if stored else None,
        storage_key=stored.key if stored else None, content_length=len(resp.body) if stored else 0,
        truncated=resp.truncated if stored else False, out_links=[urljoin(url, location)] if location else [],
        wire_hash=wire[0] if stored and wire else None, wire_key=wire[1] if stored and wire else None,
        wire_body=wire[2] if stored and wire else None))


#: The frontier priority of a guessed /sitemap.xml (one robots.txt does not declare): the lowest, so the
#: guess (a speculative request, answered 404 by most hosts) takes a politeness slot only when the host has
#: no page left to fetch before it, rather than delaying its first pages by one delay. Declared sitemaps
#: keep the discovery priority of depth 0. The cost: on a host whose queue never runs dry within its page
#: budget, the guess waits until it does.
GUESSED_SITEMAP_PRIORITY = 9


def sitemap_candidates(res: FetchResult) -> list[Output]:
    """robots.txt's Sitemap: URLs, one candidate message per target host at depth 0 (the discovery
    priority of a page one link from a seed), and the host's /sitemap.xml, unless declared, in a message of
    its own at GUESSED_SITEMAP_PRIORITY."""
    origin = "/".join(res.url.split("/", 3)[:3])
    by_host: dict[str, dict[str, int]] = {}
    for raw in res.sitemaps:
        try:
            # a relative Sitemap: line (not the protocol's form, but seen) is read against robots.txt's URL
            url, host, fp = url_identity(urljoin(origin + "/robots.txt", raw.strip()))
        except UrlError:
            continue
        by_host.setdefault(host, {}).setdefault(url, fp)
    source = f"robots:{res.url}"
    out = [Output(URL_CANDIDATES, host, UrlCandidates(host=host, depth=0, source_url=source, urls=list(g),
                                                      url_fps=list(g.values())))
           for host, g in by_host.items()]
    try:
        url, host, fp = url_identity(origin + "/sitemap.xml")
    except UrlError:
        return out
    if url not in by_host.get(host, {}):
        out.append(Output(URL_CANDIDATES, host, UrlCandidates(host=host, depth=0, source_url=source, urls=[url],
                                                              url_fps=[fp], priority=GUESSED_SITEMAP_PRIORITY)))
    return out
