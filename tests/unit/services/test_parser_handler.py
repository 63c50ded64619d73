"""Parser handler: FetchResult + body (inline, or in MemoryBlobStore) → ParsedPage on PARSED; other outcomes
ignored; a body that does not decode is dead-lettered whichever its source."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
from streamcrawl_contracts.messages import ARCHIVE_INLINE_MAX_BYTES, DeadLetter, FetchResult, ParsedPage
from streamcrawl_contracts.topics import DEAD_LETTER, FETCH_RESULTS, PARSED
from streamcrawl_core.simhash import from_signed64, simhash
from streamcrawl_parser.handler import ParserHandler
from streamcrawl_runtime import kafka_loop
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.memory import MemoryBlobStore
from streamcrawl_runtime.ports.blobs import encode_page
from streamcrawl_runtime.ports.errors import PoisonMessage, TransientError, is_transient
from streamcrawl_runtime.ports.loop import Record

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


BODY_WORDS = " ".join(f"word{i} alpha{i % 7}" for i in range(20))


def test_html_page_is_parsed() -> None:
    blobs = MemoryBlobStore()
    body = (b"<html><head><title>T</title><link rel=canonical href=/c></head><body>"
            b"<p>" + BODY_WORDS.encode() + b"</p><a href=/a>a</a></body></html>")
    msg = _result(blobs, body, "text/html; charset=utf-8", x_robots_tag="noindex")
    (page,) = _handle(ParserHandler(blobs), msg)
    assert page.url == URL and page.url_fp == 7 and page.depth == 2 and page.http_status == 200
    assert page.title == "T" and page.canonical_url == "http://site.test/c"
    # the canonical is queued like a link, so the canonical page itself is crawled
    assert page.out_links == ["http://site.test/a", "http://site.test/c"] and page.noindex and not page.nofollow
    assert page.content_hash == msg.content_hash and page.storage_key == msg.storage_key
    assert page.charset == "utf-8" and page.etag == '"e"' and page.text_length == len(BODY_WORDS + " a")
    assert page.simhash is not None and -(1 << 63) <= page.simhash < (1 << 63)
    assert from_signed64(page.simhash) == simhash(BODY_WORDS + " a")  # no extractor wired: the visible text


def test_a_thin_page_gets_no_simhash() -> None:
    blobs = MemoryBlobStore()
    body = b"<html><body><p>some words to hash here</p></body></html>"
    (page,) = _handle(ParserHandler(blobs), _result(blobs, body, "text/html"))
    assert page.simhash is None and page.text_length > 0  # too little distinct text to compare


def test_non_html_gives_page_without_links() -> None:
    blobs = MemoryBlobStore()
    (page,) = _handle(ParserHandler(blobs), _result(blobs, b"%PDF-1.4 <a href=/x>", "application/pdf"))
    assert page.out_links == [] and page.simhash is None and page.title is None and page.charset is None


def test_empty_html_body() -> None:
    blobs = MemoryBlobStore()
    (page,) = _handle(ParserHandler(blobs), _result(blobs, b"", "text/html"))
    assert page.out_links == [] and page.simhash is None and page.text_length == 0


@pytest.mark.parametrize("outcome", ["not_modified", "redirect", "http_error", "robots_fetched", "lease_expired",
                                     "probe_fetched", "soft404_suspect", "soft_404"])
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


# ------------------------------------------------------------------ the body carried in the FetchResult

class NoReads(MemoryBlobStore):
    """A store the parser must not touch."""

    def get_page(self, key: str) -> bytes:
        raise AssertionError(f"the parser read {key} from the store")


class CountingStore(MemoryBlobStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get_page(self, key: str) -> bytes:
        self.reads += 1
        return super().get_page(key)


BODY = b"<html><head><title>T</title></head><body><p>inline words</p><a href=/a>a</a></body></html>"


def test_inline_body_is_used_without_reading_the_store() -> None:
    blobs = MemoryBlobStore()
    msg = _result(blobs, BODY, body_gz=encode_page(BODY))
    msg = FetchResult.model_validate_json(msg.model_dump_json())  # as it arrives from Kafka
    (page,) = _handle(ParserHandler(NoReads()), msg)
    (from_store,) = _handle(ParserHandler(blobs), msg.model_copy(update={"body_gz": None}))
    assert page.title == "T" and page.out_links == ["http://site.test/a"]
    assert page.model_dump(exclude={"event_id", "occurred_at", "body_gz"}) == from_store.model_dump(
        exclude={"event_id", "occurred_at", "body_gz"})
    # the inline body goes on to the WARC writer (through dedup's archive record); one read from S3 does not
    assert page.body_gz == encode_page(BODY) and from_store.body_gz is None
    assert ParsedPage.model_validate_json(page.model_dump_json()).body_gz == page.body_gz


def test_an_inline_body_is_passed_on_only_when_small_and_not_content_coded() -> None:
    blobs = MemoryBlobStore()
    big = BODY + b"<!-- " + random.Random(1).randbytes(40_000).hex().encode() + b" -->"  # over the cap
    assert len(encode_page(big)) > ARCHIVE_INLINE_MAX_BYTES
    (page,) = _handle(ParserHandler(NoReads()), _result(blobs, big, body_gz=encode_page(big)))
    assert page.body_gz is None and page.title == "T"
    # a content-coded response: the WARC writer records the wire bytes (wire_key), not this body
    (coded,) = _handle(ParserHandler(NoReads()), _result(blobs, BODY, body_gz=encode_page(BODY),
                                                         wire_key="pages/w.gz", wire_hash="ab" * 32))
    assert coded.body_gz is None and coded.wire_key == "pages/w.gz"
    # a small coded response's wire bytes travel in the result: passed on as they are, the page is not
    wire = b"\x1f\x8b coded bytes"
    (inline,) = _handle(ParserHandler(NoReads()), _result(blobs, BODY, body_gz=encode_page(BODY),
                                                          wire_hash="cd" * 32, wire_body=wire))
    assert inline.body_gz is None and inline.wire_key is None and inline.wire_body == wire
    assert ParsedPage.model_validate_json(inline.model_dump_json()).wire_body == wire


def test_without_inline_body_the_store_is_read_once() -> None:
    blobs = CountingStore()
    (page,) = _handle(ParserHandler(blobs), _result(blobs, BODY))
    assert blobs.reads == 1 and page.title == "T"


def _corrupt_cases() -> list[bytes]:
    good = encode_page(BODY)
    return [b"not gzip at all", good[:-8], good[: len(good) // 2], good[:20] + bytes([good[20] ^ 0xFF]) + good[21:]]


@pytest.mark.parametrize("bad", _corrupt_cases())
def test_corrupt_inline_body_fails_like_a_corrupt_blob_and_is_not_read_from_the_store(bad: bytes) -> None:
    blobs = MemoryBlobStore()
    from_s3 = _result(blobs, BODY)
    assert from_s3.storage_key is not None
    blobs.objects[from_s3.storage_key] = bad  # the same bytes, corrupt in the store
    with pytest.raises(Exception) as s3_error:
        _handle(ParserHandler(blobs), from_s3)
    with pytest.raises(Exception) as inline_error:
        _handle(ParserHandler(NoReads()), _result(MemoryBlobStore(), BODY, body_gz=bad))
    assert type(inline_error.value) is type(s3_error.value)
    assert not is_transient(inline_error.value)  # not retried forever: dead-lettered after the attempts


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes]] = []

    def produce(self, topic: str, value: bytes, key: bytes | None = None, on_delivery: object = None) -> None:
        self.sent.append((topic, value))

    def poll(self, _timeout: float) -> int:
        return 0


class FakeConsumer:
    def __init__(self, _config: dict[str, object]) -> None: ...


@pytest.mark.parametrize("where", ["inline", "s3"])
def test_run_loop_dead_letters_a_corrupt_body_from_either_source(monkeypatch: pytest.MonkeyPatch,
                                                                 where: str) -> None:
    """Through the run loop (JSON in, outputs out): a corrupt body from the FetchResult or from the store
    ends as one dead letter with the same error type, and a good inline body as one parsed page."""
    monkeypatch.setattr(kafka_loop, "Consumer", FakeConsumer)
    bad = encode_page(BODY)[:-8]

    def run(msg: FetchResult, blobs: MemoryBlobStore) -> list[tuple[str, bytes]]:
        producer = FakeProducer()
        cfg = LoopConfig("parser", "g", {FETCH_RESULTS.name: FetchResult}, "unused:1")
        loop = RunLoop(cfg, ParserHandler(blobs), producer=producer)  # type: ignore[arg-type]
        rec = Record(FETCH_RESULTS.name, 3, 42, "site.test", msg.model_dump_json().encode())
        loop._offsets[(rec.topic, rec.partition)].start(rec.offset)
        asyncio.run(loop._handle_one(rec))
        return producer.sent

    blobs = MemoryBlobStore()
    if where == "inline":
        msg, store = _result(blobs, BODY, body_gz=bad), NoReads()
    else:
        msg, store = _result(blobs, BODY), blobs
        assert msg.storage_key is not None
        blobs.objects[msg.storage_key] = bad
    [(topic, value)] = run(msg, store)
    dead = DeadLetter.model_validate_json(value)
    assert topic == DEAD_LETTER.name and dead.error_type == "EOFError" and dead.offset == 42
    assert "handler failed 3x" in dead.reason
    [(topic, value)] = run(_result(MemoryBlobStore(), BODY, body_gz=encode_page(BODY)), NoReads())
    assert topic == PARSED.name and ParsedPage.model_validate_json(value).title == "T"


def test_a_sitemap_becomes_parts_of_entries_with_lastmods() -> None:
    import gzip

    from streamcrawl_parser import sitemap_pages

    ns = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
    items = "".join(f"<url><loc>http://a.test/{i}</loc><lastmod>2024-05-01</lastmod></url>" for i in range(7))
    body = gzip.compress(f"<urlset {ns}>{items}</urlset>".encode())
    blobs = MemoryBlobStore()
    msg = _result(blobs, body, "application/gzip").model_copy(update={"url": "http://a.test/sitemap.xml.gz"})
    old, sitemap_pages.PART_URLS = sitemap_pages.PART_URLS, 3
    try:
        handler = ParserHandler(blobs)
        parts = _handle(handler, msg)
    finally:
        sitemap_pages.PART_URLS = old
    assert [p.sitemap_part for p in parts] == [0, 1, 2] and all(p.sitemap for p in parts)
    assert [u for p in parts for u in p.out_links] == [f"http://a.test/{i}" for i in range(7)]
    assert all(len(p.lastmods) == len(p.out_links) and p.lastmods[0] is not None for p in parts)
    # an XML document that is no sitemap is parsed like any non-HTML body
    plain = _handle(ParserHandler(blobs), _result(blobs, b"<catalog><book/></catalog>", "application/xml"))
    assert len(plain) == 1 and not plain[0].sitemap
    # a text sitemap (one URL per line) and an RSS feed are sitemaps too; a text page is a page
    text = _result(blobs, b"http://a.test/x\nhttp://a.test/y\n", "text/plain")
    [part] = _handle(ParserHandler(blobs), text.model_copy(update={"url": "http://a.test/sitemap.txt"}))
    assert part.sitemap and part.out_links == ["http://a.test/x", "http://a.test/y"]
    rss = b"<rss><channel><item><link>http://a.test/z</link></item></channel></rss>"
    feed = _result(blobs, rss, "application/rss+xml").model_copy(update={"url": "http://a.test/feed"})
    [part] = _handle(ParserHandler(blobs), feed)
    assert part.sitemap and part.out_links == ["http://a.test/z"]
    [page] = _handle(ParserHandler(blobs), _result(blobs, b"Just some notes.\n", "text/plain"))
    assert not page.sitemap


@pytest.mark.parametrize(("directive", "noindex"), [
    ("unavailable_after: 2001-01-01", True),    # passed at the fetch: not indexed
    ("unavailable_after: 2099-01-01", False),   # still to come: published with the date
])
def test_unavailable_after_is_honoured(directive: str, noindex: bool) -> None:
    blobs = MemoryBlobStore()
    body = b"<html><body><p>text</p></body></html>"
    (page,) = _handle(ParserHandler(blobs), _result(blobs, body, "text/html", x_robots_tag=directive))
    assert page.noindex is noindex and page.unavailable_after is not None
    assert page.unavailable_after.year == (2001 if noindex else 2099)
