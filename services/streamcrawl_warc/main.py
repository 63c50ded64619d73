"""The WARC writer: archive records (from dedup) in, WARC/1.1 files (request, response or revisit and
metadata records, gzipped one by one) with a CDXJ index per file in S3, then page_fetched out."""

from __future__ import annotations

from streamcrawl_contracts.messages import ArchiveRecord
from streamcrawl_contracts.topics import ARCHIVE
from streamcrawl_runtime.connect import blob_store, s3_check
from streamcrawl_runtime.service import Wiring, run_service

from streamcrawl_warc.handler import WarcHandler, WarcPolicy
from streamcrawl_warc.settings import WarcSettings


def policy_of(settings: WarcSettings) -> WarcPolicy:
    return WarcPolicy(spool_dir=settings.spool_dir, max_file_bytes=settings.max_file_bytes,
                      max_file_age_s=settings.max_file_age_s, max_file_records=settings.max_file_records,
                      name=settings.file_name)


def build(settings: WarcSettings) -> Wiring:
    blobs = blob_store(settings.stack)
    handler = WarcHandler(blobs, policy_of(settings))
    # Every fetch waits for its file's upload before its handler returns: room for a whole file's worth.
    in_flight = settings.max_file_records + 1000
    return Wiring(handler, {ARCHIVE.name: ArchiveRecord},
                  loop={"max_in_flight": in_flight, "resume_below": in_flight // 2},
                  checks={"s3": s3_check(blobs.client, blobs.bucket)})


def main() -> None:
    raise SystemExit(run_service("warc", __doc__ or "", WarcSettings, build))


if __name__ == "__main__":
    main()
