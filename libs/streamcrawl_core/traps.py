"""Crawler-trap defences: budgets, not cleverness.

* ``check_url`` -- stateless limits on one URL: length (2,048 chars), link depth from a seed (15),
  the same path segment 3+ times (``/a/b/a/b/a/b`` from stacked relative links), too many query
  parameters (12).
* ``QueryParamTracker`` -- per host, the number of distinct values seen per query parameter name
  (``/cal?month=1..inf``, session ids). Memory is bounded on every axis: hosts (LRU), parameter
  names per host, and values per name (a parameter that hit its limit keeps only a flag).
* ``HostBudget`` -- pages per host per crawl cycle, raisable for hosts that prove valuable.
* Soft 404s -- a host that answers 200 to a random nonsense path serves soft 404s. We keep a
  signature of that body (SHA-256 of the text with tags, digits, the requested path and
  whitespace noise removed) and drop later pages with the same signature. Exact-signature
  matching is deliberate: it is cheap, self-contained and has no false positives on real pages;
  near-duplicate detection across a host is SimHash's job elsewhere. The probe costs the host a
  politeness slot, so it is spent only once a page *looks* like a "not found" page
  (``looks_soft404``: the title, the headings or the text after the first heading say so, in one of
  ~15 languages); a soft-404 template that says nothing of the kind is not caught.

Reasons returned: ``"too_long"``, ``"too_deep"``, ``"repeated_segment"``, ``"query_explosion"``,
``"malformed"`` (URL that cannot be parsed).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = [
    "SOFT404_PROBE_PREFIX",
    "HostBudget",
    "QueryParamTracker",
    "TrapConfig",
    "TrapReason",
    "check_url",
    "is_soft404",
    "looks_soft404",
    "soft404_echoes",
    "soft404_probe_path",
    "soft404_signature",
]

TrapReason = Literal["too_long", "too_deep", "repeated_segment", "query_explosion", "malformed"]


@dataclass(frozen=True)
class TrapConfig:
    max_url_length: int = 2048
    max_depth: int = 15
    max_repeated_segment: int = 3  # a segment occurring this many times is a trap
    max_query_params: int = 12
    max_param_value_variants: int = 200  # distinct values of one parameter name per host
    max_params_per_host: int = 64  # parameter names tracked per host
    max_tracked_hosts: int = 100_000  # hosts tracked by QueryParamTracker (LRU beyond)
    host_page_budget: int = 1000  # pages per host per crawl cycle

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.max_repeated_segment < 2:
            raise ValueError("max_repeated_segment must be >= 2")


def check_url(url: str, depth: int, config: TrapConfig | None = None) -> TrapReason | None:
    """First trap rule ``url`` breaks, or None. ``depth`` = links followed from a seed (>= 0)."""
    cfg = config if config is not None else TrapConfig()
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth!r}")
    if len(url) > cfg.max_url_length:
        return "too_long"
    if depth > cfg.max_depth:
        return "too_deep"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "malformed"
    # Decoded and case-sensitive: "/a/%61/a" loops as much as "/a/a/a"; paths are case-sensitive.
    segments = [unquote(s) for s in parts.path.split("/") if s]
    if segments and Counter(segments).most_common(1)[0][1] >= cfg.max_repeated_segment:
        return "repeated_segment"
    if parts.query and len(parse_qsl(parts.query, keep_blank_values=True)) > cfg.max_query_params:
        return "query_explosion"
    return None


class QueryParamTracker:
    """Per-host distinct-value counts of query parameters, with bounded memory."""

    def __init__(self, config: TrapConfig | None = None) -> None:
        self._cfg = config if config is not None else TrapConfig()
        # host -> param name -> set of 8-byte value digests, or None once the name exploded
        self._hosts: OrderedDict[str, dict[str, set[bytes] | None]] = OrderedDict()

    def observe(self, host: str, url: str) -> TrapReason | None:
        """Record ``url``'s parameters; "query_explosion" if it adds a value to an exhausted
        parameter. Values already seen stay acceptable, so known pages are not cut off."""
        try:
            query = urlsplit(url).query
        except ValueError:
            return "malformed"
        if not query:
            return None
        params = self._hosts.get(host)
        if params is None:
            params = self._hosts[host] = {}
            if len(self._hosts) > self._cfg.max_tracked_hosts:
                self._hosts.popitem(last=False)  # forget the least recently seen host
        else:
            self._hosts.move_to_end(host)
        verdict: TrapReason | None = None
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name not in params and len(params) >= self._cfg.max_params_per_host:
                continue  # untracked names: the per-URL parameter cap in check_url still applies
            values = params.setdefault(name, set())
            if values is None:
                verdict = "query_explosion"
                continue
            digest = hashlib.blake2b(value.encode("utf-8", "replace"), digest_size=8).digest()
            if digest in values:
                continue
            if len(values) >= self._cfg.max_param_value_variants:
                params[name] = None  # drop the values: from now on only the flag is kept
                verdict = "query_explosion"
            else:
                values.add(digest)
        return verdict

    def exploded(self, host: str) -> tuple[str, ...]:
        """Parameter names of ``host`` that hit the variant limit (for operators / logs)."""
        params = self._hosts.get(host, {})
        return tuple(sorted(name for name, values in params.items() if values is None))

    def __len__(self) -> int:
        return len(self._hosts)


class HostBudget:
    """Pages per host per crawl cycle; a cycle is any int the caller increments."""

    def __init__(self, config: TrapConfig | None = None) -> None:
        self._default = (config if config is not None else TrapConfig()).host_page_budget
        self._used: dict[str, tuple[int, int]] = {}  # host -> (cycle, pages used in it)
        self._budgets: dict[str, int] = {}

    def set_budget(self, host: str, budget: int) -> None:
        """Raise (or lower) one host's budget, e.g. for hosts with many unique, linked-to pages."""
        if budget < 0:
            raise ValueError("budget must be >= 0")
        self._budgets[host] = budget

    def budget(self, host: str) -> int:
        return self._budgets.get(host, self._default)

    def used(self, host: str, cycle: int) -> int:
        entry = self._used.get(host)
        return entry[1] if entry is not None and entry[0] == cycle else 0

    def try_consume(self, host: str, cycle: int) -> bool:
        """Take one page of ``host``'s budget in ``cycle``; False when exhausted."""
        count = self.used(host, cycle)
        if count >= self.budget(host):
            return False
        self._used[host] = (cycle, count + 1)
        return True

    def set_used(self, host: str, cycle: int, used: int) -> None:
        """Set ``host``'s count in ``cycle``, e.g. restored from persisted state after a restart."""
        if used < 0:
            raise ValueError("used must be >= 0")
        self._used[host] = (cycle, used)

    def forget(self, host: str) -> None:
        """Drop ``host``'s counter (e.g. its partition moved to another process)."""
        self._used.pop(host, None)

    def forget_before(self, cycle: int) -> int:
        """Drop counters of cycles before ``cycle`` (bounds memory); returns how many."""
        old = [h for h, (c, _) in self._used.items() if c < cycle]
        for h in old:
            del self._used[h]
        return len(old)


_TAG_RE = re.compile(r"<[^>]*>")
_SCRIPT_RE = re.compile(r"<(script|style)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)
_DIGITS_RE = re.compile(r"\d+")
_SPACE_RE = re.compile(r"\s+")


def soft404_signature(body_text: str, echoed: Iterable[str] = ()) -> int:
    """64-bit signature of a page body that ignores what changes between soft-404 answers.

    ``echoed`` -- strings the server may repeat back (the requested path, its last segment):
    they are removed so "/x7Gq not found" and "/docs/a not found" sign the same. Digits
    (timestamps, request ids) and markup are removed too.
    """
    text = _SCRIPT_RE.sub(" ", body_text)
    # Remove echoes before and after unquoting the markup-free text; longest first so a
    # path is removed before its own last segment could split it.
    for token in sorted({t for t in echoed if t}, key=len, reverse=True):
        text = text.replace(token, " ").replace(unquote(token), " ")
    text = _TAG_RE.sub(" ", text).lower()
    text = _SPACE_RE.sub(" ", _DIGITS_RE.sub(" ", text)).strip()
    digest = hashlib.sha256(text.encode("utf-8", "replace")).digest()
    return int.from_bytes(digest[:8], "big")


#: Paths of the per-host nonsense probe start with this (never a real page: tests and logs can tell them apart).
SOFT404_PROBE_PREFIX = "/streamcrawl-probe-"


def soft404_probe_path(token: str) -> str:
    """The nonsense path probed on a host; ``token`` is random (e.g. 16 hex digits) so no site has it."""
    if not token or not token.isalnum():
        raise ValueError(f"token must be non-empty and alphanumeric, got {token!r}")
    return f"{SOFT404_PROBE_PREFIX}{token}.html"


def soft404_echoes(path: str) -> list[str]:
    """What a server may echo back of a requested ``path`` (with its query, if any): the path with and
    without the query, and its last segment when that has an extension ("page.html"). A bare word
    ("page", "intro") is never removed: it may also be a word of the error template, and removing it
    from a page but not from the probe would break the match."""
    bare = path.split("#", 1)[0].split("?", 1)[0]
    last = bare.rstrip("/").rsplit("/", 1)[-1]
    pieces = [path, bare] + ([last] if "." in last.strip(".") else [])
    return list(dict.fromkeys(p for p in pieces if p))


def is_soft404(signature: int, host_signature: int | None) -> bool:
    """True if a page's signature equals the host's nonsense-path signature.

    ``host_signature`` is None when the host answered the nonsense probe with a real 404.
    """
    return host_signature is not None and signature == host_signature


# What "not found" pages say, lower case. Phrases are matched as substrings (so "no encontrad" covers
# -o/-a/-os); single words only as whole words (_NOT_FOUND_WORDS: "error" is not "terror"; Turkish "hata"
# is left out, being a common syllable pair, and its "bulunamad" kept). Broad on purpose: a false match
# costs one probe and one refetch on that host, once per robots.txt lifetime; a miss lets that host's soft
# 404s through until a page that does match comes by.
_NOT_FOUND_PHRASES = (
    # en
    "not found", "cannot be found", "can't be found", "can\u2019t be found", "could not be found",
    "couldn't find", "couldn\u2019t find", "can't find", "can\u2019t find", "cannot find", "unable to find",
    "doesn't exist", "doesn\u2019t exist", "does not exist", "no longer exists", "no longer available",
    "page you requested", "page you were looking for", "page you are looking for", "nothing here",
    "nothing was found", "missing page", "page is missing",
    # de, fr, es, it, pt, nl, pl, cs, sv/da/no, tr
    "nicht gefunden", "existiert nicht", "introuvable", "n'existe pas", "n\u2019existe pas", "non trouv",
    "no encontrad", "no existe", "no se encuentra", "no se pudo encontrar", "non trovat", "non esiste",
    "não encontrad", "nao encontrad", "não existe", "niet gevonden", "bestaat niet", "nie znaleziono",
    "nie istnieje", "nenalezen", "neexistuje", "hittades inte", "finns inte", "ikke fundet", "ikke funnet",
    "finnes ikke", "bulunamad",
    # ru, uk, ar, he, ja, zh, ko
    "не найден", "не существует", "не знайден", "غير موجود", "לא נמצא", "見つかりません", "存在しません",
    "找不到", "不存在", "未找到", "찾을 수 없",
)
_NOT_FOUND_WORDS = frozenset({"404", "oops", "error", "fehler", "erreur", "errore", "erro", "błąd",
                              "ошибка", "помилка"})
_WORD_RE = re.compile(r"\w+")
#: The elements read whole (their first 300 characters, at most 8 of each): where "not found" is said.
_NAMED = ("title", "h1", "h2", "h3")
_NAMED_CHARS = 300
#: Markup-free text read after the first heading (or from the body's start when there is none): where a
#: page that keeps the site's title and headings puts its "we could not find that page".
_LEAD_CHARS = 1000
#: Only so much of a page is read: the title and the message come early, a long page is not the case.
_SCAN_CHARS = 64 * 1024


def looks_soft404(html: str) -> bool:
    """True if an HTML (or text) page may be a "not found" page: its title, an h1-h3 heading or the first
    ~1,000 characters of text after its first heading (or body start) carry a "not found" phrase.

    This decides only whether a host is worth its nonsense-path probe (see the module docstring): the
    verdict on the page itself is still ``is_soft404``'s, against the probe's signature. It runs on every
    page of a host not probed yet, so it finds elements with str.find rather than regular expressions.
    """
    low = html[:_SCAN_CHARS].lower()
    parts: list[str] = []
    first_heading = len(low)
    for name in _NAMED:
        at, seen = low.find("<" + name), 0
        while at != -1 and seen < 8:
            gt = low.find(">", at)
            if gt == -1:
                break
            if name != "title":
                first_heading = min(first_heading, gt + 1)
            end = low.find("</" + name, gt, gt + 1 + _NAMED_CHARS)
            parts.append(low[gt + 1:end if end != -1 else gt + 1 + _NAMED_CHARS])
            at, seen = low.find("<" + name, gt), seen + 1
    if first_heading == len(low):
        body = low.find("<body")
        first_heading = low.find(">", body) + 1 if body != -1 else 0
    lead = low[first_heading:first_heading + 3 * _LEAD_CHARS]
    if "<script" in lead or "<style" in lead:
        lead = _SCRIPT_RE.sub(" ", lead)
    parts.append(" ".join(_TAG_RE.sub(" ", lead).split())[:_LEAD_CHARS])
    text = " ".join(_TAG_RE.sub(" ", " ".join(parts)).split())
    # A loop of substring tests: several times faster than one regular expression of ~70 alternatives.
    if any(phrase in text for phrase in _NOT_FOUND_PHRASES):
        return True
    return not _NOT_FOUND_WORDS.isdisjoint(_WORD_RE.findall(text))
