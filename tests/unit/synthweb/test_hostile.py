"""The hostile corpus table (streamcrawl_synthweb.hostile_cases): enough cases, each served, and the docs
table is the tested one (docs/hostile-corpus.md embeds markdown() verbatim)."""

from __future__ import annotations

from pathlib import Path

from streamcrawl_synthweb.hostile import BEHAVIOURS
from streamcrawl_synthweb.hostile_cases import CASES, markdown

ROOT = Path(__file__).resolve().parents[3]
#: Cases the request itself carries (the URL) or the DNS server or TLS port plays, with no page behaviour.
NOT_A_PAGE = {"64k-url", "control-char-url", "tls-self-signed", "tls-on-plain-port", "plain-on-tls-port"}


def test_at_least_fifty_cases_with_unique_names() -> None:
    names = [c.name for c in CASES]
    assert len(names) >= 50 and len(set(names)) == len(names)


def test_every_page_case_has_a_behaviour() -> None:
    for c in CASES:
        if c.url_path.startswith("/c/") and c.url_path not in ("/c/ok",) and c.name not in NOT_A_PAGE:
            assert c.url_path[3:] in BEHAVIOURS, c.name


def test_the_docs_table_is_the_tested_one() -> None:
    assert markdown() in (ROOT / "docs" / "hostile-corpus.md").read_text(encoding="utf-8")
