"""Identity helpers: 64-bit URL fingerprints, content hashes and registered domains.

* ``url_fingerprint`` - MurmurHash3 x64-128 (seed 0) of the UTF-8 normalized URL, first 64-bit half,
  returned as a **signed** int64 so it can be written to a Cassandra ``bigint`` (and compared with
  values read back) without conversion. Use ``simhash.from_signed64`` if an unsigned view is needed.
* ``content_hash`` - SHA-256 hex of the raw body (exact-duplicate detection).
* ``registered_domain`` - "eTLD+1" from the Public Suffix List.

The PSL comes from an offline snapshot vendored in ``_vectors/public_suffix_list.dat`` (rules-only copy
of the list bundled with tldextract 5.4.0). We deliberately do not import tldextract at run time: it
imports an HTTP client and may try to refresh the list over the network, and this package must stay
I/O-free. A vendored file also keeps domain grouping stable across dependency upgrades.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import mmh3

__all__ = ["PSL_PATH", "content_hash", "public_suffix", "registered_domain", "url_fingerprint"]

PSL_PATH = Path(__file__).with_name("_vectors") / "public_suffix_list.dat"


def url_fingerprint(normalized_url: str) -> int:
    """Signed 64-bit fingerprint of an already-normalized URL (see ``urls.normalize``).

    The input is hashed as-is; callers must normalize first or equivalent URLs get different keys.
    Raises ``TypeError`` for non-str input.
    """
    if not isinstance(normalized_url, str):
        raise TypeError(f"url_fingerprint() needs str, not {type(normalized_url).__name__}")
    if normalized_url.isascii():  # every normalize() output: mmh3 hashes a str as its UTF-8 bytes
        return int(mmh3.hash64(normalized_url, 0, True, True)[0])
    # surrogatepass: a str with lone surrogates still gets a defined (if odd) fingerprint.
    data = normalized_url.encode("utf-8", "surrogatepass")
    return int(mmh3.hash64(data, 0, True, True)[0])


def content_hash(body: bytes | bytearray | memoryview) -> str:
    """SHA-256 of ``body`` as 64 lowercase hex characters. Raises ``TypeError`` for non-bytes."""
    if not isinstance(body, bytes | bytearray | memoryview):
        raise TypeError(f"content_hash() needs bytes, not {type(body).__name__}")
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True, slots=True)
class _Rules:
    exact: frozenset[str]
    wildcard: frozenset[str]  # "*.ck" stored as "ck"
    exception: frozenset[str]  # "!www.ck" stored as "www.ck"


def _to_ascii(rule: str) -> str | None:
    if rule.isascii():
        return rule
    try:
        # PSL rules are IDNA-2003-clean; our hosts are punycode, so match in that form.
        return ".".join(label.encode("idna").decode("ascii") for label in rule.split("."))
    except UnicodeError:
        return None


@functools.cache
def _load_rules(include_private: bool) -> _Rules:
    exact: set[str] = set()
    wildcard: set[str] = set()
    exception: set[str] = set()
    private = False
    for raw in PSL_PATH.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("// ===BEGIN PRIVATE"):
            private = True
        if not line or line.startswith("//") or (private and not include_private):
            continue
        rule = _to_ascii(line.split()[0].lower())
        if rule is None:
            continue
        if rule.startswith("!"):
            exception.add(rule[1:])
        elif rule.startswith("*."):
            wildcard.add(rule[2:])
        else:
            exact.add(rule)
    return _Rules(frozenset(exact), frozenset(wildcard), frozenset(exception))


def _clean_host(host: str) -> str:
    h = host.strip().rstrip(".").lower()
    if not h.isascii():
        # On failure keep the unicode form; it simply matches no (punycode) rule.
        with contextlib.suppress(UnicodeError):
            h = h.encode("idna").decode("ascii")
    return h


def _is_ip(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def public_suffix(host: str, *, include_private: bool = False) -> str:
    """Public suffix of ``host`` per the PSL algorithm (unknown TLDs use the implicit ``*`` rule)."""
    if not isinstance(host, str):
        raise TypeError(f"public_suffix() needs str, not {type(host).__name__}")
    h = _clean_host(host)
    if not h or _is_ip(h):
        return ""
    labels = h.split(".")
    rules = _load_rules(include_private)
    # Scan from the longest candidate so the first hit is the longest matching rule; exceptions win.
    for i in range(len(labels)):
        candidate = ".".join(labels[i:])
        if candidate in rules.exception:
            return ".".join(labels[i + 1 :])
        if candidate in rules.exact:
            return candidate
        if i + 1 < len(labels) and ".".join(labels[i + 1 :]) in rules.wildcard:
            return candidate
    return labels[-1]


def registered_domain(host: str, *, include_private: bool = False) -> str:
    """Registered domain ("eTLD+1") of ``host``, lowercased, e.g. ``www.bbc.co.uk`` -> ``bbc.co.uk``.

    Defined results instead of errors: IP literals (``10.0.0.1``, ``[::1]``) and hosts that *are* a
    public suffix or a single label (``co.uk``, ``localhost``) return the cleaned host itself; unknown
    TLDs use the PSL default rule (``h0001.synth.test`` -> ``synth.test``); empty input returns "".
    ICANN rules only by default (``a.github.io`` -> ``github.io``), matching tldextract's default.
    """
    if not isinstance(host, str):
        raise TypeError(f"registered_domain() needs str, not {type(host).__name__}")
    return _registered_domain(host, include_private)


@functools.lru_cache(maxsize=65536)  # hosts repeat heavily in a crawl; the PSL walk is the slow part
def _registered_domain(host: str, include_private: bool) -> str:
    h = _clean_host(host)
    if not h or _is_ip(h):
        return h
    suffix = public_suffix(h, include_private=include_private)
    if not suffix or h == suffix:
        return h
    head = h[: -len(suffix) - 1]
    # An empty label before the suffix (".com", "a..com") has no registrable part: return the host.
    last = head.rsplit(".", 1)[-1]
    return f"{last}.{suffix}" if last else h
