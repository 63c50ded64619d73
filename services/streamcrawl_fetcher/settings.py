"""Fetcher settings (STREAMCRAWL_FETCHER_*), built once in main(). The politeness rule (which also spaces
robots.txt redirect hops) and the Crawl-delay cap are the shared `PolitenessSettings`."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator
from streamcrawl_core.addresses import parse_networks
from streamcrawl_runtime.settings import ServiceSettings, service_config

DEFAULT_USER_AGENT = "streamcrawl/0.1 (+https://github.com/streamcrawl/streamcrawl; crawler contact)"

#: The largest inline_body_max_bytes accepted. A FetchResult carries the body as base64 (+33%): 384 KiB
#: makes a message of ~525 kB, and its dead letter (the record base64-encoded again) ~700 kB, both under
#: the 1 MB that Kafka brokers and librdkafka producers accept by default (message.max.bytes).
INLINE_BODY_LIMIT = 384 * 1024
DEFAULT_INLINE_BODY_MAX_BYTES = 256 * 1024


class FetcherSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "fetcher"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9102
    model_config = service_config(SERVICE)

    max_in_flight: int = 200

    user_agent: str = DEFAULT_USER_AGENT
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 30.0
    # Wall-clock cap on one request incl. body: a server dripping one byte every 29 s defeats read_timeout.
    total_timeout_s: float = 120.0
    max_body_bytes: int = 10 * 1024 * 1024
    # A body whose stored (gzip) form is at most this size also travels inside its FetchResult (body_gz),
    # so the parser does not read it back from S3 (it is still written there first). 0 = never inline.
    inline_body_max_bytes: int = Field(default=DEFAULT_INLINE_BODY_MAX_BYTES, ge=0, le=INLINE_BODY_LIMIT)
    max_connections: int = 256
    verify_tls: bool = True

    # DNS: "system" = the OS resolver; otherwise the IP of a DNS server (the synthetic web's runs on 8553).
    dns_server: str = "127.0.0.1"
    dns_port: int = 8553
    dns_timeout_s: float = 3.0
    dns_negative_ttl_s: float = 300.0
    # The SSRF guard refuses private, loopback, link-local, CGNAT, multicast, reserved and cloud metadata
    # addresses (streamcrawl_core.addresses). Comma-separated CIDRs listed here are opened on purpose (the
    # launcher and the tests open 127.0.0.0/8, where the synthetic web lives); metadata endpoints never are.
    # Empty (the default, and the chart's): the public internet only.
    allowed_networks: str = ""

    @field_validator("allowed_networks")
    @classmethod
    def _networks(cls, value: str) -> str:
        parse_networks(value)  # a typo fails at start-up, not silently
        return value

    #: Send the WARC writer (streamcrawl-warc) an archive record of every fetch with a response that leaves
    #: nothing to parse (304s, redirects, errors, soft 404s); dedup sends those of parsed pages.
    warc: bool = True
    #: robots.txt's Sitemap: lines and each host's /sitemap.xml become URLs (fetched, parsed, followed).
    sitemaps: bool = True
    #: When a host gets its soft-404 probe (a request for a nonsense path, one politeness slot): "suspect",
    #: once one of its pages looks like a "not found" page; "always", before any page but its home page
    #: (a slot on every host; also catches soft-404 templates that say nothing like "not found").
    soft404_probe: Literal["suspect", "always"] = "suspect"

    robots_max_age_s: float = 86400.0
    robots_unreachable_retry_s: float = 3600.0
    robots_cache_entries: int = 100_000
