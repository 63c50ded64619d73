"""The blocklist rule every service shares (streamcrawl_core.blocklist)."""

from __future__ import annotations

import fnmatch

import pytest
from streamcrawl_core.blocklist import Blocklist, InvalidHost, canonical_host, canonical_pattern


def test_exact_suffix_and_glob() -> None:
    bl = Blocklist([canonical_pattern(".Example.com"), canonical_pattern("solo.org"),
                    canonical_pattern("*.ads.net"), canonical_pattern("tracker-??.io")])
    assert bl.blocked_by("example.com") == ".example.com"
    assert bl.blocked_by("a.b.example.com") == ".example.com"
    assert bl.blocked_by("badexample.com") is None
    assert bl.blocked_by("solo.org") == "solo.org"
    assert bl.blocked_by("x.solo.org") is None
    assert bl.blocked_by("x.ads.net") == "*.ads.net"
    assert bl.blocked_by("a.b.ads.net") == "*.ads.net"  # '*' spans dots, as fnmatch's does
    assert bl.blocked_by("ads.net") is None  # the glob needs the leading label
    assert bl.blocked_by("tracker-01.io") == "tracker-??.io"
    assert bl.blocked_by("tracker-001.io") is None
    assert "x.ads.net" in bl and "ok.org" not in bl
    assert len(bl) == 4


def test_exact_wins_over_suffix_over_glob() -> None:
    bl = Blocklist(["*.example.com", ".example.com", "a.example.com"])
    assert bl.blocked_by("a.example.com") == "a.example.com"
    assert bl.blocked_by("b.example.com") == ".example.com"


@pytest.mark.parametrize("host", ["x.ads.net", "ads.net", "a.b.ads.net", "xads.net", "tracker-01.io", "e.com"])
def test_globs_match_like_the_fnmatch_rule_dedup_used(host: str) -> None:
    """dedup matched globs with fnmatch.fnmatchcase; the shared matcher gives the same answers for globs."""
    for pattern in ("*.ads.net", "*ads.net", "tracker-??.io", "e*.com"):
        assert (Blocklist([pattern]).blocked_by(host) == pattern) == fnmatch.fnmatchcase(host, pattern)


def test_canonical_forms() -> None:
    assert canonical_pattern(" .Example.COM. ") == ".example.com"
    assert canonical_pattern("Bücher.de") == "xn--bcher-kva.de"
    assert canonical_pattern("*.ADS.net.") == "*.ads.net"
    assert canonical_host("[::1]") == "[::1]"
    for bad in ("", ".", "..x.com", "a/b", "x.com:80", "u@x.com", "*", "*.*", "*.bü.de", "a b"):
        with pytest.raises(InvalidHost):
            canonical_pattern(bad)
