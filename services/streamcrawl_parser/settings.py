"""Parser configuration: one pydantic-settings class (env prefix STREAMCRAWL_), built once in main."""

from __future__ import annotations

from streamcrawl_runtime.settings import StackSettings


class ParserSettings(StackSettings):
    parser_group_id: str = "streamcrawl-parser"
    log_level: str = "INFO"
    parser_metrics_port: int = 9103  # 0 disables the Prometheus endpoint
    # Parsing is CPU work done in worker threads; more in flight only queues up behind the GIL.
    parser_max_in_flight: int = 32
    max_links_per_page: int = 1000
    # Text beyond this many characters does not change the SimHash of a real page, only its cost.
    simhash_max_chars: int = 2_000_000
