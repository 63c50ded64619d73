"""The parser's main-content extractor (an adapter): trafilatura's `extract` on the decoded HTML.

Why trafilatura: near-duplicate signatures must ignore a site's template (streamcrawl_core.textsig).
Measured side by side with resiliparse's main-content html2text on the synthetic web's pages
(`bench/extract_bench.py`, docs/benchmarks-extract.md): resiliparse is ~15x faster but returned no text
at all for 18 of the 50 template-heavy pages (an article holding a list of links), which would leave
them without a signature; trafilatura kept every article and nothing of the template. Equal results
were the condition, so trafilatura it is.

trafilatura imports urllib3 for its own downloader, which the parser never calls; this module is wired in
by main.py and kept out of the handler (tests/unit/test_architecture.py: handlers load no network
driver). A page whose extraction fails yields no text (so no signature), never an exception.
"""

from __future__ import annotations

import logging

import trafilatura
from trafilatura.settings import Extractor

log = logging.getLogger("streamcrawl.parser.extract")

#: Decoded HTML beyond this is not handed to the extractor (a page's main content starts well before;
#: the cap bounds the time and memory one hostile page can take).
MAX_HTML_CHARS = 2_000_000

#: The extraction options, built once: extract() otherwise builds them from its config file on every call
#: (~9% of its time). trafilatura never mutates a shared Extractor (its recall retry works on a copy), so
#: the worker threads that parse large pages may share it. fast=True: no fallback extractors
#: (readability, jusText) compared against trafilatura's own result. Both give the same text on every page
#: of the extractor benchmark's web, in 0.73x and then 0.91x the time (docs/benchmarks-extract.md, 2026-12-03).
OPTIONS = Extractor(output_format="txt", fast=True, precision=False, comments=False, tables=True, dedup=False,
                    with_metadata=False)


def main_text(html: str) -> str:
    """The main content of a decoded HTML page as plain text ("" when none is found)."""
    try:
        text = trafilatura.extract(html[:MAX_HTML_CHARS], options=OPTIONS)
    except Exception as exc:  # the extractor's own bug on a hostile page must not fail the message
        log.warning("main-content extraction failed", extra={"error": repr(exc)[:300]})
        return ""
    return text or ""
