"""The catalogue of services the `streamcrawl` command knows (the names of the chart, compose and
`streamcrawl service`). Each service's own `--help` (its run_service bootstrap) lists its settings."""

from __future__ import annotations

#: Every service and what it does (the names are those of the chart, compose and `streamcrawl service`).
SERVICES: dict[str, str] = {
    "frontier": "Owns each host's politeness state and URL queues for its partitions: turns seeds and "
                "discovered URLs into leased fetch requests, at most one in flight per host.",
    "fetcher": "Runs leased fetch requests: DNS, robots.txt, the HTTP GET; stores bodies in S3 and publishes "
               "fetch results.",
    "parser": "Parses fetched pages: charset, links, canonical, robots meta, visible text and its SimHash.",
    "dedup": "Decides what is new: URL seen-set, exact and near duplicates, trap rules and host budgets; "
             "hands new and changed pages (and every other archived fetch) to the WARC writer.",
    "recrawl": "Schedules refetches: the interval halves on change and doubles when unchanged.",
    "warc": "Writes WARC/1.1 files (request, response or revisit, metadata records) with a CDXJ index per "
            "file to S3, then publishes page_fetched with each page's WARC file, offset and length.",
    "control": "The HTTP control plane: seeds, blocklist, host overrides, stats, /metrics, /healthz, /readyz.",
}
