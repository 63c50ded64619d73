"""Crawler URL policy: the ``UrlError`` every rejection raises, ``NormalizerConfig`` (which query and path
parameters are tracking or session noise, query order, length cap) and the query filter that applies it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from streamcrawl_core._native import NATIVE, NativeNormalizer

__all__ = ["DEFAULT_CONFIG", "NormalizerConfig", "UrlError", "filter_query"]


class UrlError(ValueError):
    """A URL was rejected. ``reason`` is one of: "type", "scheme", "userinfo", "host", "port",
    "too_long", "malformed", "base"."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


_DEFAULT_STRIP = frozenset(
    {
        # click/campaign trackers (utm_* is handled by strip_param_prefixes)
        "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid", "ttclid",
        "igshid", "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok",
        # session ids: a new value per visit for the same content is a classic crawler trap
        "jsessionid", "phpsessid", "aspsessionid", "sessionid", "sid", "cfid", "cftoken",
    }
)  # fmt: skip


@dataclass(frozen=True)
class NormalizerConfig:
    """Policy knobs of ``normalize``. Parameter names match case-insensitively."""

    strip_params: frozenset[str] = _DEFAULT_STRIP
    strip_param_prefixes: tuple[str, ...] = ("utm_",)
    sort_query: bool = True
    max_length: int = 2048
    # Derived, precomputed once so the per-URL path does no set building.
    _strip_lower: frozenset[str] = field(init=False, repr=False, compare=False)
    _prefixes_lower: tuple[str, ...] = field(init=False, repr=False, compare=False)
    _path_param_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _query_strip_re: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    # The compiled fast paths of normalize() for this policy, if the extension is installed.
    _native: NativeNormalizer | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.max_length < 16:
            raise ValueError("max_length must be >= 16")
        lower = frozenset(p.lower() for p in self.strip_params)
        object.__setattr__(self, "_strip_lower", lower)
        object.__setattr__(self, "_prefixes_lower", tuple(p.lower() for p in self.strip_param_prefixes))
        pattern = None
        if lower:
            alts = "|".join(re.escape(p) for p in sorted(lower))
            pattern = re.compile(rf";(?:{alts})=[^/;]*", re.IGNORECASE)
        object.__setattr__(self, "_path_param_re", pattern)
        # Pre-filter for _normalize_query: finds every parameter that might be stripped (ASCII case-
        # insensitive matching accepts a superset of the exact lower()-based test), so a query it does
        # not match needs no per-parameter checks.
        names = [re.escape(p) + r"(?:[=&]|$)" for p in sorted(lower)]
        names += [re.escape(p) for p in self._prefixes_lower]
        query_re = re.compile(rf"(?:^|&)(?:{'|'.join(names)})", re.IGNORECASE) if names else None
        object.__setattr__(self, "_query_strip_re", query_re)
        native = None
        if NATIVE is not None and self.max_length < 1 << 40:
            native = NATIVE.Normalizer(sorted(lower), list(self._prefixes_lower), self.sort_query, self.max_length)
        object.__setattr__(self, "_native", native)


DEFAULT_CONFIG = NormalizerConfig()


def filter_query(query: str, config: NormalizerConfig) -> str:
    """Drop empty and tracking/session parameters, then sort by key (``query`` is already escaped)."""
    params = query.split("&")
    if "" in params:
        params = [p for p in params if p]
    rx = config._query_strip_re
    if rx is not None and rx.search(query) is not None:
        strip, prefixes = config._strip_lower, config._prefixes_lower
        kept = []
        for p in params:
            low = p.partition("=")[0].lower()
            if low in strip or (prefixes and low.startswith(prefixes)):
                continue
            kept.append(p)
        params = kept
    if config.sort_query and len(params) > 1:
        # Sort by key only; list.sort is stable so repeated keys keep their (meaningful) order.
        params.sort(key=_param_key)
    return "&".join(params)


def _param_key(param: str) -> str:
    return param.partition("=")[0]
