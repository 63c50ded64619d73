"""What the fetcher sends besides its result for fetches that leave nothing to parse: the WARC writer's
archive record (a 304 is a revisit of the URL's last capture; a redirect, an HTTP error and a soft 404
are responses without a body, which the fetcher does not store), and, on the lease that fetched
robots.txt, its Sitemap: URLs and /sitemap.xml as candidate URLs (fetched like any other: robots.txt and
politeness apply)."""

from __future__ import annotations

from urllib.parse import urljoin

from streamcrawl_contracts.messages import ArchiveRecord, FetchResult, RevisitOf, UrlCandidates
from streamcrawl_contracts.topics import ARCHIVE, URL_CANDIDATES
from streamcrawl_core.identity import url_identity
from streamcrawl_core.urls import UrlError
from streamcrawl_runtime.ports.loop import Output


def archive_result(res: FetchResult, prev_hash: str | None, prev_fetched_at: float | None) -> Output | None:
    """The archive record of a fetch with a response and nothing to parse (keyed by exchange id)."""
    if res.exchange is None:
        return None
    revisit = None
    content_hash = None
    if res.outcome == "not_modified" and prev_hash is not None:
        revisit, content_hash = RevisitOf(url=res.url, fetched_at=prev_fetched_at), prev_hash
    return Output(ARCHIVE, res.exchange.id, ArchiveRecord(
        url=res.url, host=res.host, url_fp=res.url_fp, fetched_at=res.started_at, fetch_s=res.fetch_s,
        outcome=res.outcome, status=res.status, exchange=res.exchange, content_hash=content_hash,
        out_links=[res.redirect_to] if res.redirect_to else [], revisit_of=revisit))


def sitemap_candidates(res: FetchResult) -> list[Output]:
    """robots.txt's Sitemap: URLs and the host's /sitemap.xml, one candidate message per target host, at
    depth 0 (the discovery priority of a page one link from a seed)."""
    origin = "/".join(res.url.split("/", 3)[:3])
    by_host: dict[str, dict[str, int]] = {}
    for raw in [*res.sitemaps, origin + "/sitemap.xml"]:
        try:
            # a relative Sitemap: line (not the protocol's form, but seen) is read against robots.txt's URL
            url, host, fp = url_identity(urljoin(origin + "/robots.txt", raw.strip()))
        except UrlError:
            continue
        by_host.setdefault(host, {}).setdefault(url, fp)
    return [Output(URL_CANDIDATES, host, UrlCandidates(host=host, depth=0, source_url=f"robots:{res.url}",
                                                       urls=list(g), url_fps=list(g.values())))
            for host, g in by_host.items()]
