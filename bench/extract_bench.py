"""Main-content extractors for near-duplicate fingerprints, side by side on the test pages (issue 11).

For each candidate (the parser's old visible text, resiliparse's main-content html2text, trafilatura's
extract) on the same pages of the synthetic web:
- template site: pairs of the 50 template-heavy pages (~1,500 shared words, ~50-word bodies) whose SimHash
  falls within 3 bits (false merges; must be 0), and how many pages have too little text to be candidates;
- near duplicates: the generator's /p/k vs /print/k pairs (must be within 3 bits), exact mirrors;
- speed: median ms per page over every HTML page of the 200-host web, interleaved rounds in one run.

    .venv/bin/python bench/extract_bench.py [--rounds 5] [--out docs/benchmarks-extract.md]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from streamcrawl_core.simhash import hamming, simhash
from streamcrawl_core.textsig import near_duplicate_signature
from streamcrawl_synthweb.generator import generate
from streamcrawl_synthweb.model import PROFILES
from streamcrawl_synthweb.pages import render_page

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "services"))
from streamcrawl_parser.parse import parse_html


def lxml_visible(html: bytes) -> str:
    return parse_html(html, "http://x.test/", "text/html").text


def resiliparse_main(html: bytes) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.html import HTMLTree

    return str(extract_plain_text(HTMLTree.parse_from_bytes(html, "utf-8"), main_content=True, links=False,
                                  alt_texts=False, list_bullets=False))


def trafilatura_main(html: bytes) -> str:
    import trafilatura

    return trafilatura.extract(html.decode("utf-8", "replace"), include_comments=False, include_tables=True,
                               favor_precision=False, deduplicate=False) or ""


def trafilatura_fast(html: bytes) -> str:
    """trafilatura without its fallback extractors (readability, jusText): ``fast=True``."""
    import trafilatura

    return trafilatura.extract(html.decode("utf-8", "replace"), include_comments=False, include_tables=True,
                               favor_precision=False, deduplicate=False, fast=True) or ""


def parser_main_text(html: bytes) -> str:
    """The parser's own extractor (streamcrawl_parser.extract: trafilatura, fast, options built once)."""
    from streamcrawl_parser.extract import main_text

    return main_text(html.decode("utf-8", "replace"))


EXTRACTORS: dict[str, Callable[[bytes], str]] = {
    "lxml visible text (before)": lxml_visible,
    "resiliparse main content": resiliparse_main,
    "trafilatura extract": trafilatura_main,
    "trafilatura extract, fast=True": trafilatura_fast,
    "the parser's main_text (fast, options built once)": parser_main_text,
}


def pages() -> tuple[list[bytes], list[tuple[bytes, bytes]], list[bytes]]:
    web = generate(200, 11, PROFILES["fast"], port=8480)
    host = web.hosts_of_kind("template_heavy")[0]
    template = [render_page(web, host, p).body for p in host.pages.values() if p.kind == "html"]
    near = []
    for h in web.hosts_of_kind("dup_near"):
        for k in (1, 2):
            near.append((render_page(web, h, h.pages[f"/p/{k}.html"]).body,
                         render_page(web, h, h.pages[f"/print/{k}.html"]).body))
    every = [render_page(web, h, p).body for h in web.hosts for p in h.pages.values() if p.kind == "html"]
    return template, near, every


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    template, near, every = pages()
    rows = []
    times: dict[str, list[float]] = {name: [] for name in EXTRACTORS}
    for _ in range(args.rounds):  # interleaved: every extractor once per round, on the same pages
        for name, fn in EXTRACTORS.items():
            t0 = time.perf_counter()
            for body in every:
                fn(body)
            times[name].append(1000 * (time.perf_counter() - t0) / len(every))
    for name, fn in EXTRACTORS.items():
        texts = [fn(b) for b in template]
        sigs = [near_duplicate_signature(t) for t in texts]  # the product's rule: None = too little text
        fps = [s for s in sigs if s is not None]
        merges = sum(hamming(a, b) <= 3 for a, b in itertools.combinations(fps, 2))
        words = statistics.median(len(t.split()) for t in texts)
        near_d = [hamming(simhash(fn(a)), simhash(fn(b))) for a, b in near]
        rows.append((name, merges, len(sigs) - len(fps), words, max(near_d), statistics.median(times[name])))
    head = ("| extractor | template pairs within 3 bits (of 1,225) | template pages left without a signature "
            "| median words kept | near-dup pairs: max distance | ms/page (median of rounds) |\n"
            "|---|---|---|---|---|---|")
    table = "\n".join([head] + [f"| {n} | {m} | {p} | {w:.0f} | {d} | {t:.3f} |" for n, m, p, w, d, t in rows])
    print(table)
    print(f"\n{len(every)} HTML pages, {args.rounds} interleaved rounds; {len(near)} near-duplicate pairs")
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
