"""Near-duplicate signatures on main content (issue 11): the parser with its wired extractor
(streamcrawl_parser.extract, trafilatura) on the synthetic web's pages. A site of 50 pages sharing a
~1,500-word template with 50-word bodies gives no pair within 3 bits (on all visible text, as before,
most pairs merge); the generator's near duplicates (a one-word edit in a long article) stay within 3 bits;
thin pages get no signature."""

from __future__ import annotations

import itertools
import time

import pytest
from streamcrawl_contracts.messages import FetchResult
from streamcrawl_core.simhash import hamming
from streamcrawl_core.textsig import MIN_DISTINCT_SHINGLES, distinct_shingles, near_duplicate_signature
from streamcrawl_parser.extract import main_text
from streamcrawl_parser.handler import MainText, build_page
from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.model import PROFILES, TEMPLATE_PAGES, SynthWeb

WEB = generate(200, 11, PROFILES["fast"], port=8480)  # the e2e crawl's web


def _sig(web: SynthWeb, host_kind: str, path: str, extractor: MainText | None, index: int = 0) -> int | None:
    from streamcrawl_synthweb.pages import render_page

    host = web.hosts_of_kind(host_kind)[index]
    rendered = render_page(web, host, host.pages[path])
    res = FetchResult(url=web.url(host, path), host=host.name, url_fp=1, lease_id="L", outcome="fetched",
                      started_at=time.time(), status=200, content_type=rendered.content_type, content_hash="h",
                      storage_key="k")
    page, _ = build_page(res, rendered.body, main_text=extractor)
    return page.simhash


def _template_paths() -> list[str]:
    return sorted(WEB.hosts_of_kind("template_heavy")[0].pages)


def test_the_template_site_has_fifty_pages_of_1500_shared_words() -> None:
    from streamcrawl_synthweb.pages import render_page

    host = WEB.hosts_of_kind("template_heavy")[0]
    assert len(host.pages) == TEMPLATE_PAGES == 50
    text = main_text(render_page(WEB, host, host.pages["/p/7.html"]).body.decode())
    assert 45 <= len(text.split()) <= 80  # the article and its links, none of the template


def test_no_template_page_is_a_near_duplicate_of_another() -> None:
    sigs = [_sig(WEB, "template_heavy", p, main_text) for p in _template_paths()]
    assert all(s is not None for s in sigs)  # 50-word bodies are candidates ...
    close = [(a, b) for a, b in itertools.combinations(range(len(sigs)), 2) if hamming(sigs[a], sigs[b]) <= 3]
    assert close == []  # ... and none is within 3 bits of another (1,225 pairs)


def test_on_all_visible_text_the_template_site_merges() -> None:
    """The same pages fingerprinted on all visible text (the old way): most pairs fall within 3 bits."""
    sigs = [_sig(WEB, "template_heavy", p, None) for p in _template_paths()]
    close = sum(hamming(a, b) <= 3 for a, b in itertools.combinations(sigs, 2))  # type: ignore[arg-type]
    assert close > 100


@pytest.mark.parametrize(("index", "k"), [(i, k) for i in range(len(WEB.hosts_of_kind("dup_near"))) for k in (1, 2)])
def test_the_near_duplicates_are_still_within_three_bits(index: int, k: int) -> None:
    a = _sig(WEB, "dup_near", f"/p/{k}.html", main_text, index)
    b = _sig(WEB, "dup_near", f"/print/{k}.html", main_text, index)
    assert a is not None and b is not None and hamming(a, b) <= 3


def test_thin_text_gets_no_signature() -> None:
    assert near_duplicate_signature("") is None
    assert near_duplicate_signature("Loading, please wait.") is None
    words = " ".join(f"w{i}x" for i in range(MIN_DISTINCT_SHINGLES + 2))  # n words, n - 2 shingles
    assert near_duplicate_signature(words.rsplit(" ", 1)[0]) is None  # one shingle short
    assert near_duplicate_signature(words) is not None
    assert near_duplicate_signature(" ".join(["same words again"] * 50)) is None  # 3 distinct shingles
    assert distinct_shingles("a b c d 1 2 3 e") == 3  # numbers are ignored, as SimHash ignores them


def test_an_extractor_failure_is_no_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import trafilatura

    def boom(*_a: object, **_k: object) -> str:
        raise RecursionError("hostile page")

    monkeypatch.setattr(trafilatura, "extract", boom)
    assert main_text("<html><body><p>x</p></body></html>") == ""
