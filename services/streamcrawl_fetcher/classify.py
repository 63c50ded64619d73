"""A page request's HTTP answer → its FetchResult: a 304 (not_modified), a redirect (followed, or stopped at
a loop, the hop limit or a non-HTTP Location), a 2xx (a soft 404 when it matches the host's signature, else
fetched), or an HTTP error (with Retry-After on 429/503). Plus the body-as-text helpers the soft-404 probe
shares.

A fetched body is written to the blob store before its result is emitted; when its stored (gzip) form is
at most the inline cap (`FetchPolicy.inline_body_max_bytes`) it is also carried in the result (`body_gz`)
for the parser. A soft 404's body is not stored. A body that came content-coded (gzip, br...) is also
stored as received, for the WARC writer's response record (`store_wire`), or, when small, carried in the
result instead (`wire_body`).
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import Counter
from streamcrawl_contracts.messages import ARCHIVE_INLINE_MAX_BYTES, FetchRequest, FetchResult, HttpExchange
from streamcrawl_core.politeness import parse_retry_after
from streamcrawl_core.redirects import redirect_verdict
from streamcrawl_core.traps import is_soft404, looks_soft404, soft404_echoes, soft404_signature
from streamcrawl_runtime.ports.blobs import BlobStore

from streamcrawl_fetcher.ports import HttpResponse

STORED_BYTES = Counter("streamcrawl_fetcher_stored_bytes", "Body bytes newly written to the blob store")
INLINE_BODIES = Counter("streamcrawl_fetcher_inline_bodies",
                        "Fetched bodies carried in the FetchResult (inline) or left to S3 only (over the cap)",
                        ["where"])
REDIRECTS = Counter("streamcrawl_fetcher_redirects", "Redirect answers by verdict (followed, loop, limit, refused)",
                    ["verdict"])
WIRE_STORED_BYTES = Counter("streamcrawl_fetcher_wire_stored_bytes",
                            "Bodies as transferred (content-coded) newly written to the blob store for WARC")
SOFT404 = Counter("streamcrawl_fetcher_soft404", "Pages classified as soft 404s (not stored, not parsed)")


async def classify(req: FetchRequest, resp: HttpResponse, fetch_s: float, ended: float, delay: float | None,
                   result: Callable[..., FetchResult], *, blobs: BlobStore, inline_body_max_bytes: int,
                   max_redirect_hops: int, clock: Callable[[], float],
                   host_signature: int | None = None, keep_wire: bool = True) -> FetchResult:
    """The result of ``req``'s answer ``resp`` (``result`` builds a FetchResult of ``req``); ``host_signature``
    is the host's soft-404 signature, None when it has none (or it is not known yet); ``keep_wire``: store a
    content-coded body as received too (for the WARC writer; off when no WARC output is made)."""
    h = resp.headers
    common: dict[str, Any] = {
        "status": resp.status, "fetch_s": fetch_s, "ended_at": ended, "crawl_delay_s": delay,
        "content_type": h.get("content-type"), "etag": h.get("etag"),
        "last_modified": h.get("last-modified"), "x_robots_tag": _joined(h.get_list("x-robots-tag")),
    }
    if resp.response_head:
        # The WARC writer's input; its id is the result's own, so replays of it are recognised.
        common["event_id"] = uuid.uuid4().hex
        common["exchange"] = HttpExchange(id=common["event_id"], ip=resp.ip, request_head=resp.request_head,
                                          response_head=resp.response_head)
    if resp.status == 304:
        # Echo the validators we sent when the 304 omits them, so url_state keeps them.
        common["etag"] = common["etag"] or req.etag
        common["last_modified"] = common["last_modified"] or req.last_modified
        return result("not_modified", **common)
    if 300 <= resp.status <= 399:
        location = h.get("location")
        if not location:
            return result("http_error", error="redirect without Location", **common)
        # Follow, or stop at a loop, the hop limit or a non-HTTP Location (the chain travels with the
        # target: dedup queues it with this URL appended).
        verdict = redirect_verdict(req.url, req.url_fp, req.redirect_chain, location, max_redirect_hops)
        REDIRECTS.labels(verdict.outcome).inc()
        return result(verdict.outcome, redirect_to=verdict.target, error=verdict.reason, **common)
    if 200 <= resp.status <= 299:
        if host_signature is not None and resp.status == 200 and is_text(common["content_type"]):
            parts = urlsplit(req.url)
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            signature = await asyncio.to_thread(soft404_signature, body_text(resp.body, common["content_type"]),
                                                soft404_echoes(path))
            if is_soft404(signature, host_signature):
                # The host's "not found" page served with 200: nothing to store, parse or publish.
                SOFT404.inc()
                return result("soft_404", content_length=len(resp.body), truncated=resp.truncated, **common)
        # Stored before the result is emitted: a fetched result (and page_fetched) promises the blob.
        stored = await blobs.astore_page(resp.body)
        if stored.new:
            STORED_BYTES.inc(len(resp.body))
        wire_hash, wire_key, wire_body = (await store_wire(blobs, resp, stored.content_hash, inline=True)
                                          if keep_wire else (None, None, None))
        # A small body also rides along in the result, so the parser need not read it back.
        inline = stored.data if len(stored.data) <= inline_body_max_bytes else None
        INLINE_BODIES.labels("inline" if inline is not None else "s3_only").inc()
        return result("fetched", content_hash=stored.content_hash, storage_key=stored.key,
                      content_length=len(resp.body), truncated=resp.truncated, body_gz=inline,
                      wire_hash=wire_hash, wire_key=wire_key, wire_body=wire_body, **common)
    retry_after = None
    if resp.status in (429, 503):
        retry_after = parse_retry_after(h.get("retry-after"), clock())
    return result("http_error", error=f"HTTP {resp.status}", retry_after_s=retry_after, **common)


async def store_wire(blobs: BlobStore, resp: HttpResponse, content_hash: str,
                     inline: bool = False) -> tuple[str, str | None, bytes | None]:
    """(SHA-256 of the entity body as transferred, its blob key or None, the bytes themselves or None). A
    body that came with a content coding is stored a second time as received (a blob of its own, keyed by
    its hash), for the WARC writer; with ``inline``, one of at most ARCHIVE_INLINE_MAX_BYTES is not stored
    but returned, to travel in the result (the writer's only reader). Without a coding the wire bytes are
    the page just stored: nothing more is written."""
    if resp.wire is None:
        return content_hash, None, None
    if inline and len(resp.wire) <= ARCHIVE_INLINE_MAX_BYTES:
        # Already compressed (it is content-coded): carried as is. Saves a hash+gzip here, a PUT and the
        # writer's GET (hashing it still costs a few microseconds: the revisit digests need it).
        return hashlib.sha256(resp.wire).hexdigest(), None, resp.wire
    stored = await blobs.astore_page(resp.wire)
    if stored.new:
        WIRE_STORED_BYTES.inc(len(resp.wire))
    return stored.content_hash, stored.key, None


def is_text(content_type: str | None) -> bool:
    """HTML or text (a missing Content-Type counts: soft-404 pages are HTML more often than not)."""
    if content_type is None:
        return True
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime.startswith("text/") or mime in ("", "application/xhtml+xml")


#: The head of a body that looks_suspect reads (looks_soft404 reads 64 Ki characters at most).
_SUSPECT_SCAN_BYTES = 64 * 1024


def looks_suspect(resp: HttpResponse) -> bool:
    """A 200 text answer that looks like a "not found" page (streamcrawl_core.traps.looks_soft404): on a host
    not probed yet, the reason to probe it. Cheap (tens of microseconds), so run on the event loop."""
    if resp.status != 200:
        return False
    content_type = resp.headers.get("content-type")
    return is_text(content_type) and looks_soft404(body_text(resp.body[:_SUSPECT_SCAN_BYTES], content_type))


def body_text(body: bytes, content_type: str | None) -> str:
    """The body decoded with the header's charset (else UTF-8); probe and pages decode alike."""
    charset = "utf-8"
    for param in (content_type or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset" and value.strip().strip('"'):
            charset = value.strip().strip('"')
    try:
        return body.decode(charset, errors="replace")
    except LookupError:  # unknown, or not a text encoding ("rot13")
        return body.decode("utf-8", errors="replace")


def _joined(values: list[str]) -> str | None:
    """Several headers of one name as one value, a header per line: a user-agent prefix ("googlebot:")
    holds only within its own X-Robots-Tag header, so they must stay apart (no header holds a newline)."""
    return "\n".join(values) if values else None
