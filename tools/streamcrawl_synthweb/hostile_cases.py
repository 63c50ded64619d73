"""The hostile-web corpus: every case, what the server does, and the outcome the crawler must reach.

The corpus is served by ``hostile.py`` (a raw socket HTTP server, a TLS port and a DNS server of its own,
all on loopback) and run through the real fetcher and parser by tests/integration/test_hostile_corpus.py.
``markdown()`` renders the table in docs/hostile-corpus.md, so the documented outcome is the tested one.

A case is reached at ``http://<host>:<port><path>``; ``host`` defaults to ``www.hostile.test`` (an A
record to 127.0.0.1). ``outcome`` is the FetchResult outcome; ``parsed`` what the ParsedPage must show
(None: no page reaches the parser); ``then`` a second request to the same host after the first result
(robots.txt cases: the first request fetches robots.txt, the second shows what it meant).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CASES", "Case", "markdown"]


@dataclass(frozen=True)
class Case:
    name: str
    what: str  # what the server (or DNS) does
    outcome: str  # the FetchResult outcome
    expect: str  # the defined outcome, in words (the docs table)
    path: str = ""  # default "/c/<name>"
    host: str = "www.hostile.test"
    scheme: str = "http"
    parsed: dict[str, object] | None = None  # ParsedPage checks: "links" (count), "simhash" (None/any) ...
    truncated: bool | None = None
    then: tuple[str, str] | None = None  # (path, outcome) of a second request to the same host
    robots: bool = False  # robots.txt is not pre-set: the first request fetches it
    tags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def url_path(self) -> str:
        return self.path or f"/c/{self.name}"


_MB = 1024 * 1024
CAP = "10 MiB body cap"


def _c(name: str, what: str, outcome: str, expect: str, **kw: object) -> Case:
    return Case(name, what, outcome, expect, **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    # --- compression bombs: the cap is on decoded bytes ------------------------------------------------
    _c("gzip-bomb", "100 MiB of spaces gzip-compressed (~100 KB on the wire)", "fetched",
       f"truncated at the {CAP}; parsed, no links", truncated=True, parsed={"links": 0}),
    _c("deflate-bomb", "the same as zlib deflate", "fetched", f"truncated at the {CAP}", truncated=True,
       parsed={"links": 0}),
    _c("raw-deflate-bomb", "the same as raw deflate (no zlib header)", "fetched", f"truncated at the {CAP}",
       truncated=True, parsed={"links": 0}),
    _c("brotli-bomb", "100 MiB of spaces brotli-compressed", "fetched", f"truncated at the {CAP}", truncated=True,
       parsed={"links": 0}),
    _c("double-gzip-bomb", "Content-Encoding: gzip, gzip of 100 MiB", "fetched", f"truncated at the {CAP}",
       truncated=True, parsed={"links": 0}),
    _c("bad-gzip", "Content-Encoding: gzip over bytes that are not gzip", "network_error",
       "decoding error: no page, retried like a network error"),
    _c("unknown-encoding", "Content-Encoding: x-unknown over plain HTML", "fetched",
       "the bytes are taken as they are (identity) and parsed", parsed={"links": 1}),
    # --- bodies --------------------------------------------------------------------------------------
    _c("slow-drip", "200 head, then one body byte every 0.5 s, forever", "network_error",
       "the wall-clock limit (total_timeout_s) ends it; nothing stored"),
    _c("slow-head", "the status line one byte every 0.5 s", "network_error", "read timeout"),
    _c("infinite-chunked", "chunked body that never ends, as fast as it can", "fetched",
       f"truncated at the {CAP}", truncated=True, parsed={"links": 1}),
    _c("slow-infinite-chunked", "chunked body, 1 KiB every 0.1 s, never ending", "network_error",
       "the wall-clock limit ends it"),
    _c("15mb-page", "a 15 MB HTML page with Content-Length", "fetched", f"truncated at the {CAP}; parsed",
       truncated=True, parsed={"links": 1}),
    _c("short-body", "Content-Length: 1000, 10 bytes, then close", "network_error", "incomplete body"),
    _c("long-body", "Content-Length: 20 and Connection: close, then 5,000 more bytes", "network_error",
       "data after the announced end of a closing response: refused (no page)"),
    _c("close-delimited", "HTTP/1.0, no Content-Length, body until close", "fetched", "the whole body",
       parsed={"links": 1}),
    _c("empty-200", "200 with Content-Length: 0", "fetched", "stored; parsed: no links, no SimHash",
       parsed={"links": 0, "simhash": None}),
    _c("no-content-type", "200 HTML with no Content-Type", "fetched", "parsed as non-HTML: no links",
       parsed={"links": 0}),
    # --- heads -----------------------------------------------------------------------------------------
    _c("header-70k", "one 70 KiB header", "fetched", "accepted (heads up to 100 KiB, as h11 did)",
       parsed={"links": 1}),
    _c("header-200k", "one 200 KiB header", "network_error", "head too large: refused"),
    _c("headers-10000", "10,000 header lines", "network_error", "more than 1,024 fields: refused"),
    _c("cookie-flood", "1,000 Set-Cookie headers", "fetched", "fetched; no cookie is kept (no cookie jar)",
       parsed={"links": 1}),
    _c("nul-in-header", "a header value with a NUL byte", "network_error", "malformed head: refused"),
    _c("http09", "HTTP/0.9: the body with no status line", "network_error", "not HTTP/1.x: refused"),
    _c("garbage-status", "status line 'HTTP/1.1 abc OK'", "network_error", "malformed status line: refused"),
    _c("status-999", "status 999", "http_error", "an unknown status: HTTP error, not retried"),
    _c("informational-first", "100 Continue, then 200", "fetched", "the final 200 is the answer",
       parsed={"links": 1}),
    _c("reset-mid-body", "half the announced body, then a TCP reset", "network_error", "no page; retried"),
    _c("close-no-answer", "the connection closes without an answer", "network_error", "no page; retried"),
    # --- TLS ---------------------------------------------------------------------------------------------
    _c("tls-self-signed", "https with a self-signed certificate for another name", "network_error",
       "certificate verification fails: no request is sent", scheme="https", host="tls.hostile.test"),
    _c("tls-on-plain-port", "https URL to the plain HTTP port", "network_error", "TLS handshake fails",
       scheme="https", host="plain-tls.hostile.test"),
    _c("plain-on-tls-port", "http URL to the TLS port", "network_error", "garbage answer: refused",
       host="tls-port.hostile.test"),
    # --- charsets and content -----------------------------------------------------------------------------
    _c("invalid-charset", "charset=no-such-charset", "fetched", "charset sniffed instead; parsed",
       parsed={"links": 1}),
    _c("lying-charset", "says utf-8, body is Shift_JIS", "fetched", "decoded with replacement characters",
       parsed={"links": 1}),
    _c("utf16-lie", "says utf-16, body is ASCII", "fetched", "decoded without an exception; parsed",
       parsed={}),
    _c("rot13-charset", "charset=rot13 (a codec, not a text encoding)", "fetched", "ignored; parsed",
       parsed={"links": 1}),
    _c("binary-as-html", "1 MB of random bytes as text/html", "fetched", "parsed without an exception",
       parsed={}),
    _c("png-as-html", "a PNG image as text/html", "fetched", "parsed without an exception", parsed={}),
    _c("deep-nesting", "100,000 nested <div>s", "fetched", "libxml2's depth limit: parsed, no crash",
       parsed={}),
    _c("100k-links", "100,000 distinct links on one page", "fetched", "the first 1,000 links kept",
       parsed={"links": 1000}),
    _c("huge-attribute", "a 1 MB href and one normal link", "fetched", "the giant href dropped",
       parsed={"links": 1}),
    _c("control-char-links", "links with NUL, tab, newline and DEL in them", "fetched",
       "control characters stripped or links dropped, never passed on raw", parsed={"no_control": True}),
    _c("base-javascript", "<base href='javascript:alert(1)'> then a relative link", "fetched",
       "the bad base is ignored: the link resolves against the page", parsed={"link_host": "www.hostile.test"}),
    _c("base-other-host", "<base href='http://elsewhere.hostile.test/'> then a relative link", "fetched",
       "resolved against the base (as browsers do)", parsed={"link_host": "elsewhere.hostile.test"}),
    _c("base-twice", "two <base> elements", "fetched", "only the first counts",
       parsed={"link_host": "first.hostile.test"}),
    _c("meta-refresh-loop", "<meta http-equiv=refresh content='0;url=...'> to itself", "fetched",
       "meta refresh is not followed (not a link): no loop", parsed={"links": 0}),
    _c("idn-links", "links to an IDN homograph (Cyrillic а in аpple) and to invalid punycode", "fetched",
       "the homograph kept in punycode form (its own host); invalid punycode dropped", parsed={"idn": True}),
    # --- redirects -----------------------------------------------------------------------------------------
    _c("redirect-file", "302 to file:///etc/passwd", "redirect_refused", "refused, recorded"),
    _c("redirect-metadata", "302 to http://169.254.169.254/latest/meta-data/", "redirect",
       "queued as a URL of its own (the guard refuses it when fetched: see metadata-dns)"),
    _c("redirect-64k", "302 with a 64 KB Location", "redirect_refused", "too long: refused"),
    _c("retry-after-huge", "429 with Retry-After: 999999999", "http_error", "back-off capped by the frontier"),
    # --- URLs in requests ----------------------------------------------------------------------------------
    _c("64k-url", "a 64 KB URL in the request", "http_error", "malformed url: no request"),
    _c("control-char-url", "a URL with a raw newline and NUL", "http_error", "malformed url: no request"),
    # --- DNS -------------------------------------------------------------------------------------------
    _c("dns-timeout", "the DNS server never answers for the name", "network_error",
       "DNS timeout: retried like a network error", host="slowdns.hostile.test", path="/"),
    _c("cname-loop", "CNAME a → b → a", "dns_error", "no address: the URL ends for the cycle",
       host="loop1.hostile.test", path="/"),
    _c("cname-chain", "three CNAMEs to an A record", "fetched", "resolved through the chain",
       host="chain1.hostile.test", path="/c/ok", parsed={"links": 1}),
    _c("ipv6-only", "AAAA ::1 and no A record", "blocked_address",
       "resolved over AAAA; ::1 is outside the allowed 127.0.0.0/8: refused", host="v6only.hostile.test", path="/"),
    _c("nxdomain", "NXDOMAIN", "dns_error", "the URL ends for the cycle", host="gone.hostile.test", path="/"),
    _c("servfail", "SERVFAIL", "dns_error", "the URL ends for the cycle", host="fail.hostile.test", path="/"),
    _c("garbage-dns", "the DNS answer is not a DNS message", "network_error", "no answer: retried",
       host="garbage.hostile.test", path="/"),
    _c("private-dns", "A record 10.0.0.1", "blocked_address", "refused: private", host="private.hostile.test",
       path="/"),
    _c("metadata-dns", "A record 169.254.169.254", "blocked_address", "refused: cloud metadata",
       host="metadata.hostile.test", path="/"),
    _c("mapped-dns", "AAAA ::ffff:10.0.0.1", "blocked_address", "refused: IPv4-mapped private",
       host="mapped.hostile.test", path="/"),
    _c("idn-host", "a request to the homograph host xn--pple-43d.hostile.test", "fetched",
       "an ordinary host (its punycode name)", host="xn--pple-43d.hostile.test", path="/c/ok", parsed={"links": 1}),
    # --- robots.txt ----------------------------------------------------------------------------------------
    _c("robots-5mb", "a 5 MB robots.txt: 'Disallow: /private/' first, then 5 MB of comments", "robots_fetched",
       "the first 500 KiB are parsed (RFC 9309): /private/ stays disallowed", host="robots-big.hostile.test",
       path="/", robots=True, then=("/private/x", "robots_disallowed")),
    _c("robots-binary", "robots.txt of random binary bytes", "robots_fetched", "no rules: everything allowed",
       host="robots-bin.hostile.test", path="/", robots=True, then=("/private/x", "fetched")),
    _c("robots-bom", "robots.txt starting with a UTF-8 BOM, 'Disallow: /private/'", "robots_fetched",
       "the BOM is skipped: /private/ disallowed", host="robots-bom.hostile.test", path="/", robots=True,
       then=("/private/x", "robots_disallowed")),
    _c("robots-redirect-loop", "robots.txt redirects to itself", "robots_fetched",
       "the loop stops after one hop; a redirect left over counts as unavailable (4xx): everything allowed",
       host="robots-loop.hostile.test", path="/", robots=True, then=("/private/x", "fetched")),
)


def markdown() -> str:
    rows = ["| # | case | what the web does | fetch outcome | defined outcome |", "|---|---|---|---|---|"]
    for i, c in enumerate(CASES, 1):
        outcome = c.outcome + (f", then `{c.then[1]}` for {c.then[0]}" if c.then else "")
        rows.append(f"| {i} | `{c.name}` | {c.what} | `{outcome}` | {c.expect} |")
    return "\n".join(rows)
