"""One service of the hostile-corpus test as a process of its own (so its peak RSS is its own): the real
fetcher (build_handler with the given settings) or the real parser (with its main-content extractor),
on the real Kafka, Cassandra and S3, under the shared run loop, between two per-test topics.

    python -m tests.integration.hostile_service fetcher|parser IN OUT GROUP READY_FILE [DNS_PORT]

Writes READY_FILE once its partitions are assigned; on SIGTERM drains, then prints {"peak_rss_kib": N}
(VmHWM) as its last stdout line."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from streamcrawl_contracts.messages import Envelope, FetchRequest, FetchResult
from streamcrawl_contracts.topics import FETCH_RESULTS, PARSED, Key, TopicSpec
from streamcrawl_runtime.connect import blob_store, crawl_state
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.ports.loop import Handler
from streamcrawl_runtime.settings import StackSettings

from tests.integration.kafka_helpers import TopicUnderTest

#: The fetcher's limits in the corpus run: the defaults, with short timeouts so slow cases end quickly.
FETCHER_ENV = {"allowed_networks": "127.0.0.0/8", "connect_timeout_s": 2.0, "read_timeout_s": 2.0,
               "total_timeout_s": 5.0, "dns_timeout_s": 1.0, "verify_tls": True}


class Wrapped(TopicUnderTest):
    """The service's outputs on the topic under test (fetch_results, parsed) go to the test's topic, the
    others are dropped (not kept: they would count in the peak RSS); writes READY_FILE once assigned."""

    def __init__(self, inner: Handler, to: TopicSpec, only: TopicSpec, ready: Path) -> None:
        super().__init__(inner, to, only, keep_side=False)
        self.ready = ready

    async def on_assign(self, partitions: list[int]) -> None:
        await super().on_assign(partitions)
        self.ready.write_text(json.dumps(partitions))


def peak_rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


async def main(service: str, src: str, dst: str, group: str, ready: Path, dns_port: int) -> None:
    stack = StackSettings()
    out = TopicSpec(dst, Key.HOST, 3600_000, "test")
    handler: Handler
    if service == "fetcher":
        from streamcrawl_fetcher.main import build_handler
        from streamcrawl_fetcher.settings import FetcherSettings

        settings = FetcherSettings(dns_server="127.0.0.1", dns_port=dns_port, **FETCHER_ENV)  # type: ignore[arg-type]
        handler = build_handler(settings, crawl_state(stack), blob_store(stack))
        model: type[Envelope] = FetchRequest
        only = FETCH_RESULTS
    else:
        from streamcrawl_parser.extract import main_text
        from streamcrawl_parser.handler import ParserHandler

        handler = ParserHandler(blob_store(stack), main_text=main_text)
        model = FetchResult
        only = PARSED
    loop = RunLoop(LoopConfig(f"{service}-hostile", group, {src: model}, stack.kafka_bootstrap, max_in_flight=16,
                              resume_below=8, mark_fresh=service == "fetcher"), Wrapped(handler, out, only, ready))
    await loop.run(install_signals=True)
    print(json.dumps({"peak_rss_kib": peak_rss_kib()}), flush=True)


if __name__ == "__main__":
    name, src, dst, group, ready = sys.argv[1:6]
    asyncio.run(main(name, src, dst, group, Path(ready), int(sys.argv[6]) if len(sys.argv) > 6 else 0))
