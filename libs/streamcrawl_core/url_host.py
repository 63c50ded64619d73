"""Host and authority normalization: IDNA to punycode, IPv4/IPv6 literals in canonical form, label
syntax, ports (default port dropped). Rejections are ``UrlError("host" | "port" | "userinfo")``.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from urllib.parse import unquote

import idna

from streamcrawl_core.url_policy import UrlError

__all__ = ["DEFAULT_PORT", "normalize_host", "split_authority"]

DEFAULT_PORT = {"http": "80", "https": "443"}

_LABEL_RE = re.compile(r"[a-z0-9_](?:[a-z0-9_\-]{0,61}[a-z0-9_])?")
# A last label that is a number makes browsers read the host as IPv4 (incl. hex/shorthand forms):
# such hosts are only accepted as canonical dotted-quad addresses.
_NUMERIC_LABEL_RE = re.compile(r"[0-9]+|0x[0-9a-f]*")


def _idna_encode(host: str) -> str:
    try:
        return idna.encode(host, uts46=True).decode("ascii")
    except Exception:  # idna raises several error types on hostile input; all mean "try per label"
        pass
    out = []
    for label in re.split(r"[.\u3002\uff0e\uff61]", host):
        if label.isascii():
            out.append(label)
            continue
        try:
            out.append(idna.encode(label, uts46=True).decode("ascii"))
        except Exception:
            try:
                out.append(label.encode("idna").decode("ascii"))
            except UnicodeError as exc:
                raise UrlError("host", "not an IDNA-encodable host") from exc
    return ".".join(out)


@functools.lru_cache(maxsize=65536)
def normalize_host(raw: str) -> str:
    host = raw
    if "%" in host:
        try:
            host = unquote(host, encoding="utf-8", errors="strict")
        except UnicodeError as exc:
            raise UrlError("host", "bad percent-encoding in host") from exc
    if host.startswith("["):
        inner = host[1:-1]
        if not host.endswith("]") or "%" in inner or inner[:1] in ("v", "V"):
            raise UrlError("host", "unsupported IP literal")  # zone ids and IPvFuture
        try:
            return f"[{ipaddress.IPv6Address(inner).compressed}]"
        except ValueError as exc:
            raise UrlError("host", "invalid IPv6 literal") from exc
    if host.endswith("."):  # FQDN form: "example.com." is the same host
        host = host[:-1]
    if not host.isascii():
        host = _idna_encode(host)
    host = host.lower()
    if not host or len(host) > 253:
        raise UrlError("host", "empty or over-long host")
    labels = host.split(".")
    if _NUMERIC_LABEL_RE.fullmatch(labels[-1]):
        try:
            return str(ipaddress.IPv4Address(host))
        except ValueError as exc:
            raise UrlError("host", "numeric host that is not a dotted-quad IPv4") from exc
    for label in labels:
        if _LABEL_RE.fullmatch(label) is None:
            raise UrlError("host", f"invalid host label {label[:64]!r}")
    return host


def split_authority(authority: str, scheme: str) -> tuple[str, str]:
    if "@" in authority:
        raise UrlError("userinfo", "credentials in URL")
    if authority.startswith("["):
        end = authority.find("]") + 1
        host, rest = (authority[:end], authority[end:]) if end else (authority, "")
        if rest and not rest.startswith(":"):
            raise UrlError("host", "garbage after IP literal")
        port = rest[1:]
    else:
        host, _, port = authority.partition(":")
    if not host:
        raise UrlError("host", "empty host")
    if port:
        if not (port.isascii() and port.isdigit()) or not 0 < int(port) <= 65535:
            raise UrlError("port", f"invalid port {port[:16]!r}")
        port = str(int(port))  # drop leading zeros
        if port == DEFAULT_PORT[scheme]:
            port = ""
    return normalize_host(host), port
