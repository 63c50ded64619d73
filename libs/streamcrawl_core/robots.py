"""robots.txt rules for one host per RFC 9309, with streamcrawl's cache and error policy.

Path matching (``*``, ``$``, percent-encoding equivalence, longest match, Allow wins a tie) is done
by the maintained ``protego`` parser. Group selection is done HERE, because protego deviates from
RFC 9309 §2.2.1 there: it matches a robots.txt user-agent value as a *prefix of a token* of the
crawler's name (a group ``User-agent: stream`` would apply to ``streamcrawl``), it salvages
colon-less lines (``User-agent foo``) and invents a second group for values containing ``*``.
We instead:

* read each line as ``field: value`` (comment after ``#`` removed; lines without a colon and
  unknown fields are ignored, RFC 9309 §2.2.4);
* reduce a user-agent value to its product token (leading ``[A-Za-z_-]`` run, so
  ``StreamCrawl/2.1`` -> ``streamcrawl``) and compare case-insensitively with ours;
* merge all groups naming our token (§2.2.1); if none, merge all ``*`` groups; if none, no rules;
* ignore rules that precede any user-agent line; Sitemap lines belong to no group (§2.2.4);
* hand protego a synthetic one-group document containing only the selected rules.

Status policy (``RobotsRules.from_fetch``):

==================  =====================================================================
2xx                 parse the first ``max_bytes`` (500 KiB); a line cut by truncation is
                    dropped; UTF-8 with replacement; unparseable lines are ignored.
3xx                 the fetcher follows up to ``max_redirects`` (5); a final 3xx means too
                    many redirects -> "unavailable" -> allow all (§2.3.1.2).
4xx (not 429)       unavailable -> allow all (§2.3.1.3).
429                 DELIBERATE CHOICE: treated like 5xx (disallow all, retry later). §2.3.1.3
                    lets crawlers crawl on 4xx ("MAY"), but "Too Many Requests" asks us to slow
                    down; crawling the whole site in response would be impolite.
5xx / None / other  unreachable -> complete disallow (§2.3.1.4), refetch after
                    ``unreachable_retry_s``; but if ``previous`` rules are still fresh
                    (age <= ``max_age_s``, 24 h per §2.4) they stay in force until they expire.
==================  =====================================================================

Known remaining deviation (tested, xfail-strict): protego keeps ``%2F`` distinct from ``/`` (they
differ per RFC 3986), so the §2.2.2 table row ``baz=https://foo.bar`` vs ``baz=https%3A%2F%2Ffoo.bar``
does not match; Google's reference parser behaves the same. A rule written in the encoded form works.

``/robots.txt`` itself is always allowed (§2.2.2). Crawl-delay is not in RFC 9309; we honour it
but cap it (``crawl_delay_cap_s``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from protego import Protego

__all__ = ["PRODUCT_TOKEN", "RobotsConfig", "RobotsDecodeError", "RobotsKind", "RobotsRules"]

PRODUCT_TOKEN = "streamcrawl"

RobotsKind = Literal["parsed", "allow_all", "disallow_all"]

_TOKEN_RE = re.compile(r"[A-Za-z_-]+")
_UA_FIELDS = frozenset({"user-agent", "useragent"})
_ALLOW_FIELDS = frozenset({"allow"})
# Common misspellings of Disallow are honoured (as protego and Google do): erring towards
# obeying an exclusion the site owner clearly meant.
_DISALLOW_FIELDS = frozenset({"disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"})
_DELAY_FIELDS = frozenset({"crawl-delay"})
_SITEMAP_FIELDS = frozenset({"sitemap"})
_SCHEMA_VERSION = 1


class RobotsDecodeError(ValueError):
    """``RobotsRules.from_dict`` got data it cannot trust."""


@dataclass(frozen=True)
class RobotsConfig:
    product_token: str = PRODUCT_TOKEN
    max_bytes: int = 500 * 1024
    max_age_s: float = 86400.0
    crawl_delay_cap_s: float = 30.0
    max_redirects: int = 5
    unreachable_retry_s: float = 3600.0

    def __post_init__(self) -> None:
        if not _TOKEN_RE.fullmatch(self.product_token):
            raise ValueError("product_token must match [A-Za-z_-]+ (RFC 9309 §2.2.1)")
        if self.max_bytes < 1 or self.max_redirects < 0:
            raise ValueError("max_bytes must be >= 1 and max_redirects >= 0")
        for name in ("max_age_s", "crawl_delay_cap_s", "unreachable_retry_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0")


def _kind_for_status(status: int | None) -> RobotsKind:
    if status is None or status == 429:
        return "disallow_all"
    if 200 <= status <= 299:
        return "parsed"
    if 300 <= status <= 499:
        return "allow_all"
    return "disallow_all"  # 5xx, and codes outside HTTP's range: we cannot know the rules


def _decode(body: bytes, max_bytes: int) -> str:
    truncated = len(body) > max_bytes
    data = body[:max_bytes]
    if truncated:
        # The last line may be cut mid-rule ("Disallow: /priv" of "/private/x" would still
        # work, but "Allow: /a" of "/admin-public" would widen an Allow); drop it.
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        data = data[: cut + 1] if cut >= 0 else b""
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def _product_token(value: str) -> str:
    value = value.strip()
    if value.startswith("*"):
        return "*"
    match = _TOKEN_RE.match(value)
    return match.group(0).lower() if match else ""


def _select(text: str, token: str) -> tuple[list[tuple[str, str]], list[str]]:
    """Rules (field, value) that apply to ``token``, and all Sitemap URLs."""
    groups: list[tuple[set[str], list[tuple[str, str]]]] = []
    sitemaps: list[str] = []
    agents: set[str] = set()
    rules: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0]
        if ":" not in line:
            continue
        name, value = line.split(":", 1)
        name, value = name.strip().lower(), value.strip()
        if name in _UA_FIELDS:
            if rules:  # a user-agent line after rules starts a new group
                groups.append((agents, rules))
                agents, rules = set(), []
            agents.add(_product_token(value))
        elif name in _SITEMAP_FIELDS:
            if value:
                sitemaps.append(value)
        elif agents:
            if name in _ALLOW_FIELDS:
                rules.append(("Allow", value))
            elif name in _DISALLOW_FIELDS:
                rules.append(("Disallow", value))
            elif name in _DELAY_FIELDS:
                rules.append(("Crawl-delay", value))
    if agents:
        groups.append((agents, rules))
    mine = [r for a, rs in groups if token in a for r in rs]
    if not any(token in a for a, _ in groups):
        mine = [r for a, rs in groups if "*" in a for r in rs]
    return mine, sitemaps


def _path_of(url_or_path: str) -> str | None:
    """Path plus query of a URL or path, None if it cannot be parsed."""
    s = url_or_path.encode("utf-8", "replace").decode("utf-8").split("#", 1)[0]
    if s.startswith("/"):
        return s
    if "://" in s:
        try:
            parts = urlsplit(s)
        except ValueError:
            return None
        path = parts.path or "/"
        return f"{path}?{parts.query}" if "?" in s else path
    return "/" + s


@dataclass(frozen=True)
class RobotsRules:
    """Immutable rules of one host. Build with ``from_fetch``; persist with ``to_dict``."""

    status: int | None
    text: str  # the decoded, truncated body (empty unless kind == "parsed")
    fetched_at: float  # when the content in force was fetched
    expires_at: float  # use these rules until then
    refetch_at: float  # ask the fetcher for a fresh copy from then on (<= expires_at)
    stale_fallback: bool = False  # True: a refetch failed and an earlier fresh copy is in force
    config: RobotsConfig = field(default_factory=RobotsConfig, repr=False, compare=False)
    kind: RobotsKind = field(init=False)
    sitemaps: tuple[str, ...] = field(init=False, repr=False)
    _parser: Protego | None = field(init=False, repr=False, compare=False)
    _crawl_delay: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in ("fetched_at", "expires_at", "refetch_at"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite")
        kind = _kind_for_status(self.status)
        parser: Protego | None = None
        sitemaps: list[str] = []
        delay: float | None = None
        if kind == "parsed":
            token = self.config.product_token.lower()
            rules, sitemaps = _select(self.text, token)
            synthetic = f"User-agent: {token}\n" + "".join(f"{k}: {v}\n" for k, v in rules)
            parser = Protego.parse(synthetic)
            delay = parser.crawl_delay(token)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "sitemaps", tuple(sitemaps))
        object.__setattr__(self, "_parser", parser)
        object.__setattr__(self, "_crawl_delay", delay)

    @classmethod
    def from_fetch(
        cls,
        status: int | None,
        body: bytes | None,
        fetched_at: float,
        config: RobotsConfig | None = None,
        previous: RobotsRules | None = None,
    ) -> RobotsRules:
        """Rules from the final response of a robots.txt fetch (``status`` None = unreachable)."""
        cfg = config if config is not None else RobotsConfig()
        if not math.isfinite(fetched_at):
            raise ValueError("fetched_at must be finite")
        kind = _kind_for_status(status)
        if kind == "disallow_all":
            retry_at = fetched_at + cfg.unreachable_retry_s
            if previous is not None and previous.kind != "disallow_all" and previous.is_fresh(fetched_at):
                return cls(
                    previous.status,
                    previous.text,
                    previous.fetched_at,
                    previous.expires_at,
                    min(retry_at, previous.expires_at),
                    True,
                    cfg,
                )
            return cls(status, "", fetched_at, retry_at, retry_at, False, cfg)
        text = _decode(body or b"", cfg.max_bytes) if kind == "parsed" else ""
        expires = fetched_at + cfg.max_age_s
        return cls(status, text, fetched_at, expires, expires, False, cfg)

    def allowed(self, url_or_path: str) -> bool:
        """May our crawler fetch this URL (or path with optional query)?"""
        path = _path_of(url_or_path)
        if path is None:
            return False  # cannot tell what would be requested: do not request it
        if path.split("?", 1)[0] == "/robots.txt":
            return True
        if self._parser is None:
            return self.kind == "allow_all"
        # A dummy authority keeps protego from reading a "//x" path as a host name.
        return self._parser.can_fetch("http://robots.invalid" + path, self.config.product_token.lower())

    def crawl_delay(self) -> float | None:
        """The group's Crawl-delay in seconds, capped at ``crawl_delay_cap_s``; None if absent."""
        if self._crawl_delay is None:
            return None
        return min(self._crawl_delay, self.config.crawl_delay_cap_s)

    def is_fresh(self, now: float) -> bool:
        return now < self.expires_at and now - self.fetched_at <= self.config.max_age_s

    def needs_refetch(self, now: float) -> bool:
        return now >= self.refetch_at

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe form; rules are re-parsed from ``body`` on load."""
        return {
            "v": _SCHEMA_VERSION,
            "status": self.status,
            "body": self.text,
            "fetched_at": self.fetched_at,
            "expires_at": self.expires_at,
            "refetch_at": self.refetch_at,
            "stale_fallback": self.stale_fallback,
        }

    @classmethod
    def from_dict(cls, data: Any, config: RobotsConfig | None = None) -> RobotsRules:
        cfg = config if config is not None else RobotsConfig()
        if not isinstance(data, dict) or data.get("v") != _SCHEMA_VERSION:
            raise RobotsDecodeError("not a robots rules record of a known version")
        status, body, fallback = data.get("status"), data.get("body"), data.get("stale_fallback")
        if status is not None and (type(status) is not int):
            raise RobotsDecodeError("status must be an int or null")
        if not isinstance(body, str) or not isinstance(fallback, bool):
            raise RobotsDecodeError("body must be a string and stale_fallback a bool")
        times: list[float] = []
        for name in ("fetched_at", "expires_at", "refetch_at"):
            value = data.get(name)
            if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
                raise RobotsDecodeError(f"{name} must be a finite number")
            times.append(float(value))
        body = body.encode("utf-8", "replace").decode("utf-8")  # lone surrogates from bad JSON
        return cls(status, body, times[0], times[1], times[2], fallback, cfg)
