"""Generator determinism and ground-truth sanity (pure, no sockets)."""

from __future__ import annotations

import ipaddress

import pytest
from streamcrawl_synthweb import SynthWeb, generate, normalize_url
from streamcrawl_synthweb.model import SPECIAL_KINDS
from streamcrawl_synthweb.pages import render_page


@pytest.fixture(scope="module")
def web():
    return generate(40, seed=7, profile="fast", port=8480)


@pytest.fixture(scope="module")
def gt(web):
    return web.ground_truth()


def test_deterministic_and_seed_sensitive(web):
    again = generate(40, seed=7, profile="fast", port=8480)
    assert again == web
    assert [h.kind for h in again.hosts] == [h.kind for h in web.hosts]
    other = generate(40, seed=8, profile="fast", port=8480)
    assert [h.kind for h in other.hosts] != [h.kind for h in web.hosts]


def test_names_addresses_and_kinds(web):
    assert web.hosts[0].name == "h0001.synth.test"
    ips = [h.ip for h in web.hosts]
    assert len(set(ips)) == len(ips)
    for ip in ips:
        assert ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.0.0/8")
        assert ip != "127.0.0.1"
    assert set(SPECIAL_KINDS) <= {h.kind for h in web.hosts}
    assert web.seeds()[0] == "http://h0001.synth.test:8480/"
    assert len(web.seeds(limit=5)) == 5


def test_big_web_is_quick_and_wide():
    big = generate(250, seed=3)
    assert len(big.hosts) == 250 and len(big.by_ip) == 250
    assert big.hosts[-1].name == "h0250.synth.test"


def test_normalize_url():
    assert normalize_url("HTTP://H0001.Synth.Test/a#frag") == "http://h0001.synth.test/a"
    assert normalize_url("http://h0001.synth.test:80") == "http://h0001.synth.test/"
    assert normalize_url("http://h0001.synth.test:8480/p?q=1") == "http://h0001.synth.test:8480/p?q=1"


def _u(web: SynthWeb, kind: str, path: str) -> str:
    return web.url(web.hosts_of_kind(kind)[0], path)


def test_ground_truth_robots(web, gt):
    assert not gt.pages & gt.disallowed
    for kind in ("robots_disallow", "robots_redirect", "robots_ua_group"):
        assert _u(web, kind, "/private/1.html") in gt.disallowed
        assert _u(web, kind, "/") in gt.pages
    assert _u(web, "robots_wildcard", "/docs/report.pdf") in gt.disallowed
    assert _u(web, "robots_wildcard", "/docs/report.pdf?download=1") in gt.pages
    assert _u(web, "robots_wildcard", "/private/public-1.html") in gt.pages
    assert _u(web, "robots_404", "/p/1.html") in gt.pages
    unavailable = {h.name for k in ("robots_500", "robots_503", "robots_timeout") for h in web.hosts_of_kind(k)}
    assert set(gt.robots_unavailable) == unavailable
    assert all(not gt.host_urls(name) for name in unavailable)
    assert gt.crawl_delays[web.hosts_of_kind("robots_crawl_delay")[0].name] == web.profile.crawl_delay_s
    # Another agent only matches the '*' group, which shuts the ua_group host out entirely.
    other = web.ground_truth(user_agent_token="otherbot")
    assert _u(web, "robots_ua_group", "/") in other.disallowed


def test_ground_truth_dns_traps_and_redirects(web, gt):
    for kind, rcode in (("dns_nxdomain", "NXDOMAIN"), ("dns_servfail", "SERVFAIL")):
        name = web.hosts_of_kind(kind)[0].name
        assert gt.dns_failures[name] == rcode and not gt.host_urls(name)
    kinds = {info.kind for info in gt.trap_hosts.values()}
    assert {"trap_calendar", "trap_repeat", "trap_session", "trap_soft404"} <= kinds
    cal = gt.trap_hosts[web.hosts_of_kind("trap_calendar")[0].name]
    assert _u(web, "trap_calendar", "/cal/2026/11/") in cal.entry_urls and cal.budget == 50
    assert _u(web, "trap_soft404", "/missing/1.html") in gt.soft404
    assert _u(web, "redirects", "/chain/5.html") in gt.redirects
    assert gt.redirects[_u(web, "redirects", "/moved/1.html")] == _u(web, "redirects", "/p/3.html")
    assert _u(web, "redirects", "/loop/a.html") in gt.redirect_loops
    assert _u(web, "redirects", "/longchain/1.html") in gt.redirect_too_long
    assert _u(web, "redirects", "/toolong/1.html") in gt.redirect_too_long
    # the 7-hop chain's target is reachable only through it: a crawler that honours 5 hops never asks for it
    assert _u(web, "redirects", "/toolong/final.html") not in gt.pages
    asked = gt.host_urls(web.hosts_of_kind("redirects")[0].name)
    assert _u(web, "redirects", "/toolong/7.html") not in asked
    assert _u(web, "redirects", "/toolong/6.html") in asked  # the 5th hop's target
    assert _u(web, "errors_5xx", "/err/503.html") in gt.errors
    assert gt.errors[_u(web, "errors_5xx", "/gone/404.html")] == 404


def test_ground_truth_directives_and_duplicates(web, gt):
    assert _u(web, "directives", "/hidden/1.html") not in gt.pages  # only linked from nofollow
    assert _u(web, "directives", "/hidden/2.html") not in gt.pages  # only linked from X-Robots nofollow
    assert _u(web, "directives", "/noindex.html") in gt.pages - gt.canonical_pages
    assert _u(web, "directives", "/canon/1.html") in gt.pages - gt.canonical_pages
    assert gt.canonical_of[_u(web, "directives", "/canon/1.html")] == _u(web, "directives", "/p/1.html")
    assert _u(web, "directives", "/p/2.html") in gt.pages  # via <base href="/p/"> + "2.html"
    assert len(gt.exact_duplicates) == 2 * len(web.hosts_of_kind("dup_exact"))
    assert len(gt.near_duplicates) == 2 * len(web.hosts_of_kind("dup_near"))
    for group, exact in [(g, True) for g in gt.exact_duplicates] + [(g, False) for g in gt.near_duplicates]:
        bodies = set()
        for url in group:
            host = web.by_name[url.split("/")[2].split(":")[0]]
            bodies.add(render_page(web, host, host.pages[url.split(str(web.port), 1)[1]]).body)
        assert (len(bodies) == 1) is exact
    assert gt.charsets[_u(web, "charsets", "/cs/sjis.html")] == "shift_jis"
    assert gt.non_html[_u(web, "nonhtml", "/img/logo.png")] == "image/png"
    assert _u(web, "oversized", "/big.html") in gt.oversized
    assert _u(web, "changing", "/") in gt.changing


def test_ground_truth_is_deterministic(web, gt):
    again = web.ground_truth()
    assert again.pages == gt.pages and again.disallowed == gt.disallowed


def test_deep_profile_is_ordinary_hosts_with_hundreds_of_pages() -> None:
    web = generate(60, seed=3, profile="deep")
    assert {h.kind for h in web.hosts} == {"normal"}
    assert all(len(h.pages) >= 400 for h in web.hosts)
