"""Data model of the synthetic web: host kinds, timing profiles, pages, hosts and the ``SynthWeb`` itself.

Everything here is immutable plain data. The generator (``generator.py``) builds it, the HTTP server
(``server.py``) renders it, and the ground truth (``truth.py``) walks the very same page table, so the
links a crawler sees and the links the oracle follows can never disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamcrawl_synthweb.truth import GroundTruth

DOMAIN = "synth.test"  # RFC 2606 reserved TLD: can never collide with a real name.
DEFAULT_HTTP_PORT = 8480
DEFAULT_DNS_PORT = 8553

# --- host kinds -------------------------------------------------------------------------------------
NORMAL = "normal"
ROBOTS_KINDS = (
    "robots_disallow",  # Disallow: /private/
    "robots_404",  # no robots.txt -> everything allowed
    "robots_500",  # robots 5xx -> the host must get zero non-robots requests
    "robots_503",
    "robots_timeout",  # robots.txt answers only after Profile.robots_timeout_s
    "robots_redirect",  # 301 /robots.txt -> /robots-real.txt
    "robots_crawl_delay",  # Crawl-delay: Profile.crawl_delay_s
    "robots_wildcard",  # Disallow: /*.pdf$ , Allow: /private/public-*
    "robots_ua_group",  # '*' is shut out, the 'streamcrawl' group is not
)
TRAP_KINDS = ("trap_calendar", "trap_repeat", "trap_session", "trap_soft404")
OTHER_KINDS = (
    "dup_exact",
    "dup_near",
    "slow",
    "ratelimit_seconds",  # first N requests -> 429 Retry-After: <seconds>
    "ratelimit_date",  # first N requests -> 429 Retry-After: <HTTP-date>
    "errors_5xx",
    "redirects",  # 301/302/307/308 hops, a 5-hop chain, 6- and 7-hop chains, a loop, non-HTTP targets
    "oversized",  # a > 10 MB streamed body
    "charsets",
    "nonhtml",
    "directives",  # rel=canonical, <base href>, meta robots, X-Robots-Tag
    "changing",
    "dns_nxdomain",
    "dns_servfail",
    # TEMPLATE_PAGES pages sharing a ~1,500-word template (nav, sidebar, footer) with ~50-word bodies of
    # their own: near-duplicate detection must not merge them (issue 11)
    "template_heavy",
)
TEMPLATE_PAGES = 50
SPECIAL_KINDS: tuple[str, ...] = ROBOTS_KINDS + TRAP_KINDS + OTHER_KINDS
ALL_KINDS: tuple[str, ...] = (NORMAL, *SPECIAL_KINDS)
ROBOTS_UNAVAILABLE_KINDS = frozenset({"robots_500", "robots_503", "robots_timeout"})
DNS_FAILURE_KINDS = {"dns_nxdomain": "NXDOMAIN", "dns_servfail": "SERVFAIL"}


def _default_weights() -> dict[str, float]:
    # 60 % ordinary hosts, the rest spread evenly over the special kinds.
    share = 0.4 / len(SPECIAL_KINDS)
    return {NORMAL: 0.6, **{k: share for k in SPECIAL_KINDS}}


@dataclass(frozen=True)
class Profile:
    """Shape and timing knobs. Timings are read by the server at request time."""

    name: str = "default"
    pages_per_host: tuple[int, int] = (8, 24)
    intra_links: tuple[int, int] = (2, 5)
    cross_links: tuple[int, int] = (1, 3)
    kind_weights: Mapping[str, float] = field(default_factory=_default_weights)
    slow_delay_s: tuple[float, float] = (0.3, 1.5)
    # Well past a crawler's usual 30 s read timeout: a hang of exactly 30 s made "timed out" a race.
    robots_timeout_s: float = 45.0
    crawl_delay_s: float = 2.0
    ratelimit_first_n: int = 3
    retry_after_s: int = 2
    change_period_s: float = 300.0
    big_body_bytes: int = 12 * 1024 * 1024
    # Ordinary hosts serve sitemaps (streamcrawl_synthweb.sitemaps) and robots.txt names them.
    sitemaps: bool = False


PROFILES: dict[str, Profile] = {
    "default": Profile(),
    # Small, quick timings for unit tests and smoke runs.
    "fast": Profile(
        name="fast",
        pages_per_host=(4, 8),
        slow_delay_s=(0.05, 0.2),
        robots_timeout_s=3.0,
        change_period_s=2.0,
        retry_after_s=1,
    ),
    # Few ordinary hosts with hundreds of pages each: a crawl that the politeness delay bounds, not the
    # CPU (the "fraction of the politeness bound" benchmark).
    "deep": Profile(
        name="deep",
        pages_per_host=(400, 500),
        kind_weights={NORMAL: 1.0},
    ),
    # About a hundred ordinary hosts with a few dozen pages each: a crawl the politeness delay bounds
    # (the largest host's pages x 1 s) with little work per second, like most real crawls (issue 15's
    # time-to-coverage and light-load CPU benchmark).
    "polite": Profile(
        name="polite",
        pages_per_host=(12, 32),
        kind_weights={NORMAL: 1.0},
    ),
    # Ordinary hosts (pages that never change: a conditional GET gets a 304) and changing hosts (every
    # page has a new version every second, more often than the recrawl e2e test's shortest interval, so
    # every visit sees a change): the recrawl e2e test, with intervals in seconds.
    "recrawl": Profile(
        name="recrawl",
        pages_per_host=(2, 3),
        intra_links=(1, 2),
        cross_links=(1, 2),
        kind_weights={NORMAL: 0.5, "changing": 0.5},
        change_period_s=1.0,
    ),
    # Ordinary hosts with sitemaps (plain, index of a gzip and a plain one, gzip, malformed) that list
    # pages nothing links to: the sitemap e2e test.
    "sitemaps": Profile(
        name="sitemaps",
        pages_per_host=(2, 4),
        kind_weights={NORMAL: 1.0},
        sitemaps=True,
    ),
}


@dataclass(frozen=True)
class Link:
    """One ``<a href>``. ``host`` is a host index for absolute cross-host links (rendered with the
    serving port), or None: then ``href`` is written verbatim (absolute path or relative)."""

    href: str
    host: int | None = None


@dataclass(frozen=True)
class Page:
    """A static page of a host. ``body_key`` seeds the text: equal keys render equal article text,
    which is how exact duplicates come out byte-identical."""

    path: str
    kind: str = "html"  # html | redirect | error | pdf | png | json | big
    links: tuple[Link, ...] = ()
    body_key: int = 0
    status: int = 200
    location: str | None = None  # redirect target (absolute path or relative)
    charset: str = "utf-8"
    charset_via: str = "header"  # header | meta | http-equiv | none
    canonical: str | None = None  # absolute path on the same host
    base: str | None = None  # <base href>
    meta_robots: str | None = None
    x_robots: str | None = None
    variant: int = 0  # near-duplicates differ only by this (timestamp + advert line)


@dataclass(frozen=True)
class Host:
    index: int
    name: str
    ip: str
    kind: str
    pages: Mapping[str, Page]

    @property
    def home(self) -> str:
        return "/"


@dataclass(frozen=True)
class SynthWeb:
    """The generated web. ``port`` is baked in because cross-host links carry it."""

    seed: int
    profile: Profile
    hosts: tuple[Host, ...]
    port: int = DEFAULT_HTTP_PORT
    by_name: Mapping[str, Host] = field(default_factory=dict, compare=False, repr=False)
    by_ip: Mapping[str, Host] = field(default_factory=dict, compare=False, repr=False)

    def origin(self, host: Host | int) -> str:
        h = self.hosts[host] if isinstance(host, int) else host
        return f"http://{h.name}" if self.port == 80 else f"http://{h.name}:{self.port}"

    def url(self, host: Host | int, path: str) -> str:
        return self.origin(host) + path

    def seeds(self, limit: int | None = None) -> list[str]:
        """Home page of every host (all of them: DNS-failing and robots-5xx hosts included,
        since a crawler must cope with those seeds too), in host order; ``limit`` keeps a prefix."""
        urls = [self.url(h, "/") for h in self.hosts]
        return urls if limit is None else urls[:limit]

    def hosts_of_kind(self, kind: str) -> list[Host]:
        return [h for h in self.hosts if h.kind == kind]

    def ground_truth(
        self,
        seeds: Iterable[str] | None = None,
        user_agent_token: str = "streamcrawl",
        trap_budget: int = 50,
        max_redirects: int = 5,
    ) -> GroundTruth:
        from streamcrawl_synthweb.truth import compute_ground_truth

        return compute_ground_truth(
            self,
            list(self.seeds() if seeds is None else seeds),
            user_agent_token=user_agent_token,
            trap_budget=trap_budget,
            max_redirects=max_redirects,
        )
