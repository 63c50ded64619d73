"""The parser: reads each fetched body (inline or from the blob store), extracts links, text, title and
robots meta, and fingerprints the text (SimHash) for dedup."""

from __future__ import annotations

from streamcrawl_contracts.messages import FetchResult
from streamcrawl_contracts.topics import FETCH_RESULTS
from streamcrawl_runtime.connect import blob_store, s3_check
from streamcrawl_runtime.service import Wiring, run_service

from streamcrawl_parser.extract import main_text
from streamcrawl_parser.handler import ParserHandler
from streamcrawl_parser.settings import ParserSettings


def build(settings: ParserSettings) -> Wiring:
    blobs = blob_store(settings.stack)
    handler = ParserHandler(blobs, settings.max_links_per_page, settings.simhash_max_chars, main_text)
    return Wiring(handler, {FETCH_RESULTS.name: FetchResult},
                  loop={"max_in_flight": settings.max_in_flight,
                        "resume_below": max(1, settings.max_in_flight // 2)},
                  checks={"s3": s3_check(blobs.client, blobs.bucket)})


def main() -> None:
    raise SystemExit(run_service("parser", __doc__ or "", ParserSettings, build))


if __name__ == "__main__":
    main()
