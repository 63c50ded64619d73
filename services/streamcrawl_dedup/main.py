"""Dedup entrypoint: settings → Cassandra state + S3 snapshots → handler → the shared run loop."""

from __future__ import annotations

import asyncio

from streamcrawl_contracts.messages import FetchResult, ParsedPage, UrlCandidates
from streamcrawl_contracts.topics import FETCH_RESULTS, PARSED, URL_CANDIDATES
from streamcrawl_core.traps import TrapConfig
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.replay import read_partition
from streamcrawl_runtime.service import blob_store, crawl_state, start_service

from streamcrawl_dedup.handler import DedupHandler
from streamcrawl_dedup.seen import SeenSet
from streamcrawl_dedup.settings import DedupSettings


def main() -> None:
    settings = DedupSettings()
    start_service("dedup", settings, settings.log_level, settings.metrics_port)
    state = crawl_state(settings)
    def replay(part: int, start: int) -> tuple[list[int], int]:
        fps, end = [], start
        for offset, raw in read_partition(settings.kafka_bootstrap, URL_CANDIDATES.name, part, start):
            end = offset + 1
            try:
                fps.extend(UrlCandidates.model_validate_json(raw).url_fps)
            except ValueError:
                continue  # a poison candidate was dead-lettered, never admitted
        return fps, end

    seen = SeenSet(state, blob_store(settings), settings.bloom_capacity, settings.bloom_fp_rate, replay)
    traps = TrapConfig(max_depth=settings.max_depth, host_page_budget=settings.host_page_budget)
    handler = DedupHandler(state, seen, traps, simhash_distance=settings.simhash_distance,
                           snapshot_interval_s=settings.snapshot_interval_s)
    config = LoopConfig(service="dedup", group_id=settings.group_id, bootstrap=settings.kafka_bootstrap,
                        subscriptions={URL_CANDIDATES.name: UrlCandidates, PARSED.name: ParsedPage,
                                       FETCH_RESULTS.name: FetchResult},
                        max_in_flight=500, resume_below=250, tick_interval_s=1.0, settle_heap=True)
    loop = RunLoop(config, handler)
    seen.progress = lambda part: loop.processed_upto(URL_CANDIDATES.name, part)
    asyncio.run(loop.run())


if __name__ == "__main__":
    main()
