"""Where the CQL migrations (``cql/``) and the message JSON Schemas (``json/``) are.

The repository's top-level ``schemas/`` folder is their one source. A wheel carries a copy inside this
package (setup.py's build step copies it in; nothing is duplicated in the source tree), found through
importlib.resources; an editable install or a plain checkout falls back to ``schemas/`` of the checkout.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

KINDS = ("cql", "json")
_CHECKOUT = Path(__file__).resolve().parents[2] / "schemas"


def schema_dir(kind: str) -> Path:
    """The directory of one kind of schema ("cql" or "json"): packaged first, else the checkout's."""
    if kind not in KINDS:
        raise ValueError(f"unknown schema kind {kind!r}; expected one of {KINDS}")
    packaged = files(__name__) / kind
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    checkout = _CHECKOUT / kind
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"no {kind} schemas: neither {packaged} (installed package) nor {checkout} (checkout)")


def migrations_dir() -> Path:
    """The ordered NNNN_name.cql migrations."""
    return schema_dir("cql")


def json_schemas_dir() -> Path:
    """The JSON Schemas of the Kafka messages (exported from streamcrawl_contracts)."""
    return schema_dir("json")
