"""Loads the optional compiled hot paths (the ``streamcrawl_native`` extension, built from ``native/`` by
``make venv``) for ``urls``, ``simhash`` and ``bloom``.

``NATIVE`` is the extension module, or None when it is not installed (no Rust toolchain at build time)
or was built for another API version; every caller then takes its pure-Python path, which gives the
same results (``tests/unit/core/test_native.py`` compares both). The extension does no I/O.
"""

from __future__ import annotations

import warnings
from typing import Any, Protocol, cast

__all__ = ["API_VERSION", "NATIVE", "NativeModule", "NativeNormalizer"]

API_VERSION = 1  # must equal the crate's API_VERSION (native/src/lib.rs)


class NativeNormalizer(Protocol):
    def normalize(self, url: object, base: object = None) -> str | None: ...


class NativeModule(Protocol):
    API_VERSION: int

    def Normalizer(  # the extension's class
        self, strip: list[str], prefixes: list[str], sort_query: bool, max_length: int
    ) -> NativeNormalizer: ...

    def simhash(self, text: str, shingle: int, ignore_numbers: bool) -> int | None: ...

    def bloom_contains(self, bits: bytearray, m: int, k: int, items: object) -> list[bool] | None: ...

    def bloom_add(self, bits: bytearray, m: int, k: int, items: object) -> tuple[list[bool], int] | None: ...

    def murmur3_128(self, data: bytes) -> tuple[int, int]: ...


def _load() -> NativeModule | None:
    try:
        import streamcrawl_native as mod
    except ImportError:
        return None
    version: Any = getattr(mod, "API_VERSION", None)
    if version != API_VERSION:
        warnings.warn(
            f"streamcrawl_native has API version {version}, expected {API_VERSION}: using pure Python "
            "(rebuild it with `make venv`)",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    return cast(NativeModule, mod)


NATIVE: NativeModule | None = _load()
