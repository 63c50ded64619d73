"""In-memory adapters of every port, in one place: for unit tests, and for running the control plane
(or a service) without the engines. Driver-free."""

from streamcrawl_runtime.memory.blobs import MemoryBlobStore
from streamcrawl_runtime.memory.control import InMemoryControlStore, InMemoryMetrics, InMemorySeedSink, InMemoryStats
from streamcrawl_runtime.memory.state import MemoryCrawlState

__all__ = ["InMemoryControlStore", "InMemoryMetrics", "InMemorySeedSink", "InMemoryStats", "MemoryBlobStore",
           "MemoryCrawlState"]
