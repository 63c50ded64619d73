"""Parser settings (STREAMCRAWL_PARSER_*), built once in main()."""

from __future__ import annotations

from typing import ClassVar

from streamcrawl_runtime.settings import ServiceSettings, service_config


class ParserSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "parser"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9103
    model_config = service_config(SERVICE)

    # Parsing is CPU work done in worker threads; more in flight only queues up behind the GIL.
    max_in_flight: int = 32
    max_links_per_page: int = 1000
    # Text beyond this many characters does not change the SimHash of a real page, only its cost.
    simhash_max_chars: int = 2_000_000
