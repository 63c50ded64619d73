"""Driver-free ports: the types handlers and domain code depend on. No module in this package imports a
driver (Kafka, Cassandra, S3, HTTP); the adapters named for their technology implement them."""

from streamcrawl_runtime.ports.blobs import BlobStore, StoredPage, decode_page, encode_page, page_key
from streamcrawl_runtime.ports.cql import CqlSession, Write
from streamcrawl_runtime.ports.errors import PoisonMessage, TransientError, is_transient
from streamcrawl_runtime.ports.loop import Handler, Output, Record, StatelessHandler
from streamcrawl_runtime.ports.state import (
    CrawlState,
    DedupState,
    DueRow,
    FetcherState,
    FrontierState,
    HostOverride,
    HostState,
    LeaseMarks,
    QueuedUrl,
    RecrawlState,
    RobotsState,
    UrlState,
)

__all__ = [
    "BlobStore", "CqlSession", "CrawlState", "DedupState", "DueRow", "FetcherState", "FrontierState", "Handler",
    "HostOverride", "HostState", "LeaseMarks", "Output", "PoisonMessage", "QueuedUrl", "Record", "RecrawlState",
    "RobotsState", "StatelessHandler", "StoredPage", "TransientError", "UrlState", "Write", "decode_page",
    "encode_page", "is_transient", "page_key",
]
