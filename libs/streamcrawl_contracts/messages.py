"""Message contracts: pydantic models, the single source of truth for every payload on Kafka.

Every message carries `schema_version`, `event_id` and `occurred_at`. `schema_version` is the model's
major version: an added optional field is no bump (consumers ignore fields they do not know), a breaking
change is. A consumer reads versions 1 to its model's SCHEMA_VERSION and refuses a newer one (a validation
error naming both versions, so the run loop dead-letters it with that reason, for a replay once the
consumer is upgraded) rather than mis-read it. `python -m streamcrawl_contracts.export --check` fails when
schemas/json drifts. Payloads are UTF-8 JSON (model_dump_json); the Kafka key is the host (see topics.py).

Sizes are bounded: every URL field holds at most MAX_URL_CHARS (81,920) characters (the normalizer's own
limit is 2,048; a seed may be longer before normalization), so an oversized record fails validation instead of
travelling through the pipeline.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


def _now() -> datetime:
    return datetime.now(UTC)


def _event_id() -> str:
    return uuid.uuid4().hex


#: The longest URL (or host: a part of one) any message may carry, in characters.
#: Far above any normalized URL, and above the hostile corpus's 64 KB URL (the fetcher answers such a
#: request with an outcome of its own), far below a record's 1 MB: a 900 KB URL field fails validation.
MAX_URL_CHARS = 80 * 1024
#: The largest stored (gzip) body a ParsedPage or an ArchiveRecord carries inline (`body_gz`), so the WARC
#: writer need not read it back from S3. Kept well below the topics' 1 MB record limit, since both
#: messages also carry up to max_links links.
ARCHIVE_INLINE_MAX_BYTES = 32 * 1024


class Envelope(BaseModel):
    """Fields every message carries."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    SCHEMA_VERSION: ClassVar[int] = 1

    schema_version: int = Field(default=1, ge=1)
    event_id: str = Field(default_factory=_event_id, max_length=128)
    occurred_at: datetime = Field(default_factory=_now)

    @field_validator("schema_version")
    @classmethod
    def _readable_version(cls, version: int) -> int:
        if version > cls.SCHEMA_VERSION:
            raise ValueError(f"schema_version {version} is newer than this consumer reads "
                             f"({cls.__name__} {cls.SCHEMA_VERSION}): not read, a breaking change it does not know")
        return version


Kind = Literal["discovery", "refresh"]


class SeedMessage(Envelope):
    """A URL to start from. Produced by users or the control plane, keyed by host or unkeyed."""

    url: str = Field(max_length=MAX_URL_CHARS)
    priority: int = Field(default=0, ge=0, le=9)
    source: str = "user"


class UrlMessage(Envelope):
    """A normalized URL for the frontier: a new discovery (from dedup) or a due refresh (recrawl)."""

    url: str = Field(max_length=MAX_URL_CHARS)
    host: str = Field(max_length=MAX_URL_CHARS)
    url_fp: int
    depth: int = 0
    priority: int = Field(default=5, ge=0, le=9)
    kind: Kind = "discovery"
    not_before: float = 0.0
    via: str | None = Field(default=None, max_length=MAX_URL_CHARS)
    #: dedup re-sent this discovery because its candidate event was delivered again (after a crash); the
    #: frontier drops it if it already finished the URL.
    replayed: bool = False
    #: Fingerprints of the URLs that redirected to this one, first to last (its length is the hop count;
    #: streamcrawl_core.redirects): carried through dedup, the frontier and the fetcher so that a redirect
    #: chain is followed for at most 5 hops across the pipeline. Empty for a URL found as a link or seed.
    redirect_chain: list[int] = Field(default_factory=list, max_length=16)


class UrlCandidates(Envelope):
    """Normalized URLs that share one target host, keyed by that host, for the URL seen-set check: the
    out-links of one page (or a seed, or a redirect target). One message per (page, target host) rather
    than per link: most links stay on the page's host, so a page costs one or two messages, not dozens.
    `urls[i]` has fingerprint `url_fps[i]`."""

    host: str = Field(max_length=MAX_URL_CHARS)
    depth: int
    source_url: str = Field(max_length=MAX_URL_CHARS)
    urls: list[Annotated[str, Field(max_length=MAX_URL_CHARS)]] = Field(min_length=1)
    url_fps: list[int] = Field(min_length=1)
    #: From a sitemap: each URL's <lastmod> (epoch seconds) or None; empty otherwise.
    lastmods: list[float | None] = Field(default_factory=list)
    #: A redirect target's chain: fingerprints of the URLs that redirected to it, first to last (its length
    #: is the hop count; streamcrawl_core.redirects), handed on to UrlMessage. Empty for links and seeds.
    redirect_chain: list[int] = Field(default_factory=list, max_length=16)
    #: The frontier priority of these URLs (0 = first) when the sender knows better than the depth rule
    #: (dedup's: a seed 0, else 1 + depth): a guessed /sitemap.xml that robots.txt did not declare comes
    #: last (GUESSED_SITEMAP_PRIORITY). None: by depth. A consumer from before the field ignores it.
    priority: int | None = Field(default=None, ge=0, le=9)

    @model_validator(mode="after")
    def _same_length(self) -> UrlCandidates:
        if len(self.urls) != len(self.url_fps):
            raise ValueError(f"{len(self.urls)} urls but {len(self.url_fps)} url_fps")
        return self


class FetchRequest(Envelope):
    """A leased fetch: the fetcher must not start it after lease_expires_at (the frontier re-queues)."""

    url: str = Field(max_length=MAX_URL_CHARS)
    host: str = Field(max_length=MAX_URL_CHARS)
    url_fp: int
    depth: int = 0
    kind: Kind = "discovery"
    lease_id: str
    lease_expires_at: float
    #: Do not send the request before this time (epoch seconds): the frontier dispatches a little ahead
    #: of the host's politeness timer so that Kafka latency is not added to every delay.
    not_before: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    #: Fingerprints of the URLs that redirected to this one, first to last (its length is the hop count;
    #: streamcrawl_core.redirects): carried through dedup, the frontier and the fetcher so that a redirect
    #: chain is followed for at most 5 hops across the pipeline. Empty for a URL found as a link or seed.
    redirect_chain: list[int] = Field(default_factory=list, max_length=16)
    #: Re-sent by a frontier that rebuilt its state and found this lease live and never started: the first
    #: copy may be lost (in a crashed frontier's producer) or still on its way. The fetcher checks the lease
    #: before it as before any possible replay; whichever copy comes second finds the lease done.
    #: Optional (added without a schema_version bump).
    resent: bool = False
    #: A request starting at or after this time (epoch seconds, fetcher clock) reads its lease again right
    #: after writing its started mark and sends nothing if the lease is no longer the host's current one:
    #: from then on the frontier may have fenced it (streamcrawl_core.lease, early check). 0: never.
    #: Optional (added without a schema_version bump).
    confirm_after: float = 0.0


class HttpExchange(BaseModel):
    """One HTTP exchange as a WARC writer needs it: the request and response heads as sent and received
    (status or request line, header lines, the blank line; latin-1 text, so every byte maps to one
    character), and the peer's address. `id` is the fetch's id (its FetchResult's event_id): it names the
    WARC records of this exchange, so a replayed record is recognised."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str
    ip: str
    request_head: str = Field(max_length=256 * 1024)
    response_head: str = Field(max_length=256 * 1024)


class FetchResult(Envelope):
    """What happened to a fetch. `status` is None when no HTTP response arrived (DNS, connect, timeout).

    One lease is one request to the host: when robots.txt is not cached, the fetcher fetches only
    robots.txt and answers `robots_fetched`; the frontier then re-queues the URL behind the politeness
    delay, so the robots request and the page request are spaced like any two requests. Likewise, when a
    page looked like a "not found" page on a host whose answer to a random nonsense path is not known yet,
    that page's outcome is `soft404_suspect` (nothing stored or published; the URL is re-queued) and the
    host's next lease is spent on the probe, outcome `probe_fetched` (`status` = the probe's status).
    `soft_404`: a 200 page whose body matches the host's nonsense-path answer (a "not found" page served
    with 200); its body is not stored.

    Redirects (3xx with a Location; streamcrawl_core.redirects): `redirect` — `redirect_to` is queued as
    a URL of its own with this URL appended to its `redirect_chain`; `redirect_loop` — the target is this
    URL or one of its chain; `redirect_limit` — this URL was reached by 5 hops already, the target is not
    followed; `redirect_refused` — the Location is not an absolute http(s) URL (`error` says why).

    `blocked_address`: the host's name resolved to an address the SSRF guard refuses (private, loopback,
    link-local, cloud metadata...; see streamcrawl_core.addresses): no connection was opened, the URL is
    recorded (url_state status `blocked`) and not retried.

    `interrupted`: a request replayed after the fetcher stopped (kill -9, OOM) while a request under the same
    lease was already under way; its outcome was lost. No new request is made: `started_at` is when that
    request began, `ended_at` when it ended at the latest (the replay), `fetch_s` its longest possible length.
    The frontier puts the URL back and holds the host for the politeness delay of such a fetch.

    `body_gz`: on a `fetched` result whose stored body is small (the fetcher's `inline_body_max_bytes`),
    the body's stored form (the gzip bytes at `storage_key`), so the parser need not read it back from S3.
    The blob is in S3 either way. In JSON it is base64 (URL-safe alphabet; either alphabet is accepted)."""

    # bytes fields travel as base64 in JSON (model_dump_json / model_validate_json); raw bytes in Python.
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    url: str = Field(max_length=MAX_URL_CHARS)
    host: str = Field(max_length=MAX_URL_CHARS)
    url_fp: int
    depth: int = 0
    kind: Kind = "discovery"
    lease_id: str
    outcome: Literal["fetched", "not_modified", "http_error", "network_error", "robots_disallowed",
                     "robots_unavailable", "robots_fetched", "probe_fetched", "soft404_suspect", "soft_404", "redirect",
                     "redirect_loop", "redirect_limit", "redirect_refused", "dns_error", "blocked_address",
                     "lease_expired", "interrupted"]
    status: int | None = None
    error: str | None = None
    started_at: float
    #: When the exchange with the host was over (fetcher clock, at or after the last byte): the base of
    #: the host's next politeness delay. None from older fetchers: the frontier uses its own clock.
    ended_at: float | None = None
    fetch_s: float = 0.0
    content_type: str | None = None
    content_length: int = 0
    truncated: bool = False
    content_hash: str | None = None
    storage_key: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    redirect_to: str | None = Field(default=None, max_length=MAX_URL_CHARS)
    retry_after_s: float | None = None
    crawl_delay_s: float | None = None
    x_robots_tag: str | None = None
    #: Optional, so consumers that ignore it (and older ones) are unaffected: no schema_version bump.
    body_gz: bytes | None = Field(default=None, repr=False)
    #: On a result whose lease fetched robots.txt (robots_fetched): its Sitemap: URLs, for dedup.
    sitemaps: list[str] = Field(default_factory=list)
    #: The raw heads and the peer address of the page request (outcomes with an HTTP response to the page
    #: URL: fetched, not_modified, redirect, http_error, soft_404), for the WARC writer.
    exchange: HttpExchange | None = None
    #: The request's redirect chain, echoed (dedup appends this URL to it for a redirect's target).
    redirect_chain: list[int] = Field(default_factory=list, max_length=16)
    #: The entity body as transferred (Content-Encoding kept, transfer coding removed), for the WARC
    #: writer: its SHA-256 (hex) on every stored body (equal to `content_hash` when no content coding was
    #: decoded), and, when it differs, the blob key of those bytes (stored like a page, keyed by this hash;
    #: None: the wire bytes are the page at `storage_key`). None from older fetchers: not known.
    #: Optional (added without a schema_version bump).
    wire_hash: str | None = None
    wire_key: str | None = None
    #: Those bytes themselves, instead of a blob, when a content coding was decoded and they are at most
    #: ARCHIVE_INLINE_MAX_BYTES (`wire_key` is then None): the fetcher neither stores them nor does the
    #: writer read them back. Optional (no bump), but it changes what `wire_key` None means when
    #: `wire_hash` differs from `content_hash`, so the WARC writer, parser and dedup must be upgraded
    #: before the fetchers: a parser or dedup from before it drops the field, and the writer then
    #: dead-letters the coded record that lost its wire body rather than record the decoded page.
    wire_body: bytes | None = Field(default=None, repr=False)


class ParsedPage(Envelope):
    """A parsed page, for dedup: links, text fingerprint and robots meta."""

    # bytes fields travel as base64 in JSON, as in FetchResult.
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    url: str = Field(max_length=MAX_URL_CHARS)
    host: str = Field(max_length=MAX_URL_CHARS)
    url_fp: int
    depth: int = 0
    kind: Kind = "discovery"
    fetched_at: datetime
    http_status: int
    content_type: str | None = None
    content_hash: str
    storage_key: str
    simhash: int | None = None
    title: str | None = None
    canonical_url: str | None = Field(default=None, max_length=MAX_URL_CHARS)
    out_links: list[Annotated[str, Field(max_length=MAX_URL_CHARS)]] = Field(default_factory=list)
    #: meta robots / X-Robots-Tag noindex or none, or an unavailable_after date passed at the fetch: dedup
    #: records the page but does not publish it (its links are still followed unless nofollow).
    noindex: bool = False
    nofollow: bool = False
    #: A future unavailable_after date of the page (published: indexers should drop the page then).
    unavailable_after: datetime | None = None
    charset: str | None = None
    text_length: int = 0
    etag: str | None = None
    last_modified: str | None = None
    #: Passed on from the FetchResult, for the WARC writer (via dedup's archive record).
    exchange: HttpExchange | None = None
    #: A sitemap (urlset or sitemapindex): out_links are its entries (or child sitemaps), lastmods[i] the
    #: <lastmod> of out_links[i] (epoch seconds) or None. A large sitemap comes in several messages:
    #: sitemap_part 0 is the fetch (dedup records and archives it), later parts only carry entries.
    sitemap: bool = False
    sitemap_part: int = 0
    lastmods: list[float | None] = Field(default_factory=list)
    fetch_s: float = 0.0
    truncated: bool = False
    #: Passed on from the FetchResult, for the WARC writer (see FetchResult.wire_hash). Optional.
    wire_hash: str | None = None
    wire_key: str | None = None
    #: The FetchResult's inline body (the blob at storage_key, gzip) when the fetcher carried it, no
    #: content coding was decoded (wire_hash None or equal to content_hash) and it is at most
    #: ARCHIVE_INLINE_MAX_BYTES, for the WARC writer via dedup's archive record. Optional (no
    #: schema_version bump): None means read it from S3.
    body_gz: bytes | None = Field(default=None, repr=False)
    #: Passed on from the FetchResult (see FetchResult.wire_body), for the WARC writer. Optional.
    wire_body: bytes | None = Field(default=None, repr=False)


class PageFetched(Envelope):
    """PUBLIC contract for indexers: a new or changed page. See README 'The page_fetched contract'."""

    url: str = Field(max_length=MAX_URL_CHARS)
    canonical_url: str
    fetched_at: datetime
    http_status: int
    content_type: str | None
    content_hash: str
    simhash: int | None
    storage_key: str
    out_links: list[str]
    title: str | None
    changed: bool
    #: Where the fetch's WARC response record is: the file's key in the bucket (see README, "WARC files"),
    #: the record's offset and its length (gzip member) in that file. None when no WARC writer runs.
    warc_filename: str | None = None
    warc_offset: int | None = None
    warc_length: int | None = None
    #: The page's robots unavailable_after date, if it gave one: drop the page from the index after it.
    unavailable_after: datetime | None = None


class RevisitOf(BaseModel):
    """The earlier capture a revisit record points at (WARC-Refers-To-Target-URI / -Date)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    url: str = Field(max_length=MAX_URL_CHARS)
    fetched_at: float | None = None


class ArchiveRecord(Envelope):
    """Internal (dedup → WARC writer): one fetch to write as WARC records, keyed by host.

    A `response` (body read from the blob store at `storage_key`, or none when the body was not stored:
    redirects, errors, soft 404s) unless `revisit_of` is set: then a `revisit` (identical-payload-digest)
    of that capture, for a 304 and for a body identical to an earlier one (unchanged, or an exact
    duplicate of another URL). `page`, when set, is published on page_fetched once the records are
    written, with the response record's location filled in."""

    # bytes fields travel as base64 in JSON, as in FetchResult.
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    url: str = Field(max_length=MAX_URL_CHARS)
    host: str = Field(max_length=MAX_URL_CHARS)
    url_fp: int
    fetched_at: float
    fetch_s: float = 0.0
    outcome: str
    status: int | None = None
    exchange: HttpExchange
    content_hash: str | None = None
    storage_key: str | None = None
    content_length: int = 0
    truncated: bool = False
    out_links: list[Annotated[str, Field(max_length=MAX_URL_CHARS)]] = Field(default_factory=list)
    revisit_of: RevisitOf | None = None
    page: PageFetched | None = None
    #: The payload as transferred (see FetchResult.wire_hash): for a response, its SHA-256 and, when it is
    #: not the page at `storage_key`, its own blob key; for a revisit, the payload digest of the capture it
    #: names (hex SHA-256). None (older producers): not known, the body is recorded decoded as before, with
    #: its codings under X-Crawler- headers, and a revisit names `content_hash`. Optional (no bump).
    wire_hash: str | None = None
    wire_key: str | None = None
    #: A response's body as stored at `storage_key` (gzip), from ParsedPage.body_gz: the writer uses it
    #: instead of reading the blob back. Optional (no bump); None: read from the blob store.
    body_gz: bytes | None = Field(default=None, repr=False)
    #: The body as transferred, from ParsedPage.wire_body (see FetchResult.wire_body): written as the
    #: response's payload, with no blob read. Optional (no bump).
    wire_body: bytes | None = Field(default=None, repr=False)


class DeadLetter(Envelope):
    """A message no handler could process, with why and where it came from. Nothing is dropped silently."""

    service: str
    source_topic: str
    partition: int
    offset: int
    key: str | None
    #: The record's value (base64), cut to its first 64 KiB when longer: the record itself stays in
    #: source_topic at partition/offset for that topic's retention.
    payload_b64: str
    reason: str
    error_type: str
    #: Optional (added without a schema_version bump): the value's full size, and whether it was cut.
    payload_bytes: int | None = None
    payload_truncated: bool = False


MODELS: dict[str, type[Envelope]] = {
    m.__name__: m
    for m in (SeedMessage, UrlMessage, UrlCandidates, FetchRequest, FetchResult, ParsedPage, PageFetched,
              ArchiveRecord, DeadLetter)
}
