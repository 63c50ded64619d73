"""Ground truth of a synthetic web: what a correct, polite crawler should fetch, skip and notice.

``compute_ground_truth`` runs a breadth-first walk over the generator's page table (the same table the
server renders), starting from the seeds. Rules, in order, for each discovered URL:

1. URLs are normalized like the crawler does: lowercase scheme and host, explicit port unless 80,
   empty path -> "/", fragment dropped, query kept (except the ``sid`` parameter, which is dropped:
   session-id variants collapse onto the page they render).
2. Unknown host names are ignored; DNS-failing hosts are listed in ``dns_failures`` and not walked.
3. Hosts whose robots.txt answers 5xx or hangs (``robots_unavailable``) get no request but robots.txt.
4. robots.txt is evaluated with protego for ``user_agent_token``; a blocked URL goes to ``disallowed``.
5. A redirect is followed hop by hop (each hop in ``redirects``) up to ``max_redirects`` hops from the
   first linked URL; a chain that revisits a URL is a loop (``redirect_loops``); a longer chain is
   given up (``redirect_too_long``) and its target is NOT reached through it.
6. 4xx/5xx pages go to ``errors``; unknown paths on a soft-404 host to ``soft404``; the calendar and
   repeated-segment trap URLs are not walked (``trap_hosts`` holds the budget).
7. Any other page answers 200 and is in ``pages``; its links (and its rel=canonical) are followed unless it
   is nofollow (meta robots or X-Robots-Tag, addressed to every crawler or to ours by name). noindex pages
   (also a past unavailable_after) are never published. ``canonical_pages`` = ``pages`` minus noindex pages
   minus pages whose rel=canonical names another URL: each must be published.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit

from protego import Protego

from streamcrawl_synthweb.model import (
    DNS_FAILURE_KINDS,
    ROBOTS_UNAVAILABLE_KINDS,
    TRAP_KINDS,
    Host,
    Page,
    SynthWeb,
)
from streamcrawl_synthweb.pages import robots_real_txt, robots_spec

__all__ = ["GroundTruth", "TrapInfo", "compute_ground_truth", "normalize_url"]


def normalize_url(url: str) -> str:
    """scheme://host[:port]/path[?query] with lowercase host, explicit non-80 port, no fragment."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower() or "http"
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if scheme == "https" else 80)
    netloc = host if (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    path = parts.path or "/"
    return f"{scheme}://{netloc}{path}" + (f"?{parts.query}" if parts.query else "")


def _strip_sid(url: str) -> str:
    parts = urlsplit(url)
    if "sid=" not in parts.query:
        return url
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "sid"])
    return parts._replace(query=query).geturl()


@dataclass(frozen=True)
class TrapInfo:
    """A trap host. A crawler should make at most ``budget`` requests to it beyond ``known_urls``
    (its pages, redirects, errors and soft-404 URLs in the ground truth)."""

    kind: str
    budget: int
    entry_urls: frozenset[str]
    known_urls: frozenset[str]


@dataclass
class GroundTruth:
    pages: set[str] = field(default_factory=set)
    canonical_pages: set[str] = field(default_factory=set)
    disallowed: set[str] = field(default_factory=set)
    robots_unavailable: dict[str, int] = field(default_factory=dict)  # host -> status (0 = timeout)
    robots_status: dict[str, int] = field(default_factory=dict)  # host -> status of /robots.txt
    crawl_delays: dict[str, float] = field(default_factory=dict)
    dns_failures: dict[str, str] = field(default_factory=dict)  # host -> NXDOMAIN | SERVFAIL
    trap_hosts: dict[str, TrapInfo] = field(default_factory=dict)
    exact_duplicates: list[frozenset[str]] = field(default_factory=list)
    near_duplicates: list[frozenset[str]] = field(default_factory=list)
    redirects: dict[str, str] = field(default_factory=dict)  # every hop: source -> target
    redirect_loops: set[str] = field(default_factory=set)
    redirect_too_long: set[str] = field(default_factory=set)
    errors: dict[str, int] = field(default_factory=dict)
    soft404: set[str] = field(default_factory=set)
    noindex: set[str] = field(default_factory=set)
    nofollow: set[str] = field(default_factory=set)
    canonical_of: dict[str, str] = field(default_factory=dict)
    charsets: dict[str, str] = field(default_factory=dict)  # pages with a non-default charset setup
    non_html: dict[str, str] = field(default_factory=dict)  # url -> content type
    oversized: set[str] = field(default_factory=set)
    changing: set[str] = field(default_factory=set)
    change_period_s: float = 0.0
    slow_hosts: set[str] = field(default_factory=set)
    rate_limited: dict[str, int] = field(default_factory=dict)  # host -> first N requests get 429
    hosts_reached: set[str] = field(default_factory=set)
    # host -> every non-robots URL of it a correct crawler requests (pages, redirect hops, errors...)
    urls_by_host: dict[str, set[str]] = field(default_factory=dict)

    def host_urls(self, host: str) -> set[str]:
        return self.urls_by_host.get(host, set())


_NON_HTML = {"pdf": "application/pdf", "png": "image/png", "json": "application/json"}


class _Walker:
    def __init__(self, web: SynthWeb, ua: str, budget: int, max_redirects: int) -> None:
        self.web, self.ua, self.budget, self.max_redirects = web, ua, budget, max_redirects
        self.gt = GroundTruth(change_period_s=web.profile.change_period_s)
        self.robots: dict[str, Protego | None] = {}  # None = allow all
        self.trap_entries: dict[str, set[str]] = {}
        self.seen: set[str] = set()
        self.queue: deque[str] = deque()

    def host_of(self, url: str) -> Host | None:
        parts = urlsplit(url)
        host = self.web.by_name.get(parts.hostname or "")
        if host is None or (parts.port or 80) != self.web.port:
            return None
        return host

    def _robots_for(self, host: Host) -> Protego | None:
        if host.name not in self.robots:
            spec = robots_spec(host.kind, self.web.profile)
            self.gt.robots_status[host.name] = spec.status
            body = robots_real_txt() if spec.location else spec.body
            parser = Protego.parse(body) if spec.status in (200, 301) else None
            self.robots[host.name] = parser
            delay = parser.crawl_delay(self.ua) if parser is not None else None
            if delay:
                self.gt.crawl_delays[host.name] = float(delay)
        return self.robots[host.name]

    def admit(self, url: str) -> Host | None:
        """Robots/DNS gate shared by links and redirect hops; records why a URL is not fetched."""
        host = self.host_of(url)
        if host is None:
            return None
        self.gt.hosts_reached.add(host.name)
        if host.kind in DNS_FAILURE_KINDS:
            self.gt.dns_failures[host.name] = DNS_FAILURE_KINDS[host.kind]
            return None
        parser = self._robots_for(host)
        if host.kind in ROBOTS_UNAVAILABLE_KINDS:
            self.gt.robots_unavailable[host.name] = self.gt.robots_status[host.name]
            return None
        if parser is not None and not parser.can_fetch(url, self.ua):
            self.gt.disallowed.add(url)
            return None
        return host

    def push(self, url: str) -> None:
        self._push_normalized(_strip_sid(normalize_url(url)))

    def _push_normalized(self, url: str) -> None:
        if url not in self.seen:
            self.seen.add(url)
            self.queue.append(url)

    def run(self, seeds: list[str]) -> GroundTruth:
        for seed in seeds:
            self.push(seed)
        while self.queue:
            self.visit(self.queue.popleft())
        self._finish()
        return self.gt

    def visit(self, url: str) -> None:
        host = self.admit(url)
        if host is None:
            return
        path = url[len(self.web.origin(host)) :]
        page = host.pages.get(path)
        if page is not None and page.kind == "redirect":
            self.follow_redirects(url, host, page)
        elif page is not None:
            self.fetched(url, host, page)
        else:
            self.missing(url, host, path)

    def follow_redirects(self, url: str, host: Host, page: Page) -> None:
        chain = [url]
        current_host: Host | None = host
        current: Page | None = page
        while current is not None and current_host is not None and current.kind == "redirect":
            target = _strip_sid(normalize_url(urljoin(chain[-1], current.location or "/")))
            self.gt.redirects[chain[-1]] = target
            if target in chain:
                self.gt.redirect_loops.update(chain)
                return
            if len(chain) > self.max_redirects:
                self.gt.redirect_too_long.add(url)
                return
            chain.append(target)
            self.seen.add(target)
            current_host = self.admit(target)
            if current_host is None:
                return
            current = current_host.pages.get(target[len(self.web.origin(current_host)) :])
        if current_host is not None:
            if current is None:
                self.missing(chain[-1], current_host, chain[-1][len(self.web.origin(current_host)) :])
            else:
                self.fetched(chain[-1], current_host, current)

    def missing(self, url: str, host: Host, path: str) -> None:
        if host.kind == "trap_soft404":
            self.gt.soft404.add(url)
        elif (host.kind == "trap_calendar" and path.startswith("/cal/")) or (
            host.kind == "trap_repeat" and path.startswith("/r/")
        ):
            self.trap_entries.setdefault(host.name, set()).add(url)
        else:
            self.gt.errors[url] = 404

    def fetched(self, url: str, host: Host, page: Page) -> None:
        gt = self.gt
        if page.kind == "error":
            gt.errors[url] = page.status
            return
        gt.pages.add(url)
        if page.kind in _NON_HTML:
            gt.non_html[url] = _NON_HTML[page.kind]
        if page.kind == "big":
            gt.oversized.add(url)
        if page.charset != "utf-8" or page.charset_via != "header":
            gt.charsets[url] = page.charset
        if page.canonical:
            gt.canonical_of[url] = self.web.url(host, page.canonical)
        robots_words = _robots_words(page.meta_robots, page.x_robots)
        if "noindex" in robots_words or "expired" in robots_words:
            gt.noindex.add(url)
        if host.kind == "changing":
            gt.changing.add(url)
        if host.kind == "slow":
            gt.slow_hosts.add(host.name)
        if host.kind.startswith("ratelimit_"):
            gt.rate_limited[host.name] = self.web.profile.ratelimit_first_n
        if host.kind in TRAP_KINDS:
            self.trap_entries.setdefault(host.name, set())
        if "nofollow" in robots_words:
            gt.nofollow.add(url)
            return
        if page.canonical:  # the crawler queues a page's canonical like a link
            self.push(self.web.url(host, page.canonical))
        base = urljoin(url, page.base) if page.base else url
        origin = self.web.origin(host)
        for link in page.links:
            if link.host is not None:
                self._push_normalized(self.web.url(link.host, link.href))
            elif link.href.startswith("/") and not page.base and "sid=" not in link.href:
                self._push_normalized(origin + link.href)  # fast path: already in normal form
            else:
                self.push(urljoin(base, link.href))

    def _finish(self) -> None:
        gt = self.gt
        for url in gt.pages | set(gt.redirects) | set(gt.errors) | gt.soft404:
            gt.urls_by_host.setdefault(urlsplit(url).hostname or "", set()).add(url)
        gt.canonical_pages = {u for u in gt.pages if u not in gt.noindex and gt.canonical_of.get(u, u) == u}
        for name, entries in self.trap_entries.items():
            host = self.web.by_name[name]
            gt.trap_hosts[name] = TrapInfo(
                kind=host.kind,
                budget=self.budget,
                entry_urls=frozenset(entries),
                known_urls=frozenset(gt.host_urls(name)),
            )
        for host in self.web.hosts:
            pairs = {"dup_exact": "/mirror/", "dup_near": "/print/"}
            if host.kind not in pairs:
                continue
            for k in (1, 2):
                group = frozenset(
                    {self.web.url(host, f"/p/{k}.html"), self.web.url(host, f"{pairs[host.kind]}{k}.html")}
                )
                if group <= gt.pages:
                    target = gt.exact_duplicates if host.kind == "dup_exact" else gt.near_duplicates
                    target.append(group)


def _robots_words(*values: str | None, token: str = "streamcrawl") -> set[str]:
    """The robots words of meta/X-Robots-Tag values that apply to ``token``: a "name:" prefix addresses one
    crawler; an unavailable_after date in the past reads as "expired" (the generator writes only ISO dates)."""
    words: set[str] = set()
    for value in values:
        applies = True
        for raw in (value or "").replace(" ", "").lower().split(","):
            head, sep, rest = raw.partition(":")
            if sep and head not in ("unavailable_after",):
                applies, raw = head == token, rest
            if not applies or not raw:
                continue
            if raw.startswith("unavailable_after:"):
                if raw.partition(":")[2] < "2026":  # the generator's dates are far past or far future
                    words.add("expired")
                continue
            words.update({"noindex", "nofollow"} if raw == "none" else {raw})
    return words


def compute_ground_truth(
    web: SynthWeb, seeds: list[str], user_agent_token: str, trap_budget: int, max_redirects: int
) -> GroundTruth:
    return _Walker(web, user_agent_token, trap_budget, max_redirects).run(seeds)
