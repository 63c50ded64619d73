"""Trap rules: URL limits, query explosion tracking, host budgets, soft-404 signatures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from streamcrawl_core.traps import (
    SOFT404_PROBE_PREFIX,
    HostBudget,
    QueryParamTracker,
    TrapConfig,
    check_url,
    is_soft404,
    looks_soft404,
    soft404_echoes,
    soft404_probe_path,
    soft404_signature,
)

CFG = TrapConfig()


class TestCheckUrl:
    def test_normal_url_passes(self) -> None:
        assert check_url("https://e.com/2024/01/01/post?id=3&page=2", 3) is None

    def test_length_limit_boundary(self) -> None:
        base = "https://e.com/"
        ok = base + "x" * (CFG.max_url_length - len(base))
        assert check_url(ok, 0) is None
        assert check_url(ok + "y", 0) == "too_long"

    def test_depth_limit_boundary(self) -> None:
        assert check_url("https://e.com/", CFG.max_depth) is None
        assert check_url("https://e.com/", CFG.max_depth + 1) == "too_deep"

    def test_repeated_segments(self) -> None:
        assert check_url("https://e.com/a/b/a/b", 1) is None  # twice is fine
        assert check_url("https://e.com/a/b/a/b/a/b", 1) == "repeated_segment"
        assert check_url("https://e.com/x/%61/a/y/a", 1) == "repeated_segment"  # decoded
        assert check_url("https://e.com/A/a/A/b", 1) is None  # case-sensitive
        assert check_url("https://e.com//////", 1) is None  # empty segments do not count

    def test_query_param_count(self) -> None:
        q = "&".join(f"p{i}=1" for i in range(CFG.max_query_params))
        assert check_url(f"https://e.com/?{q}", 0) is None
        assert check_url(f"https://e.com/?{q}&extra=", 0) == "query_explosion"

    def test_malformed_and_bad_depth(self) -> None:
        assert check_url("http://[::1/x", 0) == "malformed"
        with pytest.raises(ValueError):
            check_url("https://e.com/", -1)

    def test_custom_config(self) -> None:
        cfg = TrapConfig(max_url_length=30, max_depth=2, max_repeated_segment=2, max_query_params=1)
        assert check_url("https://e.com/a/a", 0, cfg) == "repeated_segment"
        assert check_url("https://e.com/?a=1&b=2", 0, cfg) == "query_explosion"
        assert check_url("https://e.com/", 3, cfg) == "too_deep"
        with pytest.raises(ValueError):
            TrapConfig(max_depth=0)
        with pytest.raises(ValueError):
            TrapConfig(max_repeated_segment=1)

    @given(url=st.text(max_size=300), depth=st.integers(0, 30))
    def test_never_raises_on_any_text(self, url: str, depth: int) -> None:
        assert check_url(url, depth) in (None, "too_long", "too_deep", "repeated_segment",
                                         "query_explosion", "malformed")


class TestQueryParamTracker:
    def test_calendar_explodes_after_variant_limit(self) -> None:
        cfg = TrapConfig(max_param_value_variants=5)
        t = QueryParamTracker(cfg)
        verdicts = [t.observe("cal.com", f"https://cal.com/cal?month={m}") for m in range(8)]
        assert verdicts == [None] * 5 + ["query_explosion"] * 3
        assert t.exploded("cal.com") == ("month",)
        assert t.observe("other.com", "https://other.com/cal?month=99") is None  # per host

    def test_known_values_stay_allowed_until_explosion(self) -> None:
        t = QueryParamTracker(TrapConfig(max_param_value_variants=2))
        assert t.observe("h", "https://h/?a=1") is None
        assert t.observe("h", "https://h/?a=2") is None
        assert t.observe("h", "https://h/?a=1") is None  # seen before
        assert t.observe("h", "https://h/?a=3") == "query_explosion"

    def test_memory_bounds(self) -> None:
        cfg = TrapConfig(max_tracked_hosts=3, max_params_per_host=2, max_param_value_variants=4)
        t = QueryParamTracker(cfg)
        for i in range(10):
            t.observe(f"h{i}", f"https://h{i}/?a=1")
        assert len(t) == 3
        assert t.observe("h9", "https://h9/?b=1&c=1&d=1") is None
        internal = t._hosts["h9"]
        assert set(internal) == {"a", "b"}  # c and d not tracked beyond the name limit
        for v in range(10):
            t.observe("h9", f"https://h9/?a={v}")
        assert internal["a"] is None  # values dropped once exploded

    def test_lru_keeps_recent_hosts(self) -> None:
        t = QueryParamTracker(TrapConfig(max_tracked_hosts=2))
        t.observe("a", "https://a/?x=1")
        t.observe("b", "https://b/?x=1")
        t.observe("a", "https://a/?x=2")
        t.observe("c", "https://c/?x=1")
        assert set(t._hosts) == {"a", "c"}

    def test_no_query_and_malformed(self) -> None:
        t = QueryParamTracker()
        assert t.observe("h", "https://h/path") is None
        assert t.observe("h", "http://[::1/?a=1") == "malformed"
        assert len(t) == 0 and t.exploded("h") == ()


class TestHostBudget:
    def test_budget_per_cycle(self) -> None:
        b = HostBudget(TrapConfig(host_page_budget=3))
        assert [b.try_consume("h", 1) for _ in range(4)] == [True, True, True, False]
        assert b.used("h", 1) == 3
        assert b.try_consume("h", 2)  # new cycle resets
        assert b.used("h", 1) == 0 and b.used("h", 2) == 1
        assert b.try_consume("other", 1)

    def test_raised_budget_and_forget(self) -> None:
        b = HostBudget(TrapConfig(host_page_budget=1))
        b.set_budget("valuable", 3)
        assert sum(b.try_consume("valuable", 0) for _ in range(5)) == 3
        assert b.budget("plain") == 1
        b.try_consume("plain", 5)
        assert b.forget_before(5) == 1
        assert b.used("plain", 5) == 1
        with pytest.raises(ValueError):
            b.set_budget("x", -1)
        b.set_budget("blocked", 0)
        assert not b.try_consume("blocked", 0)


class TestSoft404:
    PAGE = (
        "<html><head><title>Not found</title><script>var t=1712345;</script></head>"
        "<body><h1>Sorry!</h1><p>The page {path} does not exist. Request id {rid}.</p></body></html>"
    )

    def test_same_template_with_different_path_and_ids_matches(self) -> None:
        probe = soft404_signature(self.PAGE.format(path="/zq81kx9", rid=111), ["/zq81kx9", "zq81kx9"])
        page = soft404_signature(self.PAGE.format(path="/docs/intro", rid=98765), ["/docs/intro", "intro"])
        assert is_soft404(page, probe)

    def test_percent_encoded_echo_removed(self) -> None:
        probe = soft404_signature(self.PAGE.format(path="/a b", rid=1), ["/a%20b"])
        page = soft404_signature(self.PAGE.format(path="/zz", rid=2), ["/zz"])
        assert probe == page

    def test_real_page_differs(self) -> None:
        probe = soft404_signature(self.PAGE.format(path="/zq81kx9", rid=1), ["/zq81kx9"])
        real = soft404_signature("<html><body><h1>Intro</h1><p>Welcome to the docs.</p></body></html>")
        assert not is_soft404(real, probe)

    def test_host_with_real_404_has_no_signature(self) -> None:
        assert not is_soft404(soft404_signature("anything"), None)

    def test_signature_is_64_bit_and_deterministic(self) -> None:
        s = soft404_signature("Hello   World")
        assert s == soft404_signature("hello world") and 0 <= s < 2**64

    @given(st.text(max_size=500), st.lists(st.text(max_size=10), max_size=3))
    def test_never_raises(self, text: str, echoed: list[str]) -> None:
        assert 0 <= soft404_signature(text, echoed) < 2**64

    def test_probe_path(self) -> None:
        path = soft404_probe_path("0123456789abcdef")
        assert path == "/streamcrawl-probe-0123456789abcdef.html" and path.startswith(SOFT404_PROBE_PREFIX)
        for bad in ("", "a/b", "../x", "a b"):
            with pytest.raises(ValueError):
                soft404_probe_path(bad)

    def test_echoes(self) -> None:
        assert soft404_echoes("/docs/intro.html?x=1") == ["/docs/intro.html?x=1", "/docs/intro.html",
                                                          "intro.html"]
        assert soft404_echoes("/a/page") == ["/a/page"]  # a bare word may be part of the template
        assert soft404_echoes("/") == ["/"]

    def test_probe_and_page_echoes_give_the_same_signature(self) -> None:
        probe_path = soft404_probe_path("9f8e7d6c5b4a3210")
        probe = soft404_signature(self.PAGE.format(path=probe_path, rid=1), soft404_echoes(probe_path))
        page = soft404_signature(self.PAGE.format(path="/missing/page.html", rid=2),
                                 soft404_echoes("/missing/page.html"))
        assert is_soft404(page, probe)
        # a path whose last segment is a word of the template itself
        page = soft404_signature(self.PAGE.format(path="/page", rid=3), soft404_echoes("/page"))
        assert is_soft404(page, probe)

    def test_set_used_seeds_a_count_and_forget_drops_it(self) -> None:
        b = HostBudget(TrapConfig(host_page_budget=3))
        b.set_used("h", 7, 2)
        assert b.try_consume("h", 7) and not b.try_consume("h", 7)
        b.set_used("h", 8, 1)  # another cycle replaces the counter
        assert b.used("h", 8) == 1 and b.used("h", 7) == 0
        b.forget("h")
        b.forget("never-seen")
        assert b.used("h", 8) == 0
        with pytest.raises(ValueError):
            b.set_used("h", 8, -1)


class TestLooksSoft404:
    """Whether a page is worth its host's probe: what "not found" pages say, where they say it."""

    @pytest.mark.parametrize("html", [
        "<html><head><title>Page not found</title></head><body><p>Sorry.</p></body></html>",
        "<html><head><title>Acme Corp</title></head><body><nav>Home Shop</nav><h1>Oops!</h1></body></html>",
        "<html><head><title>Acme</title></head><body><h1>Acme</h1><p>We couldn\u2019t find that page.</p>",
        "<html><body><H2 class='x'>Error 404</H2></body></html>",  # upper-case markup
        "<html><body><main><p>The page you requested does not exist.</p></main></body></html>",  # no heading
        "<title>Seite nicht gefunden</title>",
        "<title>Page introuvable</title>",
        "<h1>Página no encontrada</h1>",
        "<h1>Страница не найдена</h1>",
        "<p>お探しのページは見つかりません</p>",
        "<title>页面不存在</title>",
        "Not Found",  # a text/plain answer
    ])
    def test_not_found_pages_look_like_it(self, html: str) -> None:
        assert looks_soft404(html)

    def test_the_message_after_the_first_heading_of_a_long_template(self) -> None:
        nav = "<ul>" + "".join(f"<li><a href='/s/{i}'>Section {i}</a></li>" for i in range(300)) + "</ul>"
        page = f"<html><head><title>Acme</title></head><body>{nav}<h1>Acme</h1><p>Nothing here, sorry.</p>"
        assert looks_soft404(page + "<footer>" + "x " * 5000 + "</footer></body></html>")

    @pytest.mark.parametrize("html", [
        "<html><head><title>Page 3</title></head><body><h1>Page 3</h1><p>stream kafka offset</p></body></html>",
        "<html><body><h1>Home</h1><p>Welcome.</p></body></html>",
        "<html><body><p>Errors and retries: a terror of a chapter.</p></body></html>",  # words, not pieces
        "<html><head><title",  # cut short inside a tag
        "",
    ])
    def test_ordinary_pages_do_not(self, html: str) -> None:
        assert not looks_soft404(html)

    def test_words_deep_in_an_article_are_not_read(self) -> None:
        """Only the title, the headings and the text right after the first heading: an article that
        mentions "not found" in its 20th paragraph is no reason to probe its host."""
        body = "<p>Streams and partitions.</p>" * 200 + "<p>The key was not found in the table.</p>"
        assert not looks_soft404(f"<html><head><title>Kafka</title></head><body><h1>Kafka</h1>{body}</body></html>")

    def test_a_template_that_says_nothing_of_the_kind_is_missed(self) -> None:
        """The known limit: a soft-404 page in words the list does not know gives no reason to probe."""
        assert not looks_soft404("<html><head><title>Acme</title></head><body><h1>Hmm.</h1>"
                                 "<p>Try the search box.</p></body></html>")

    def test_the_synthetic_webs_soft404_template_looks_like_it(self) -> None:
        from streamcrawl_synthweb.pages import render_soft404

        assert looks_soft404(render_soft404().body.decode())
