"""The redirect rule (streamcrawl_core.redirects): follow with a grown chain, stop at loops, at the 5-hop
limit and at Locations that are not absolute http(s) URLs; http <-> https is an ordinary hop."""

from __future__ import annotations

import pytest
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.redirects import MAX_REDIRECT_HOPS, redirect_verdict

A = "http://a.test/a"
FP = url_fingerprint(A)


def test_a_hop_is_followed_with_this_url_appended_to_the_chain() -> None:
    v = redirect_verdict(A, FP, [7, 8], "/b?x=1#frag")
    assert (v.outcome, v.target, v.chain) == ("redirect", "http://a.test/b?x=1", (7, 8, FP))


@pytest.mark.parametrize(("url", "location", "target"), [
    ("http://a.test/a", "https://a.test/a", "https://a.test/a"),  # same path, other scheme: not a loop
    ("https://a.test/a", "http://a.test/b", "http://a.test/b"),
    ("http://a.test/a", "//cdn.test/x", "http://cdn.test/x"),
])
def test_cross_scheme_and_scheme_relative_hops_are_followed(url: str, location: str, target: str) -> None:
    v = redirect_verdict(url, url_fingerprint(url), [], location)
    assert (v.outcome, v.target) == ("redirect", target)


def test_the_sixth_hop_is_refused() -> None:
    chain: list[int] = []
    url = A
    for hop in range(1, MAX_REDIRECT_HOPS + 1):
        v = redirect_verdict(url, url_fingerprint(url), chain, f"/hop{hop}")
        assert v.outcome == "redirect", hop
        chain, url = list(v.chain), v.target or ""
    assert len(chain) == MAX_REDIRECT_HOPS  # the fifth target is reached ...
    last = redirect_verdict(url, url_fingerprint(url), chain, "/hop6")
    assert last.outcome == "redirect_limit" and last.target == "http://a.test/hop6"  # ... the sixth is not
    assert "more than 5" in (last.reason or "")


@pytest.mark.parametrize("location", ["/a", "http://A.TEST:80/a", "/a#top", "a"])
def test_a_redirect_to_itself_is_a_loop(location: str) -> None:
    assert redirect_verdict(A, FP, [], location).outcome == "redirect_loop"


def test_a_redirect_back_into_the_chain_is_a_loop() -> None:
    b = "http://a.test/b"
    v = redirect_verdict("http://a.test/c", url_fingerprint("http://a.test/c"), [FP, url_fingerprint(b)], b)
    assert v.outcome == "redirect_loop" and v.target == b


@pytest.mark.parametrize("location", ["ftp://a.test/f", "javascript:alert(1)", "data:text/html,x", "file:///etc/passwd",
                                      "mailto:x@a.test", "gopher://a.test/", "http://", "http://exa mple.com/"])
def test_non_http_and_unusable_locations_are_refused(location: str) -> None:
    v = redirect_verdict(A, FP, [], location)
    assert v.outcome == "redirect_refused" and v.target is None and "Location" in (v.reason or "")
