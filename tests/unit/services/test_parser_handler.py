"""Parser handler: FetchResult + body in MemoryBlobStore → ParsedPage on PARSED; other outcomes ignored."""

from __future__ import annotations

import asyncio
import time

import pytest
from streamcrawl_contracts.messages import FetchResult, ParsedPage
from streamcrawl_contracts.topics import PARSED
from streamcrawl_core.simhash import from_signed64, simhash
from streamcrawl_parser.handler import ParserHandler
from streamcrawl_runtime.blobstore import MemoryBlobStore
from streamcrawl_runtime.errors import PoisonMessage, TransientError
from streamcrawl_runtime.kafka_loop import Record

URL = "http://site.test/p"
REC = Record("t", 0, 0, "site.test", b"")


def _result(blobs: MemoryBlobStore, body: bytes, ctype: str | None = "text/html", **kw: object) -> FetchResult:
    digest, key, _ = blobs.put_page(body)
    fields: dict[str, object] = {"outcome": "fetched", "status": 200, "content_type": ctype,
                                 "content_hash": digest, "storage_key": key, "etag": '"e"', **kw}
    return FetchResult(url=URL, host="site.test", url_fp=7, depth=2, lease_id="L", started_at=time.time(),
                       **fields)  # type: ignore[arg-type]


def _handle(handler: ParserHandler, msg: FetchResult) -> list[ParsedPage]:
    outs = asyncio.run(handler.handle(REC, msg))
    assert all(o.topic == PARSED and o.key == "site.test" for o in outs)
    return [o.value for o in outs]  # type: ignore[misc]


def test_html_page_is_parsed() -> None:
    blobs = MemoryBlobStore()
    body = (b"<html><head><title>T</title><link rel=canonical href=/c></head><body>"
            b"<p>some words to hash here</p><a href=/a>a</a></body></html>")
    msg = _result(blobs, body, "text/html; charset=utf-8", x_robots_tag="noindex")
    (page,) = _handle(ParserHandler(blobs), msg)
    assert page.url == URL and page.url_fp == 7 and page.depth == 2 and page.http_status == 200
    assert page.title == "T" and page.canonical_url == "http://site.test/c"
    assert page.out_links == ["http://site.test/a"] and page.noindex and not page.nofollow
    assert page.content_hash == msg.content_hash and page.storage_key == msg.storage_key
    assert page.charset == "utf-8" and page.etag == '"e"' and page.text_length == len("some words to hash here a")
    assert page.simhash is not None and -(1 << 63) <= page.simhash < (1 << 63)
    assert from_signed64(page.simhash) == simhash("some words to hash here a")


def test_non_html_gives_page_without_links() -> None:
    blobs = MemoryBlobStore()
    (page,) = _handle(ParserHandler(blobs), _result(blobs, b"%PDF-1.4 <a href=/x>", "application/pdf"))
    assert page.out_links == [] and page.simhash is None and page.title is None and page.charset is None


def test_empty_html_body() -> None:
    blobs = MemoryBlobStore()
    (page,) = _handle(ParserHandler(blobs), _result(blobs, b"", "text/html"))
    assert page.out_links == [] and page.simhash is None and page.text_length == 0


@pytest.mark.parametrize("outcome", ["not_modified", "redirect", "http_error", "robots_fetched", "lease_expired",
                                     "probe_fetched", "soft_404"])
def test_other_outcomes_are_ignored(outcome: str) -> None:
    blobs = MemoryBlobStore()
    msg = FetchResult(url=URL, host="site.test", url_fp=7, lease_id="L", outcome=outcome,  # type: ignore[arg-type]
                      started_at=time.time())
    assert _handle(ParserHandler(blobs), msg) == []


def test_soft_404_is_not_parsed_even_with_a_body() -> None:
    blobs = MemoryBlobStore()
    assert _handle(ParserHandler(blobs), _result(blobs, b"<a href='/x'>x</a>", outcome="soft_404")) == []


def test_missing_blob_is_poison_and_store_down_is_transient() -> None:
    blobs = MemoryBlobStore()
    msg = _result(blobs, b"<p>x</p>")
    blobs.objects.clear()
    with pytest.raises(PoisonMessage):
        _handle(ParserHandler(blobs), msg)

    class Down(MemoryBlobStore):
        def get_page(self, key: str) -> bytes:
            raise TransientError("s3 down")

    with pytest.raises(TransientError):
        _handle(ParserHandler(Down()), msg)
