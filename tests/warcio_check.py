"""`warcio check` as the tests run it, and decoding a payload per its Content-Encoding.

warcio decodes a br payload only through brotlipy's API (a ``decompress`` method, a settable
``unused_data``); the installed brotli (Google's bindings, which httpx and the synthetic web use) has
neither, so warcio's checker stops with an AttributeError on the first br-coded response record (warcio
issue 73; its "all" extra names brotlipy, whose module name clashes with brotli's). The checker is run
with a small adapter of the installed brotli in that slot; everything else is warcio's own check
(record structure, block and payload digests)."""

from __future__ import annotations

import gzip
import subprocess
import sys
import zlib
from pathlib import Path

import brotli

_ADAPTER = """
import brotli
from warcio import bufferedreaders


class _Brotli:
    def __init__(self):
        self._d = brotli.Decompressor()
        self.unused_data = None

    def decompress(self, data):
        return self._d.process(data)

    def flush(self):  # warcio calls it when a reader is closed (pywb does; warcio check does not)
        return b""


bufferedreaders.BufferedReader.DECOMPRESSORS["br"] = _Brotli
bufferedreaders.try_brotli_init = lambda: None
from warcio.cli import main
main()
"""


def warcio_check(paths: list[str] | list[Path], verbose: bool = False) -> subprocess.CompletedProcess[str]:
    args = ["check", *(["-v"] if verbose else []), *map(str, paths)]
    return subprocess.run([sys.executable, "-c", _ADAPTER, *args], capture_output=True, text=True)


def decode_payload(raw: bytes, coding: str | None) -> bytes:
    """The payload with its content codings (a Content-Encoding value, applied left to right) undone."""
    for name in reversed([c.strip().lower() for c in (coding or "").split(",") if c.strip()]):
        if name in ("gzip", "x-gzip"):
            raw = gzip.decompress(raw)
        elif name == "br":
            raw = brotli.decompress(raw)
        elif name == "deflate":
            try:
                raw = zlib.decompress(raw)
            except zlib.error:  # raw deflate, as some servers send it
                raw = zlib.decompress(raw, -zlib.MAX_WBITS)
        # anything else (identity, a coding httpx does not know) the fetcher did not decode either
    return raw
