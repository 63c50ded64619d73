"""Deterministic generator of the synthetic web: ``generate(n_hosts, seed, profile) -> SynthWeb``.

Pure: the same (n_hosts, seed, profile, port) always yields the same hosts, addresses, kinds and page
tables. Rules:

* host ``i`` (0-based) is named ``h{i+1:04d}.synth.test`` and lives at ``127.10.0.1`` + i, skipping
  .0/.255 last octets (127.10.x.y .. 127.11.x.y ..), never 127.0.0.1;
* when ``n_hosts >= len(special) + 2`` every special kind the profile weights appears at least once
  (on seed-chosen hosts); the remaining hosts draw a kind from ``profile.kind_weights``;
* every host has ``/`` plus ``/p/1.html .. /p/{n-1}.html``; ``/`` links to ``/p/1.html``, each
  ``/p/k.html`` links to ``/p/{k+1}.html`` (so the whole chain is reachable from the home page), to a
  few random pages of the host and to a few home or ``/p/1..3.html`` pages of other hosts;
* each special kind adds the pages of its feature, linked from its home page (see ``_add_special``).
"""

from __future__ import annotations

import random
from dataclasses import replace

from streamcrawl_synthweb.model import (
    DEFAULT_HTTP_PORT,
    DOMAIN,
    NORMAL,
    PROFILES,
    SPECIAL_KINDS,
    TEMPLATE_PAGES,
    Host,
    Link,
    Page,
    Profile,
    SynthWeb,
)

__all__ = ["generate", "host_ip", "host_name"]

_CROSS_TARGET_PATHS = ("/", "/p/1.html", "/p/2.html", "/p/3.html")  # exist on every host


def host_name(index: int, n_hosts: int) -> str:
    width = max(4, len(str(n_hosts)))
    return f"h{index + 1:0{width}d}.{DOMAIN}"


def host_ip(index: int) -> str:
    # 254 usable last octets per /24, 256 /24s per /16, starting at 127.10.0.0/16.
    last = index % 254 + 1
    third = (index // 254) % 256
    second = 10 + index // (254 * 256)
    if second > 255:
        raise ValueError(f"too many hosts for 127.0.0.0/8: {index}")
    return f"127.{second}.{third}.{last}"


def _assign_kinds(n_hosts: int, seed: int, profile: Profile) -> list[str]:
    rng = random.Random(f"kinds:{seed}")
    names = list(profile.kind_weights)
    weights = [profile.kind_weights[k] for k in names]
    kinds = rng.choices(names, weights=weights, k=n_hosts)
    special = [k for k in SPECIAL_KINDS if profile.kind_weights.get(k, 0.0) > 0]
    if special and n_hosts >= len(special) + 2:
        # Guarantee one of each special kind the profile uses, and keep h0001 normal so the first seed
        # is benign.
        slots = rng.sample(range(1, n_hosts), len(special))
        for slot, kind in zip(slots, special, strict=True):
            kinds[slot] = kind
        kinds[0] = NORMAL
    return kinds


def _cross(rng: random.Random, n_hosts: int, me: int, count: int) -> list[Link]:
    if n_hosts < 2:
        return []
    out = []
    for _ in range(count):
        other = rng.randrange(n_hosts - 1)
        other = other + 1 if other >= me else other
        out.append(Link(rng.choice(_CROSS_TARGET_PATHS), host=other))
    return out


def _base_pages(rng: random.Random, index: int, n_hosts: int, profile: Profile, kind: str = NORMAL) -> dict[str, Page]:
    n = max(4, rng.randint(*profile.pages_per_host))
    if kind == "template_heavy":
        n = TEMPLATE_PAGES
    key0 = index * 10_000
    pages: dict[str, Page] = {}
    for k in range(n):
        path = "/" if k == 0 else f"/p/{k}.html"
        links: list[Link] = []
        if k + 1 < n:
            links.append(Link(f"/p/{k + 1}.html"))
        for _ in range(rng.randint(*profile.intra_links)):
            j = rng.randrange(n)
            links.append(Link("/" if j == 0 else f"/p/{j}.html"))
        links += _cross(rng, n_hosts, index, rng.randint(*profile.cross_links))
        pages[path] = Page(path=path, links=tuple(links), body_key=key0 + k)
    return pages


def _link_from_home(pages: dict[str, Page], *paths: str) -> None:
    home = pages["/"]
    pages["/"] = replace(home, links=home.links + tuple(Link(p) for p in paths))


def _add(pages: dict[str, Page], *new: Page, link: bool = True) -> None:
    for page in new:
        pages[page.path] = page
    if link:
        _link_from_home(pages, *(p.path for p in new))


def _add_special(kind: str, pages: dict[str, Page], key: int) -> None:
    """Add the pages that make up ``kind``'s feature. ``key`` is a fresh body_key base."""
    if kind in ("robots_disallow", "robots_redirect", "robots_ua_group"):
        _add(pages, Page("/private/1.html", body_key=key + 1), Page("/private/2.html", body_key=key + 2))
    elif kind == "robots_wildcard":
        _add(
            pages,
            Page("/docs/report.pdf", kind="pdf", body_key=key + 1),  # Disallow: /*.pdf$
            Page("/docs/report.pdf?download=1", kind="pdf", body_key=key + 1),  # '$' does not match
            Page("/private/1.html", body_key=key + 2),  # Disallow: /private/
            Page("/private/public-1.html", body_key=key + 3),  # Allow: /private/public-*
        )
    elif kind == "trap_calendar":
        _link_from_home(pages, "/cal/2026/11/")
    elif kind == "trap_repeat":
        _link_from_home(pages, "/r/")
    elif kind == "trap_soft404":
        _link_from_home(pages, "/missing/1.html", "/missing/2.html")
    elif kind == "dup_exact":
        # Same body_key and links as /p/k.html -> identical bytes under another URL.
        _add(pages, *(replace(pages[f"/p/{k}.html"], path=f"/mirror/{k}.html") for k in (1, 2)))
    elif kind == "dup_near":
        _add(pages, *(replace(pages[f"/p/{k}.html"], path=f"/print/{k}.html", variant=1) for k in (1, 2)))
    elif kind == "errors_5xx":
        _add(pages, *(Page(f"/err/{s}.html", kind="error", status=s) for s in (500, 502, 503)))
        _link_from_home(pages, "/gone/404.html")  # not in the table -> plain 404
    elif kind == "redirects":
        _add_redirects(pages, key)
    elif kind == "oversized":
        _add(pages, Page("/big.html", kind="big", body_key=key + 1))
    elif kind == "charsets":
        _add(
            pages,
            Page("/cs/latin1.html", body_key=key + 1, charset="iso-8859-1", charset_via="header"),
            Page("/cs/sjis.html", body_key=key + 2, charset="shift_jis", charset_via="meta"),
            Page("/cs/cp1251.html", body_key=key + 3, charset="windows-1251", charset_via="http-equiv"),
            Page("/cs/none.html", body_key=key + 4, charset="utf-8", charset_via="none"),
        )
    elif kind == "nonhtml":
        _add(
            pages,
            Page("/files/report.pdf", kind="pdf", body_key=key + 1),
            Page("/img/logo.png", kind="png", body_key=key + 2),
            Page("/api/data.json", kind="json", body_key=key + 3),
        )
    elif kind == "directives":
        _add_directives(pages, key)


def _add_redirects(pages: dict[str, Page], key: int) -> None:
    def r(path: str, to: str, status: int = 301) -> Page:
        return Page(path, kind="redirect", status=status, location=to)

    _add(
        pages,
        r("/old/1.html", "/p/1.html", 301),
        r("/tmp/1.html", "/p/2.html", 302),
        r("/moved/1.html", "../p/3.html", 307),  # relative Location, resolved against the request URL
        r("/perm/1.html", "/p/1.html", 308),
        r("/chain/1.html", "/chain/2.html"),  # 5 hops: /chain/1 -> .. -> /chain/5 -> /p/2.html
        r("/longchain/1.html", "/longchain/2.html"),  # 6 hops: one too many for max_redirects=5
        r("/loop/a.html", "/loop/b.html"),
        r("/toolong/1.html", "/toolong/2.html"),  # 7 hops to a page reachable only through them: never fetched
        r("/scheme/ftp.html", "ftp://files.synth.test/pub/"),  # non-HTTP targets: refused
        r("/scheme/js.html", "javascript:void(0)"),
    )
    _add(
        pages,
        *(r(f"/chain/{k}.html", f"/chain/{k + 1}.html", 302 if k % 2 else 301) for k in (2, 3, 4)),
        r("/chain/5.html", "/p/2.html"),
        *(r(f"/longchain/{k}.html", f"/longchain/{k + 1}.html") for k in (2, 3, 4, 5)),
        r("/longchain/6.html", "/p/3.html"),
        r("/loop/b.html", "/loop/a.html"),
        *(r(f"/toolong/{k}.html", f"/toolong/{k + 1}.html") for k in range(2, 7)),
        r("/toolong/7.html", "/toolong/final.html"),
        Page("/toolong/final.html", body_key=key + 1),
        link=False,
    )


def _add_directives(pages: dict[str, Page], key: int) -> None:
    _add(
        pages,
        Page("/canon/1.html", body_key=key + 1, canonical="/p/1.html", links=(Link("/p/1.html"),)),
        # <base href="/p/"> makes "1.html" mean /p/1.html, not /base/1.html.
        Page("/base/index.html", body_key=key + 2, base="/p/", links=(Link("1.html"), Link("2.html"))),
        Page("/noindex.html", body_key=key + 3, meta_robots="noindex", links=(Link("/p/2.html"),)),
        Page("/nofollow.html", body_key=key + 4, meta_robots="nofollow", links=(Link("/hidden/1.html"),)),
        Page("/xrobots.html", body_key=key + 5, x_robots="noindex, nofollow", links=(Link("/hidden/2.html"),)),
        # X-Robots-Tag addressed to us by name, and to another crawler only (indexable for us)
        Page("/ua-noindex.html", body_key=key + 8, x_robots="streamcrawl: noindex", links=(Link("/p/3.html"),)),
        Page("/otherbot.html", body_key=key + 9, x_robots="googlebot: noindex, nofollow"),
        # an unavailable_after date long past: not indexed
        Page("/expired.html", body_key=key + 10, meta_robots="unavailable_after: 2001-01-01"),
    )
    # Only linked from nofollow pages: a polite crawler never discovers them.
    _add(
        pages,
        Page("/hidden/1.html", body_key=key + 6),
        Page("/hidden/2.html", body_key=key + 7),
        link=False,
    )


def generate(n_hosts: int, seed: int, profile: Profile | str = "default", port: int = DEFAULT_HTTP_PORT) -> SynthWeb:
    """Build the synthetic web. ``profile`` is a ``Profile`` or a name in ``PROFILES``."""
    if n_hosts < 1:
        raise ValueError("n_hosts must be >= 1")
    prof = PROFILES[profile] if isinstance(profile, str) else profile
    kinds = _assign_kinds(n_hosts, seed, prof)
    hosts = []
    for i, kind in enumerate(kinds):
        rng = random.Random(f"host:{seed}:{i}")
        pages = _base_pages(rng, i, n_hosts, prof, kind)
        _add_special(kind, pages, i * 10_000 + 5_000)
        hosts.append(Host(index=i, name=host_name(i, n_hosts), ip=host_ip(i), kind=kind, pages=pages))
    return SynthWeb(
        seed=seed,
        profile=prof,
        hosts=tuple(hosts),
        port=port,
        by_name={h.name: h for h in hosts},
        by_ip={h.ip: h for h in hosts},
    )
