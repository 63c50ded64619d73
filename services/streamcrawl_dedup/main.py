"""Dedup: the URL seen-set, trap rules, per-host budgets and the blocklist for candidate URLs; exact and
near duplicates of fetched pages; publishes new and changed pages on page_fetched."""

from __future__ import annotations

from streamcrawl_contracts.messages import ParsedPage, UrlCandidates
from streamcrawl_contracts.topics import PARSED, URL_CANDIDATES
from streamcrawl_core.traps import TrapConfig
from streamcrawl_runtime.connect import blob_store, cassandra_check, crawl_state, s3_check
from streamcrawl_runtime.kafka_loop import RunLoop
from streamcrawl_runtime.kafka_replay import read_partition
from streamcrawl_runtime.service import Wiring, run_service

from streamcrawl_dedup.handler import DedupHandler
from streamcrawl_dedup.seen import SeenSet
from streamcrawl_dedup.settings import DedupSettings


def build(settings: DedupSettings) -> Wiring:
    state = crawl_state(settings.stack)
    blobs = blob_store(settings.stack)

    def replay(part: int, start: int) -> tuple[list[int], int]:
        """The fingerprints of url_candidates records from ``start`` on (to top up a restored snapshot)."""
        fps, end = [], start
        for offset, raw in read_partition(settings.stack.kafka_bootstrap, URL_CANDIDATES.name, part, start):
            end = offset + 1
            try:
                fps.extend(UrlCandidates.model_validate_json(raw).url_fps)
            except ValueError:
                continue  # a poison candidate was dead-lettered, never admitted
        return fps, end

    per_partition = -(-settings.bloom_crawl_urls // settings.stack.partitions)
    seen = SeenSet(state, blobs, per_partition, settings.bloom_fp_rate, replay)
    traps = TrapConfig(max_depth=settings.max_depth, host_page_budget=settings.host_page_budget)
    handler = DedupHandler(state, seen, traps, simhash_distance=settings.simhash_distance,
                           snapshot_interval_s=settings.snapshot_interval_s, warc=settings.warc,
                           partitions=settings.stack.partitions)

    def on_loop(loop: RunLoop) -> None:
        seen.progress = lambda part: loop.processed_upto(URL_CANDIDATES.name, part)

    return Wiring(handler, {URL_CANDIDATES.name: UrlCandidates, PARSED.name: ParsedPage},
                  loop={"max_in_flight": 500, "resume_below": 250, "tick_interval_s": 1.0},
                  checks={"cassandra": cassandra_check(state.s), "s3": s3_check(blobs.client, blobs.bucket)},
                  on_loop=on_loop)


def main() -> None:
    raise SystemExit(run_service("dedup", __doc__ or "", DedupSettings, build))


if __name__ == "__main__":
    main()
