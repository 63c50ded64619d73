"""The live HTTP + DNS servers on loopback, driven with httpx and dnspython."""

from __future__ import annotations

import email.utils
import gzip
import time

import brotli
import dns.message
import dns.query
import dns.rcode
import dns.resolver
import httpx
import pytest
from streamcrawl_synthweb import load_log
from streamcrawl_synthweb.server import wire_style


def test_dns_answers(live):
    host = live.host("normal")
    assert live.ip_of(host) == host.ip
    with pytest.raises(dns.resolver.NXDOMAIN):
        live.resolver.resolve("nope.synth.test", "A")
    with pytest.raises(dns.resolver.NXDOMAIN):
        live.resolver.resolve(live.host("dns_nxdomain").name, "A")
    q = dns.message.make_query(live.host("dns_servfail").name, "A")
    assert dns.query.udp(q, "127.0.0.1", port=live.dns.port, timeout=2).rcode() == dns.rcode.SERVFAIL
    q = dns.message.make_query(host.name, "A")
    r = dns.query.tcp(q, "127.0.0.1", port=live.dns.port, timeout=2)
    assert r.answer[0][0].address == host.ip and r.answer[0].ttl == 30
    r = dns.query.udp(dns.message.make_query(host.name, "AAAA"), "127.0.0.1", port=live.dns.port, timeout=2)
    assert r.rcode() == dns.rcode.NOERROR and not r.answer and r.authority  # NODATA + SOA


def test_robots_variants(live):
    assert live.get("normal", "/robots.txt").text == "User-agent: *\nDisallow:\n"
    assert "Disallow: /private/" in live.get("robots_disallow", "/robots.txt").text
    assert live.get("robots_404", "/robots.txt").status_code == 404
    assert live.get("robots_500", "/robots.txt").status_code == 500
    assert live.get("robots_503", "/robots.txt").status_code == 503
    r = live.get("robots_redirect", "/robots.txt")
    assert r.status_code == 301 and r.headers["Location"] == "/robots-real.txt"
    assert "Disallow: /private/" in live.get("robots_redirect", "/robots-real.txt").text
    assert "Crawl-delay: 2" in live.get("robots_crawl_delay", "/robots.txt").text
    text = live.get("robots_wildcard", "/robots.txt").text
    assert "Disallow: /*.pdf$" in text and "Allow: /private/public-*" in text
    assert "User-agent: streamcrawl" in live.get("robots_ua_group", "/robots.txt").text
    with pytest.raises(httpx.ReadTimeout):
        live.get("robots_timeout", "/robots.txt", timeout=0.3)


def test_conditional_get_head_and_compression(live):
    r = live.get("normal", "/p/1.html")
    etag, modified = r.headers["ETag"], r.headers["Last-Modified"]
    assert r.status_code == 200 and etag.startswith('"') and "W/" not in etag
    assert live.get("normal", "/p/1.html", headers={"If-None-Match": etag}).status_code == 304
    assert live.get("normal", "/p/1.html", headers={"If-Modified-Since": modified}).status_code == 304
    assert live.get("normal", "/p/1.html", headers={"If-None-Match": '"other"'}).status_code == 200
    g = live.get("normal", "/p/1.html", headers={"Accept-Encoding": "gzip"})
    assert g.headers["Content-Encoding"] == "gzip" and g.text == r.text
    assert live.get("normal", "/p/1.html", headers={"If-None-Match": g.headers["ETag"]}).status_code == 304
    host = live.host("normal")
    with httpx.stream("GET", live.url(host, "/p/1.html"), headers={"Accept-Encoding": "gzip"}) as raw:
        assert gzip.decompress(b"".join(raw.iter_raw())) == r.content  # the wire bytes are gzip
    prefer_gzip, _chunked = wire_style(host.name)
    b = live.get("normal", "/p/1.html", headers={"Accept-Encoding": "br, gzip"})
    assert b.headers["Content-Encoding"] == ("gzip" if prefer_gzip else "br") and b.text == r.text
    h = live.get("normal", "/p/1.html", method="HEAD")
    assert h.status_code == 200 and h.content == b"" and h.headers["ETag"] == etag


def _raw_get(live, host, path: str, accept: str) -> tuple[httpx.Response, bytes]:
    headers = {"Host": f"{host.name}:{live.web.port}", "Accept-Encoding": accept}
    with httpx.stream("GET", live.url(host, path), headers=headers, timeout=5) as resp:
        return resp, b"".join(resp.iter_raw())


def test_hosts_differ_in_coding_and_framing(live):
    """A crawler accepting both codings meets br with a Content-Length, gzip with one, and gzip chunked."""
    kinds = ("normal", "directives", "dup_near", "robots_wildcard", "robots_disallow", "robots_crawl_delay")
    styles = {wire_style(h.name): h for kind in kinds for h in live.web.hosts_of_kind(kind)}
    assert set(styles) == {(False, False), (True, False), (True, True)}
    for (prefer_gzip, chunked), host in styles.items():
        plain, plain_body = _raw_get(live, host, "/p/1.html", "identity")
        assert "Content-Encoding" not in plain.headers and plain.headers["Content-Length"] == str(len(plain_body))
        resp, raw = _raw_get(live, host, "/p/1.html", "gzip, br")
        assert resp.headers["Content-Encoding"] == ("gzip" if prefer_gzip else "br")
        assert ("Transfer-Encoding" in resp.headers) == chunked
        assert ("Content-Length" in resp.headers) == (not chunked)
        decoded = gzip.decompress(raw) if prefer_gzip else brotli.decompress(raw)
        assert decoded == plain_body


def test_rate_limit_retry_after(live):
    n = live.web.profile.ratelimit_first_n
    for _ in range(n):
        r = live.get("ratelimit_seconds", "/")
        assert r.status_code == 429 and r.headers["Retry-After"] == str(live.web.profile.retry_after_s)
    assert live.get("ratelimit_seconds", "/").status_code == 200
    assert live.get("ratelimit_date", "/robots.txt").status_code == 200  # robots.txt is exempt
    r = live.get("ratelimit_date", "/")
    assert r.status_code == 429
    assert email.utils.parsedate_to_datetime(r.headers["Retry-After"]).timestamp() > time.time()


def test_redirects(live):
    host = live.host("redirects")
    with httpx.Client(max_redirects=5, follow_redirects=True, headers={"Host": host.name}) as client:
        r = client.get(live.url(host, "/chain/1.html"))
        assert r.status_code == 200 and len(r.history) == 5 and r.url.path == "/p/2.html"
        with pytest.raises(httpx.TooManyRedirects):
            client.get(live.url(host, "/longchain/1.html"))
        with pytest.raises(httpx.TooManyRedirects):
            client.get(live.url(host, "/loop/a.html"))
    assert live.get("redirects", "/moved/1.html").status_code == 307
    assert live.get("redirects", "/perm/1.html").status_code == 308


def test_charsets_and_types(live):
    r = live.get("charsets", "/cs/latin1.html")
    assert r.headers["Content-Type"] == "text/html; charset=ISO-8859-1" and "Zürich" in r.text
    r = live.get("charsets", "/cs/sjis.html")
    assert b'<meta charset="Shift_JIS">' in r.content and "東京" in r.content.decode("shift_jis")
    r = live.get("charsets", "/cs/cp1251.html")
    assert b"charset=windows-1251" in r.content and "Москва" in r.content.decode("windows-1251")
    r = live.get("charsets", "/cs/none.html")
    assert r.headers["Content-Type"] == "text/html" and b"charset" not in r.content
    assert live.get("nonhtml", "/files/report.pdf").content.startswith(b"%PDF-")
    assert live.get("nonhtml", "/img/logo.png").headers["Content-Type"] == "image/png"
    assert live.get("nonhtml", "/api/data.json").json()["items"]
    assert live.get("directives", "/xrobots.html").headers["X-Robots-Tag"] == "noindex, nofollow"
    assert '<base href="/p/">' in live.get("directives", "/base/index.html").text
    assert live.get("errors_5xx", "/err/502.html").status_code == 502


def test_traps(live):
    assert 'href="/cal/2027/01/"' in live.get("trap_calendar", "/cal/2026/12/").text
    assert 'href="a/"' in live.get("trap_repeat", "/r/a/a/a/").text
    soft = live.get("trap_soft404", "/no/such/page.html")
    assert soft.status_code == 200 and "not found" in soft.text
    first, second = (live.get("trap_session", "/p/1.html?sid=x").text for _ in range(2))
    assert "?sid=" in first and first != second and 'rel="canonical"' in first
    assert live.get("normal", "/no/such/page.html").status_code == 404


def test_oversized_body_is_streamed(live):
    host = live.host("oversized")
    headers = {"Host": host.name}
    with httpx.stream("GET", live.url(host, "/big.html"), headers=headers, timeout=10) as r:
        assert "Content-Length" not in r.headers
        total = sum(len(chunk) for chunk in r.iter_raw())
    assert total == live.web.profile.big_body_bytes > 10 * 1024 * 1024


def test_content_changes_over_time(live):
    period = live.web.profile.change_period_s

    def version(t: float) -> int:
        return int((t - live.http.start_time) // period)

    for _ in range(5):
        # Start right after a version boundary so the two reads below share a version; on a loaded machine
        # they may still straddle the next one, which the clock readings show: then try again.
        elapsed = time.time() - live.http.start_time
        time.sleep(period - elapsed % period + 0.05)
        before = time.time()
        r1 = live.get("changing", "/p/1.html")
        etag = r1.headers["ETag"]
        again = live.get("changing", "/p/1.html", headers={"If-None-Match": etag})
        if version(time.time()) == version(before):
            break
    assert again.status_code == 304
    time.sleep(period)
    r2 = live.get("changing", "/p/1.html", headers={"If-None-Match": etag})
    assert r2.status_code == 200 and r2.headers["ETag"] != etag and "Revision" in r2.text
    assert r2.text != r1.text


def test_request_log(live):
    live.get("normal", "/p/2.html?x=1", headers={"If-None-Match": '"abc"', "User-Agent": "logcheck/1"})
    live.flush_log()
    entries = load_log(live.log_path)
    mine = [x for x in entries if x.ua == "logcheck/1"]
    assert len(mine) == 1
    entry = mine[0]
    host = live.host("normal")
    assert (entry.host, entry.ip, entry.path, entry.method) == (host.name, host.ip, "/p/2.html?x=1", "GET")
    assert entry.status == 200 and entry.if_none_match == '"abc"' and entry.bytes > 0
    assert 0 <= entry.duration < 5 and entry.start > live.http.start_time
    assert any(x.path == "/robots.txt" for x in entries)


def test_request_log_brackets_the_last_write(live):
    """Every completed response is stamped just before its last bytes go out and again after: the judge
    reads the earlier stamp. A slow host's stamp comes after its delay, so it bounds when bytes left."""
    ua = "bracket/1"
    r = live.get("normal", "/p/3.html", headers={"User-Agent": ua})
    etag = r.headers["ETag"]
    live.get("normal", "/p/3.html", headers={"User-Agent": ua, "If-None-Match": etag})  # 304, head only
    live.get("slow", "/p/1.html", headers={"User-Agent": ua})
    host = live.host("oversized")
    with httpx.stream("GET", live.url(host, "/big.html"), headers={"Host": host.name, "User-Agent": ua},
                      timeout=10) as s:
        for _ in s.iter_raw():
            pass
    live.flush_log()
    mine = [x for x in load_log(live.log_path) if x.ua == ua]
    assert sorted(x.status for x in mine) == [200, 200, 200, 304]
    for x in mine:
        assert x.last_write is not None and x.start <= x.last_write <= x.end, x
        assert x.sent == x.last_write
    slow = next(x for x in mine if x.host == live.host("slow").name)
    lo, _hi = live.web.profile.slow_delay_s
    assert slow.last_write - slow.start >= lo * 0.99  # stamped after the host's delay, not before it


def test_client_gone_mid_delay_ends_the_logged_exchange(live):
    """A client that hangs up while the host is still "thinking" (robots_timeout hangs 1.5 s here) ends the
    exchange: the log says aborted, with its end at the hang-up, not after the delay nobody awaited."""
    ua = "hangup/1"
    with pytest.raises(httpx.ReadTimeout):
        live.get("robots_timeout", "/robots.txt", headers={"User-Agent": ua}, timeout=0.3)
    hung_up = time.time()
    time.sleep(live.web.profile.robots_timeout_s + 0.3)  # the delay would be over by now
    live.flush_log()
    [entry] = [x for x in load_log(live.log_path) if x.ua == ua]
    assert entry.aborted and entry.bytes == 0 and entry.last_write is None
    assert entry.end <= hung_up + 0.2 and entry.duration < live.web.profile.robots_timeout_s - 0.5
