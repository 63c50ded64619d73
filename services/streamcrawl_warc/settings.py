"""WARC writer settings (STREAMCRAWL_WARC_*), built once in main()."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import ClassVar

from pydantic import Field
from streamcrawl_runtime.settings import ServiceSettings, service_config


class WarcSettings(ServiceSettings):
    SERVICE: ClassVar[str] = "warc"
    DEFAULT_METRICS_PORT: ClassVar[int] = 9106
    model_config = service_config(SERVICE)

    #: A file is closed and uploaded at this size (records are never split: a file may pass it by one fetch).
    max_file_bytes: int = Field(default=1 << 30, ge=1024)
    #: ... or at this age. page_fetched waits for its file to be in S3, so this bounds its added latency;
    #: keep it well under the run loop's 60 s drain on shutdown.
    max_file_age_s: float = Field(default=30.0, gt=0, le=50)
    #: ... or when this many fetches wait on it (each waiting fetch holds its message in memory).
    max_file_records: int = Field(default=20_000, ge=1)
    #: Where open files are spooled (one per owned partition, up to max_file_bytes each).
    spool_dir: Path = Path(tempfile.gettempdir()) / "streamcrawl-warc"
    #: The files' name prefix: warc/pNNN/<name>-pNNN-<first offset>.warc.gz
    file_name: str = Field(default="streamcrawl", pattern=r"^[A-Za-z0-9._-]+$")
