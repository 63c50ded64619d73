"""DedupHandler + SeenSet against the in-memory CrawlState and MemoryBlobStore."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest
from streamcrawl_contracts.messages import (
    ArchiveRecord,
    FetchResult,
    HttpExchange,
    PageFetched,
    ParsedPage,
    SeedMessage,
    UrlCandidates,
    UrlMessage,
)
from streamcrawl_contracts.topics import ARCHIVE, PAGE_FETCHED, URL_CANDIDATES, URLS
from streamcrawl_core.fingerprint import url_fingerprint
from streamcrawl_core.partition import partition_for
from streamcrawl_core.simhash import from_signed64, to_signed64
from streamcrawl_core.traps import TrapConfig
from streamcrawl_dedup.handler import DedupHandler
from streamcrawl_dedup.seen import SeenSet, offset_key, snapshot_key
from streamcrawl_runtime.memory import MemoryBlobStore, MemoryCrawlState
from streamcrawl_runtime.ports.errors import PoisonMessage, TransientError
from streamcrawl_runtime.ports.loop import Output, Record
from streamcrawl_runtime.ports.state import HostState

T0 = 1_700_000_000.0
SIM = to_signed64(0xF0F0_1234_8000_0001)  # high bit set: stored as a negative bigint


def host_of(url: str) -> str:
    return url.split("/")[2]


def rec(host: str) -> Record:
    return Record("t", partition_for(host, 8), 0, host, b"")


class Rig:
    def __init__(self, state: MemoryCrawlState | None = None, blobs: MemoryBlobStore | None = None,
                 budget: int = 1000, assign: bool = True) -> None:
        self.state = state or MemoryCrawlState()
        self.blobs = blobs or MemoryBlobStore()
        self.seen = SeenSet(self.state, self.blobs, capacity=10_000, fp_rate=0.001)
        self.h = DedupHandler(self.state, self.seen, TrapConfig(host_page_budget=budget), partitions=8)
        if assign:
            self.run(self.h.on_assign(list(range(8))))

    def run(self, coro: Any) -> Any:
        return asyncio.run(coro)

    def cand(self, url: str, depth: int = 1, source: str = "http://src.test/") -> Sequence[Output]:
        host = host_of(url)
        c = UrlCandidates(host=host, depth=depth, source_url=source, urls=[url], url_fps=[url_fingerprint(url)])
        return self.run(self.h.handle(rec(host), c))  # type: ignore[no-any-return]

    def page(self, url: str, content_hash: str, at: float = T0, simhash: int | None = SIM,
             links: Sequence[str] = (), nofollow: bool = False, depth: int = 1) -> Sequence[Output]:
        return self.run(self.h.handle(rec(host_of(url)), make_page(url, content_hash, at, simhash, links,
                                                                   nofollow, depth)))  # type: ignore[no-any-return]

    def url_state(self, url: str) -> Any:
        return self.state.urls[(host_of(url), url_fingerprint(url))]


def make_page(url: str, content_hash: str, at: float = T0, simhash: int | None = SIM, links: Sequence[str] = (),
              nofollow: bool = False, depth: int = 1) -> ParsedPage:
    return ParsedPage(url=url, host=host_of(url), url_fp=url_fingerprint(url), depth=depth,
                      fetched_at=datetime.fromtimestamp(at, UTC), http_status=200, content_type="text/html",
                      content_hash=content_hash, storage_key=f"pages/{content_hash[:2]}/{content_hash}.gz",
                      simhash=simhash, title="t", out_links=list(links), nofollow=nofollow)


def published(outs: Sequence[Output]) -> list[PageFetched]:
    return [o.value for o in outs if o.topic == PAGE_FETCHED]  # type: ignore[misc]


def candidates(outs: Sequence[Output]) -> list[tuple[str | None, UrlCandidates]]:
    return [(o.key, o.value) for o in outs if o.topic == URL_CANDIDATES]  # type: ignore[misc]


# ------------------------------------------------------------------ URL candidates

def test_new_url_goes_to_frontier_keyed_by_host_and_is_recorded() -> None:
    rig = Rig()
    [out] = rig.cand("http://a.test/x", depth=2, source="http://src.test/p")
    assert out.topic == URLS and out.key == "a.test"
    msg = out.value
    assert isinstance(msg, UrlMessage)
    assert (msg.url, msg.host, msg.url_fp, msg.depth, msg.priority, msg.kind, msg.via) == (
        "http://a.test/x", "a.test", url_fingerprint("http://a.test/x"), 2, 3, "discovery", "http://src.test/p")
    st = rig.url_state("http://a.test/x")
    assert (st.status, st.depth, st.url) == ("queued", 2, "http://a.test/x")


def test_seed_candidate_gets_top_priority() -> None:
    [out] = Rig().cand("http://a.test/", depth=0, source="seed:user")
    assert out.value.priority == 0  # type: ignore[attr-defined]


def test_a_candidates_own_priority_overrides_the_depth_rule() -> None:
    rig = Rig()
    url = "http://a.test/sitemap.xml"  # a guessed sitemap: the fetcher sends it at the lowest priority
    c = UrlCandidates(host="a.test", depth=0, source_url="robots:http://a.test/robots.txt", urls=[url],
                      url_fps=[url_fingerprint(url)], priority=9)
    [out] = rig.run(rig.h.handle(rec("a.test"), c))
    assert (out.value.priority, out.value.depth) == (9, 0)  # type: ignore[attr-defined]
    [out] = rig.cand("http://a.test/p", depth=0, source="robots:http://a.test/robots.txt")
    assert out.value.priority == 1  # type: ignore[attr-defined]  # none given: 1 + depth


def test_same_url_again_is_dropped_from_memory_in_this_process_and_via_the_exact_store_after() -> None:
    rig = Rig()
    assert len(rig.cand("http://a.test/x")) == 1
    assert rig.seen.exact_reads == 0  # Bloom "no" is definitive
    assert rig.cand("http://a.test/x") == []
    assert rig.seen.exact_reads == 0  # admitted by this process: settled from memory
    # A restarted process (same filter, empty memory) settles the Bloom "maybe" with the exact store.
    restarted = Rig(state=rig.state, blobs=rig.blobs, assign=False)
    restarted.seen.blooms = rig.seen.blooms
    restarted.run(restarted.h.on_assign([]))
    assert restarted.cand("http://a.test/x") == []
    assert restarted.seen.exact_reads == 1


def test_a_batch_of_new_urls_is_one_write() -> None:
    rig = Rig()
    batch = UrlCandidates(host="a.test", depth=1, source_url="http://s.test/",
                          urls=["http://a.test/1", "http://a.test/2", "http://a.test/3"],
                          url_fps=[url_fingerprint(f"http://a.test/{i}") for i in (1, 2, 3)])
    assert len(rig.run(rig.h.handle(rec("a.test"), batch))) == 3
    assert [c for c in rig.state.calls if c[0] == "url_insert_discovered_many"] == [
        ("url_insert_discovered_many", "a.test", 3)]
    # the same event delivered again (a retry after a failed produce) goes out again, from memory
    again = rig.run(rig.h.handle(rec("a.test"), batch))
    assert [o.value.replayed for o in again] == [True, True, True]  # type: ignore[attr-defined]
    assert rig.seen.exact_reads == 0


def test_bloom_false_positive_is_settled_by_the_exact_store() -> None:
    rig = Rig()
    fp = url_fingerprint("http://a.test/fp")
    rig.seen.blooms[partition_for("a.test", 8)].add(fp)  # "maybe", but never recorded in url_state
    assert len(rig.cand("http://a.test/fp")) == 1
    assert rig.seen.exact_reads == 1


@pytest.mark.parametrize("url,depth", [("http://a.test/deep", 16), ("http://a.test/a/b/a/b/a/b", 1),
                                       ("http://a.test/s?" + "&".join(f"p{i}=1" for i in range(13)), 1)])
def test_trap_urls_are_dropped_and_not_recorded(url: str, depth: int) -> None:
    rig = Rig()
    assert rig.cand(url, depth=depth) == []
    assert rig.state.urls == {}


def test_per_host_budget() -> None:
    rig = Rig(budget=2)
    assert len(rig.cand("http://a.test/1")) == 1
    assert len(rig.cand("http://a.test/2")) == 1
    assert rig.cand("http://a.test/3") == []
    assert rig.cand("http://a.test/1") == []  # seen, not a budget question
    assert len(rig.cand("http://b.test/1")) == 1


def test_a_failed_url_state_write_gives_the_budget_back_for_the_retry() -> None:
    """The admitted URLs' url_state write fails (Cassandra restarting) and the loop retries the message: the
    retry admits them again, and must find their budget still there. Counted twice, a host with a budget
    of 3 lost its third URL as over budget."""
    class WriteFailsOnce(MemoryCrawlState):
        fail = 1

        async def url_insert_discovered_many(self, *args: Any, **kw: Any) -> None:
            if self.fail:
                self.fail -= 1
                raise TransientError("cassandra: CassErrorLibNoHostsAvailable")
            await super().url_insert_discovered_many(*args, **kw)

    rig = Rig(WriteFailsOnce(), budget=3)
    urls = ["http://a.test/1", "http://a.test/2"]
    c = UrlCandidates(host="a.test", depth=1, source_url="http://src.test/", urls=urls,
                      url_fps=[url_fingerprint(u) for u in urls])
    with pytest.raises(TransientError):
        rig.run(rig.h.handle(rec("a.test"), c))
    assert [o.value.url for o in rig.run(rig.h.handle(rec("a.test"), c))] == urls  # type: ignore[attr-defined]
    assert len(rig.cand("http://a.test/3")) == 1  # the budget's third URL
    assert rig.cand("http://a.test/4") == []


def test_blocklist_suffix_and_exact_host() -> None:
    rig = Rig()
    rig.state.blocklist = [".Example.com", "bad.test"]
    assert rig.run(rig.h.tick(T0)) == []
    for url in ("http://example.com/", "http://a.example.com/", "http://x.y.example.com/", "http://bad.test/"):
        assert rig.cand(url) == [], url
    for url in ("http://notexample.com/", "http://sub.bad.test/", "http://example.com.evil.test/"):
        assert len(rig.cand(url)) == 1, url
    # Blocked URLs were not marked seen: lifting the block (picked up >= 10 s later) admits them.
    rig.state.blocklist = []
    rig.run(rig.h.tick(T0 + 5))
    assert rig.cand("http://bad.test/") == []
    rig.run(rig.h.tick(T0 + 10))
    assert len(rig.cand("http://bad.test/")) == 1


def test_unexpected_message_is_poison() -> None:
    rig = Rig()
    with pytest.raises(PoisonMessage):
        rig.run(rig.h.handle(rec("a.test"), SeedMessage(url="http://a.test/")))


# ------------------------------------------------------------------ parsed pages

def test_first_page_is_published_and_out_links_keyed_by_their_host() -> None:
    rig = Rig()
    links = ["http://b.test/1", "HTTP://C.test:80/a/../b", "javascript:void(0)", "http://a.test/self"]
    outs = rig.page("http://a.test/p", "h1", links=links, depth=2)
    [pf] = published(outs)
    assert (pf.url, pf.canonical_url, pf.content_hash, pf.simhash, pf.changed) == (
        "http://a.test/p", "http://a.test/p", "h1", SIM, False)
    assert [o.key for o in outs if o.topic == PAGE_FETCHED] == ["a.test"]
    cands = candidates(outs)
    assert [(k, c.urls, c.depth, c.source_url) for k, c in cands] == [
        ("b.test", ["http://b.test/1"], 3, "http://a.test/p"),
        ("c.test", ["http://c.test/b"], 3, "http://a.test/p"),
        ("a.test", ["http://a.test/self"], 3, "http://a.test/p")]
    assert all(c.url_fps == [url_fingerprint(u) for u in c.urls] and c.host == k for k, c in cands)
    st = rig.url_state("http://a.test/p")
    assert (st.status, st.content_hash, st.fetch_count, st.canonical_url) == ("fetched", "h1", 1, None)


def test_out_links_go_out_as_one_message_per_target_host() -> None:
    rig = Rig()
    links = ["http://b.test/1", "http://a.test/2", "http://b.test/2", "http://B.test/1", "http://a.test/3"]
    cands = candidates(rig.page("http://a.test/p", "h1", links=links))
    assert [(k, c.urls) for k, c in cands] == [("b.test", ["http://b.test/1", "http://b.test/2"]),
                                               ("a.test", ["http://a.test/2", "http://a.test/3"])]
    # The batch is handled link by link: both new a.test URLs reach the frontier, in order.
    _, batch = cands[1]
    outs = rig.run(rig.h.handle(rec("a.test"), batch))
    assert [(o.topic, o.value.url, o.value.depth) for o in outs] == [  # type: ignore[attr-defined]
        (URLS, "http://a.test/2", 2), (URLS, "http://a.test/3", 2)]
    assert rig.run(rig.h.handle(rec("a.test"), batch.model_copy(update={"event_id": "other"}))) == []


def test_candidate_batch_with_mismatched_fingerprints_is_rejected() -> None:
    with pytest.raises(ValueError, match="2 urls but 1 url_fps"):
        UrlCandidates(host="a.test", depth=1, source_url="s", urls=["http://a.test/1", "http://a.test/2"],
                      url_fps=[1])


def test_exact_duplicate_is_an_alias_not_published() -> None:
    rig = Rig()
    assert published(rig.page("http://a.test/p", "h1", links=["http://b.test/1"]))
    assert rig.page("http://b.test/copy", "h1", simhash=None, links=["http://c.test/1"]) == []
    st = rig.url_state("http://b.test/copy")
    assert (st.status, st.canonical_url) == ("duplicate", "http://a.test/p")


@pytest.mark.parametrize("flip_bits,dup", [(0b111 << 20, True), (0b1111 << 40, False)])
def test_near_duplicate_within_three_bits(flip_bits: int, dup: bool) -> None:
    rig = Rig()
    rig.page("http://a.test/p", "h1")
    near = to_signed64((SIM & 0xFFFFFFFFFFFFFFFF) ^ flip_bits)
    outs = rig.page("http://b.test/q", "h2", simhash=near, links=["http://c.test/1"])
    st = rig.url_state("http://b.test/q")
    if dup:
        assert outs == [] and (st.status, st.canonical_url) == ("duplicate", "http://a.test/p")
    else:
        assert len(published(outs)) == 1 and st.status == "fetched"


def test_a_far_fingerprint_that_shares_a_table_key_is_a_candidate_but_not_a_duplicate() -> None:
    # The near-duplicate read covers the 20 permuted-table keys: a superset. FAR agrees with SIM on blocks
    # 0-2 (one table's key) and has blocks 3-5 inverted (31 bits away): returned, then filtered out.
    far = to_signed64(from_signed64(SIM) ^ (((1 << 31) - 1) << 33))
    rig = Rig()
    assert published(rig.page("http://a.test/far", "h1", simhash=far))
    assert rig.run(rig.state.simhash_candidates(SIM)) == [(far, "http://a.test/far")]
    assert len(published(rig.page("http://b.test/q", "h2"))) == 1
    st = rig.url_state("http://b.test/q")
    assert (st.status, st.canonical_url) == ("fetched", None)


def page_writes(state: MemoryCrawlState, url: str) -> list[str]:
    return [c[0] for c in state.calls if url in c]


def test_a_new_page_is_recorded_and_indexed_in_one_request() -> None:
    rig = Rig()
    url = "http://a.test/p"
    assert published(rig.page(url, "h1"))
    assert page_writes(rig.state, url) == ["url_put_fetch_and_simhash"]
    assert rig.run(rig.state.simhash_candidates(SIM)) == [(SIM, url)]
    # Not indexed: a duplicate (exact or near), a page without a fingerprint, an unchanged re-fetch.
    near = to_signed64((SIM & 0xFFFFFFFFFFFFFFFF) ^ 0b11)
    assert rig.page("http://b.test/copy", "h1") == []
    assert rig.page("http://b.test/near", "h2", simhash=near) == []
    assert published(rig.page("http://b.test/plain", "h3", simhash=None))
    assert rig.page(url, "h1", at=T0 + 3600) == []
    for other in ("http://b.test/copy", "http://b.test/near", "http://b.test/plain"):
        assert page_writes(rig.state, other) == ["url_put_fetch"]
    assert page_writes(rig.state, url) == ["url_put_fetch_and_simhash", "url_put_fetch"]
    assert rig.run(rig.state.simhash_candidates(SIM)) == [(SIM, url)]


def test_a_replay_after_a_half_applied_batch_indexes_the_page() -> None:
    # The unlogged batch is not atomic: url_state landed, the simhash_index rows did not. The replayed
    # message sees its own url_state row (a replay) and must still leave the page indexed.
    rig = Rig()
    url = "http://a.test/p"
    first = published(rig.page(url, "h1"))
    rig.state.simhash_index.clear()
    again = published(rig.page(url, "h1"))
    assert [p.url for p in again] == [p.url for p in first] == [url]
    assert rig.run(rig.state.simhash_candidates(SIM)) == [(SIM, url)]
    near = to_signed64((SIM & 0xFFFFFFFFFFFFFFFF) ^ 0b1)
    assert rig.page("http://b.test/q", "h2", simhash=near) == []
    assert rig.url_state("http://b.test/q").canonical_url == url


def test_a_failed_batch_fails_the_message_and_its_retry_records_the_page() -> None:
    class Failing(MemoryCrawlState):
        fail = 1

        async def url_put_fetch_and_simhash(self, st: Any) -> None:
            if self.fail:
                self.fail -= 1
                raise TransientError("cassandra: timeout")
            await super().url_put_fetch_and_simhash(st)

    rig = Rig(Failing())
    url = "http://a.test/p"
    with pytest.raises(TransientError):
        rig.page(url, "h1")
    assert rig.state.urls == {} and rig.state.simhash_index == {}
    [pf] = published(rig.page(url, "h1"))  # the loop's retry
    assert (pf.url, pf.changed) == (url, False)
    assert rig.url_state(url).status == "fetched"
    assert rig.run(rig.state.simhash_candidates(SIM)) == [(SIM, url)]


def test_unchanged_refetch_publishes_nothing_changed_one_does() -> None:
    rig = Rig()
    rig.page("http://a.test/p", "h1", at=T0)
    assert rig.page("http://a.test/p", "h1", at=T0 + 3600, links=["http://b.test/1"]) == []
    assert rig.url_state("http://a.test/p").fetch_count == 2
    outs = rig.page("http://a.test/p", "h2", at=T0 + 7200, simhash=to_signed64(123), links=["http://b.test/1"])
    [pf] = published(outs)
    assert pf.changed is True and pf.content_hash == "h2"
    assert len(candidates(outs)) == 1
    assert rig.url_state("http://a.test/p").fetch_count == 3


def test_replay_of_a_first_fetch_republishes() -> None:
    rig = Rig()
    first = rig.page("http://a.test/p", "h1", links=["http://b.test/1"])
    again = rig.page("http://a.test/p", "h1", links=["http://b.test/1"])  # same fetched_at: a replay
    assert len(published(again)) == 1
    assert published(again)[0].model_dump(exclude={"event_id", "occurred_at"}) == \
        published(first)[0].model_dump(exclude={"event_id", "occurred_at"})
    assert [c.urls for _, c in candidates(again)] == [["http://b.test/1"]]


def test_replay_of_a_changed_page_republishes_the_same_message() -> None:
    rig = Rig()
    rig.page("http://a.test/p", "h1", at=T0)
    first = rig.page("http://a.test/p", "h2", at=T0 + 3600, simhash=to_signed64(5))
    again = rig.page("http://a.test/p", "h2", at=T0 + 3600, simhash=to_signed64(5))
    assert len(published(again)) == 1
    assert published(again)[0].changed == published(first)[0].changed
    assert rig.url_state("http://a.test/p").fetch_count == 2


def test_near_duplicate_alias_survives_an_unchanged_refetch() -> None:
    rig = Rig()
    rig.page("http://a.test/p", "h1")
    near = to_signed64((SIM & 0xFFFFFFFFFFFFFFFF) ^ 0b11)
    assert rig.page("http://b.test/q", "h2", simhash=near) == []
    assert rig.page("http://b.test/q", "h2", at=T0 + 3600, simhash=near) == []
    st = rig.url_state("http://b.test/q")
    assert (st.status, st.canonical_url) == ("duplicate", "http://a.test/p")


def _noindex(url: str, content_hash: str, links: Sequence[str] = (), nofollow: bool = False,
             at: float = T0) -> ParsedPage:
    return make_page(url, content_hash, at, links=links, nofollow=nofollow).model_copy(update={"noindex": True})


def test_a_noindex_page_is_not_published_but_its_links_are_followed() -> None:
    rig = Rig()
    outs = rig.run(rig.h.handle(rec("a.test"), _noindex("http://a.test/p", "h1", links=["http://b.test/1"])))
    assert published(outs) == []
    [(key, c)] = candidates(outs)
    assert (key, c.urls) == ("b.test", ["http://b.test/1"])
    st = rig.url_state("http://a.test/p")
    assert (st.status, st.content_hash, st.fetch_count) == ("noindex", "h1", 1)
    # a replay of the same fetch repeats the decision: no publish, the same links, the same count
    again = rig.run(rig.h.handle(rec("a.test"), _noindex("http://a.test/p", "h1", links=["http://b.test/1"])))
    assert published(again) == [] and [c.urls for _, c in candidates(again)] == [["http://b.test/1"]]
    assert rig.url_state("http://a.test/p").fetch_count == 1


def test_a_noindex_nofollow_page_yields_nothing() -> None:
    rig = Rig()
    assert rig.run(rig.h.handle(rec("a.test"), _noindex("http://a.test/p", "h1", ["http://b.test/1"], True))) == []


def test_a_noindex_page_never_makes_an_indexable_copy_its_alias() -> None:
    """noindex pages claim no content hash and enter no near-duplicate index: an identical indexable page
    fetched later is published."""
    rig = Rig()
    rig.run(rig.h.handle(rec("a.test"), _noindex("http://a.test/print", "same")))
    outs = rig.page("http://a.test/article", "same")
    assert [m.url for m in published(outs)] == ["http://a.test/article"]


def test_a_page_that_was_noindex_is_published_once_indexable() -> None:
    rig = Rig()
    rig.run(rig.h.handle(rec("a.test"), _noindex("http://a.test/p", "h1")))
    outs = rig.page("http://a.test/p", "h1", at=T0 + 100)  # same body, the directive gone
    assert [m.url for m in published(outs)] == ["http://a.test/p"]
    assert rig.url_state("http://a.test/p").status == "fetched"


def test_nofollow_page_is_published_without_links() -> None:
    rig = Rig()
    outs = rig.page("http://a.test/p", "h1", links=["http://b.test/1"], nofollow=True)
    [pf] = published(outs)
    assert pf.out_links == [] and candidates(outs) == []


# ------------------------------------------------------------------ fetch results

def test_a_redirect_target_hands_its_chain_on_to_the_frontier() -> None:
    rig = Rig()
    cand = UrlCandidates(host="a.test", depth=2, source_url="http://a.test/hop2", urls=["https://a.test/hop3"],
                         url_fps=[url_fingerprint("https://a.test/hop3")], redirect_chain=[11, 12, 13])
    urls = [o.value for o in rig.run(rig.h.handle(rec("a.test"), cand)) if isinstance(o.value, UrlMessage)]
    assert [(u.url, u.redirect_chain) for u in urls] == [("https://a.test/hop3", [11, 12, 13])]


def test_fetch_results_are_not_dedups() -> None:
    """Dedup reads no fetch results: the fetcher records the status of fetches that leave nothing to parse
    and sends redirect targets as candidates itself (tests/unit/services/test_fetcher_handler.py)."""
    rig = Rig()
    res = FetchResult(url="http://a.test/old", host="a.test", url_fp=url_fingerprint("http://a.test/old"),
                      lease_id="L", outcome="redirect", started_at=T0, redirect_to="http://b.test/new")
    with pytest.raises(PoisonMessage):
        rig.run(rig.h.handle(rec("a.test"), res))


# ------------------------------------------------------------------ Bloom snapshots

def test_bloom_snapshot_round_trip_through_revoke_and_assign() -> None:
    state, blobs = MemoryCrawlState(), MemoryBlobStore()
    first = Rig(state, blobs)
    urls = [f"http://a.test/{i}" for i in range(50)]
    for u in urls:
        assert len(first.cand(u)) == 1
    part = partition_for("a.test", 8)
    first.run(first.h.on_revoke([part]))
    assert snapshot_key(part) in blobs.objects and part not in first.seen.blooms
    # A new instance with an empty exact store: only the restored filter can know these URLs.
    second = Rig(MemoryCrawlState(), blobs, assign=False)
    second.run(second.h.on_assign([part]))
    bloom = second.seen.blooms[part]
    assert all(url_fingerprint(u) in bloom for u in urls)
    assert url_fingerprint("http://a.test/never") not in bloom
    # With the exact rows present too, the restored instance drops them as seen.
    third = Rig(state, blobs, assign=False)
    third.run(third.h.on_assign([part]))
    assert third.cand(urls[0]) == [] and third.seen.exact_reads == 1


def test_periodic_snapshot_writes_only_dirty_partitions() -> None:
    rig = Rig()
    rig.h.snapshot_interval_s = 0.0
    rig.cand("http://a.test/1")
    rig.run(rig.h.tick(T0))
    part = partition_for("a.test", 8)
    assert sorted(rig.blobs.objects) == sorted([snapshot_key(part), offset_key(part)])
    assert rig.seen.dirty == set()


def test_restore_replays_candidates_after_the_snapshot_offset() -> None:
    """A kill -9 after a snapshot: URLs admitted after it come back from the url_candidates replay,
    so the restored filter re-admits none of them (the exact store is empty here on purpose)."""
    blobs = MemoryBlobStore()
    part = partition_for("a.test", 8)
    first = Rig(MemoryCrawlState(), blobs)
    first.seen.progress = lambda p: 10  # candidates below offset 10 were handled
    for i in range(5):
        first.cand(f"http://a.test/{i}")
    first.run(first.seen.snapshot(part))
    assert blobs.get_bytes(offset_key(part)) == b"10"
    later = [url_fingerprint(f"http://a.test/late{i}") for i in range(3)]  # offsets 10..12, after the snapshot
    calls: list[tuple[int, int]] = []

    def replay(p: int, start: int) -> tuple[list[int], int]:
        calls.append((p, start))
        return later, 13

    second = Rig(MemoryCrawlState(), blobs, assign=False)
    second.seen.replay = replay
    second.run(second.h.on_assign([part]))
    assert calls == [(part, 10)]
    bloom = second.seen.blooms[part]
    assert all(fp in bloom for fp in later)
    assert all(url_fingerprint(f"http://a.test/{i}") in bloom for i in range(5))
    assert second.seen.upto[part] == 13


def test_replayed_candidate_event_is_emitted_again_but_a_new_event_is_seen() -> None:
    """A crash after the url_state write but before the UrlMessage was flushed: the replay of the very
    same candidate event must go out again (else the URL is lost); another candidate for it is a dup."""
    rig = Rig()
    url = "http://a.test/x"
    c = UrlCandidates(host="a.test", depth=1, source_url="http://s.test/", urls=[url], url_fps=[url_fingerprint(url)])
    first = rig.run(rig.h.handle(rec("a.test"), c))
    replay = rig.run(rig.h.handle(rec("a.test"), c))
    assert [o.value.url for o in first] == [url] and [o.value.url for o in replay] == [url]
    assert [o.value.replayed for o in first] == [False] and [o.value.replayed for o in replay] == [True]
    other = c.model_copy(update={"event_id": "another-event"})
    assert rig.run(rig.h.handle(rec("a.test"), other)) == []


def test_control_plane_page_budget_override() -> None:
    from streamcrawl_core.politeness import HostOverride

    rig = Rig(budget=100)
    rig.state.overrides["a.test"] = HostOverride(None, None, page_budget=1)
    rig.run(rig.h.tick(T0))  # picks up the blocklist and the overrides
    assert len(rig.cand("http://a.test/1")) == 1
    assert rig.cand("http://a.test/2") == []  # over the agreed budget of 1
    assert len(rig.cand("http://b.test/1")) == 1 and len(rig.cand("http://b.test/2")) == 1


# ------------------------------------------------------------------ persisted per-host budgets

DAY = 86400.0
CYCLE = int(T0 // DAY)  # the handler's default cycle is a day


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The handler module's time.time() (its budget cycle), nobody else's; tests move it via now[0]."""
    import time
    from types import SimpleNamespace

    import streamcrawl_dedup.handler as handler_mod

    now = [T0]
    monkeypatch.setattr(handler_mod, "time", SimpleNamespace(time=lambda: now[0], monotonic=time.monotonic))
    return now


def budget_writes(state: MemoryCrawlState) -> list[tuple[Any, ...]]:
    return [c[1:] for c in state.calls if c[0] == "host_put_budget"]


def admit(rig: Rig, host: str, names: Sequence[str]) -> list[bool]:
    return [len(rig.cand(f"http://{host}/{n}")) == 1 for n in names]


def test_budget_survives_a_restart(clock: list[float]) -> None:
    """kill -9 after a tick: a new process on the same host_state carries on from the stored count."""
    state = MemoryCrawlState()
    first = Rig(state, budget=3)
    assert admit(first, "a.test", ["1", "2"]) == [True, True]
    first.run(first.h.tick(T0))  # the write-behind flush; no close(): the process dies here
    assert (state.hosts["a.test"].cycle, state.hosts["a.test"].urls_this_cycle) == (CYCLE, 2)
    second = Rig(state, budget=3)
    assert admit(second, "a.test", ["3", "4", "5"]) == [True, False, False]
    second.run(second.h.close())
    assert state.hosts["a.test"].urls_this_cycle == 3


def test_a_count_of_an_older_cycle_does_not_carry_over(clock: list[float]) -> None:
    state = MemoryCrawlState()
    state.hosts["full.test"] = HostState("full.test", urls_this_cycle=2, cycle=CYCLE)
    state.hosts["old.test"] = HostState("old.test", urls_this_cycle=2, cycle=CYCLE - 1)
    state.hosts["never.test"] = HostState("never.test", urls_this_cycle=2)  # no cycle: never counted by dedup
    rig = Rig(state, budget=2)
    assert admit(rig, "full.test", ["1"]) == [False]
    assert admit(rig, "old.test", ["1", "2", "3"]) == [True, True, False]
    assert admit(rig, "never.test", ["1"]) == [True]
    rig.run(rig.h.tick(T0))
    assert sorted(budget_writes(state)) == [("never.test", CYCLE, 1), ("old.test", CYCLE, 2)]


def test_a_new_cycle_in_a_running_process_starts_from_zero_and_is_stored_as_such(clock: list[float]) -> None:
    state = MemoryCrawlState()
    rig = Rig(state, budget=2)
    assert admit(rig, "a.test", ["1", "2", "3"]) == [True, True, False]
    rig.run(rig.h.tick(T0))
    clock[0] = T0 + DAY
    assert admit(rig, "a.test", ["4", "5", "6"]) == [True, True, False]
    rig.run(rig.h.tick(T0 + DAY))
    assert budget_writes(state) == [("a.test", CYCLE, 2), ("a.test", CYCLE + 1, 2)]
    assert state.host_reads == ["a.test"]  # the stored row was of the old cycle: no need to read it again


def test_dirty_counts_are_written_on_tick_not_per_url(clock: list[float]) -> None:
    state = MemoryCrawlState()
    rig = Rig(state)
    admit(rig, "a.test", ["1", "2", "3"])
    admit(rig, "b.test", ["1"])
    assert budget_writes(state) == []  # write-behind: no Cassandra write per admitted URL
    rig.run(rig.h.tick(T0))
    assert sorted(budget_writes(state)) == [("a.test", CYCLE, 3), ("b.test", CYCLE, 1)]
    rig.run(rig.h.tick(T0 + 5))
    assert len(budget_writes(state)) == 2  # nothing dirty, nothing written
    assert rig.cand("http://a.test/1") == []  # seen: consumes nothing, dirties nothing
    admit(rig, "a.test", ["4"])
    rig.run(rig.h.tick(T0 + 6))
    assert len(budget_writes(state)) == 2  # flushed every budget_flush_s (5 s), not every tick
    rig.run(rig.h.tick(T0 + 10))
    assert budget_writes(state)[2:] == [("a.test", CYCLE, 4)]


def test_one_host_state_read_per_host(clock: list[float]) -> None:
    state = MemoryCrawlState()
    rig = Rig(state)
    for i in range(5):
        admit(rig, "a.test", [str(i)])
        rig.run(rig.h.tick(T0 + i))
    assert rig.cand("http://b.test/deep", depth=16) == []  # a trap: never reaches the budget
    assert state.host_reads == ["a.test"]


def test_a_failed_flush_keeps_the_count_dirty(clock: list[float]) -> None:
    state = MemoryCrawlState()
    rig = Rig(state)
    admit(rig, "a.test", ["1"])
    real = state.host_put_budget

    async def down(host: str, cycle: int, urls_this_cycle: int) -> None:
        raise ConnectionError("cassandra down")

    state.host_put_budget = down  # type: ignore[method-assign]
    rig.run(rig.h.tick(T0))  # logged, not raised: the rest of the tick still runs
    state.host_put_budget = real  # type: ignore[method-assign]
    admit(rig, "a.test", ["2"])
    rig.run(rig.h.tick(T0 + 5))
    assert budget_writes(state) == [("a.test", CYCLE, 2)]


def test_revoke_flushes_the_revoked_partitions_and_forgets_their_hosts(clock: list[float]) -> None:
    state = MemoryCrawlState()
    rig = Rig(state, budget=3)
    pa, pb = partition_for("a.test", 8), partition_for("c.test", 8)
    assert pa != pb
    admit(rig, "a.test", ["1"])
    admit(rig, "c.test", ["1"])
    rig.run(rig.h.on_revoke([pa]))
    assert budget_writes(state) == [("a.test", CYCLE, 1)]  # only the revoked partition's hosts
    # Meanwhile another owner admits two more a.test URLs; when the partition comes back, its count is
    # read again instead of trusting the forgotten one.
    state.hosts["a.test"].urls_this_cycle = 3
    rig.run(rig.h.on_assign([pa]))
    assert admit(rig, "a.test", ["2"]) == [False]
    assert state.host_reads == ["a.test", "c.test", "a.test"]
    rig.run(rig.h.tick(T0))
    assert budget_writes(state)[1:] == [("c.test", CYCLE, 1)]


def test_stored_count_counts_against_a_control_plane_budget(clock: list[float]) -> None:
    from streamcrawl_core.politeness import HostOverride

    state = MemoryCrawlState()
    state.hosts["a.test"] = HostState("a.test", urls_this_cycle=3, cycle=CYCLE)
    state.overrides["a.test"] = HostOverride(None, None, page_budget=5)
    rig = Rig(state, budget=2)
    rig.run(rig.h.tick(T0))
    assert admit(rig, "a.test", ["1", "2", "3"]) == [True, True, False]


def test_cycle_must_fit_the_int_column() -> None:
    state = MemoryCrawlState()
    seen = SeenSet(state, MemoryBlobStore(), capacity=100, fp_rate=0.01)
    with pytest.raises(ValueError, match="cycle_s"):
        DedupHandler(state, seen, TrapConfig(), cycle_s=0.5)


# ------------------------------------------------------------------ the WARC writer's input


def _with_exchange(page: ParsedPage, ex_id: str) -> ParsedPage:
    ex = HttpExchange(id=ex_id, ip="127.0.0.2", request_head="GET / HTTP/1.1\r\n\r\n",
                      response_head="HTTP/1.1 200 OK\r\n\r\n")
    return page.model_copy(update={"exchange": ex})


def _archived(outs: Sequence[Output]) -> list[ArchiveRecord]:
    return [o.value for o in outs if o.topic == ARCHIVE]  # type: ignore[misc]


def test_pages_with_an_exchange_go_to_the_warc_writer_which_publishes_them() -> None:
    rig = Rig()
    url = "http://w.test/a"
    h1 = "a" * 64
    gz = b"\x1f\x8b stored body"
    first_page = _with_exchange(make_page(url, h1), "x1").model_copy(update={"body_gz": gz})
    outs = rig.run(rig.h.handle(rec("w.test"), first_page))
    assert published(outs) == []
    (first,) = _archived(outs)
    assert first.page is not None and first.page.url == url and first.revisit_of is None
    assert first.body_gz == gz  # the parser's inline body goes on: the writer need not read it from S3
    assert [o.key for o in outs if o.topic == ARCHIVE] == ["x1"]  # keyed by exchange id
    # the same body again: a revisit of the first capture, nothing to publish (and no body to carry)
    again_page = _with_exchange(make_page(url, h1, at=T0 + 60), "x2").model_copy(update={"body_gz": gz})
    outs = rig.run(rig.h.handle(rec("w.test"), again_page))
    (again,) = _archived(outs)
    assert again.page is None and again.revisit_of is not None and again.body_gz is None
    assert (again.revisit_of.url, again.revisit_of.fetched_at) == (url, T0)
    # an exact duplicate on another URL: a revisit of the canonical one
    outs = rig.run(rig.h.handle(rec("w.test"), _with_exchange(make_page("http://w.test/b", h1), "x3")))
    (dup,) = _archived(outs)
    assert dup.page is None and dup.revisit_of is not None and dup.revisit_of.url == url


def test_a_noindex_page_is_archived_as_a_response_and_never_published() -> None:
    rig = Rig()
    page = _with_exchange(_noindex("http://w.test/n", "d" * 64, links=["http://w.test/1"]), "n1")
    outs = rig.run(rig.h.handle(rec("w.test"), page))
    (record,) = _archived(outs)
    assert record.page is None and record.revisit_of is None and record.url == "http://w.test/n"
    assert published(outs) == [] and any(o.topic == URL_CANDIDATES for o in outs)


def test_without_the_warc_writer_dedup_publishes_page_fetched_itself() -> None:
    rig = Rig()
    rig.h.warc = False
    outs = rig.run(rig.h.handle(rec("w.test"), _with_exchange(make_page("http://w.test/a", "c" * 64), "q")))
    assert len(published(outs)) == 1 and _archived(outs) == []


# ------------------------------------------------------------------ sitemaps


def test_sitemap_entries_are_candidates_and_a_newer_lastmod_refreshes_a_known_page() -> None:
    rig = Rig()
    known = "http://s.test/known"
    rig.cand(known)
    rig.page(known, "k" * 64, at=T0)
    sm = make_page("http://s.test/sitemap.xml", "s" * 64, at=T0 + 5, simhash=None,
                   links=["http://s.test/new", known])
    sm = sm.model_copy(update={"sitemap": True, "lastmods": [None, T0 + 100]})
    outs = rig.run(rig.h.handle(rec("s.test"), sm))
    assert published(outs) == []  # a sitemap is not a page
    [(_key, cands)] = candidates(outs)
    assert cands.urls == ["http://s.test/new", known] and cands.lastmods == [None, T0 + 100] and cands.depth == 2
    assert rig.url_state("http://s.test/sitemap.xml").status == "sitemap"
    outs = rig.run(rig.h.handle(rec("s.test"), cands))
    refresh = [o.value for o in outs if o.topic == URLS and o.value.kind == "refresh"]
    assert [m.url for m in refresh] == [known]  # the sitemap says it changed after our fetch at T0
    fresh = [o.value for o in outs if o.topic == URLS and o.value.kind == "discovery"]
    assert [m.url for m in fresh] == ["http://s.test/new"]


def test_a_known_pages_sitemap_lastmod_is_recorded_for_the_recrawl_estimator() -> None:
    rig = Rig()
    known = "http://s.test/known"
    rig.cand(known)
    rig.page(known, "k" * 64, at=T0)

    def listed(lastmod: float) -> None:
        cands = UrlCandidates(host="s.test", depth=1, source_url="http://s.test/sitemap.xml", urls=[known],
                              url_fps=[url_fingerprint(known)], lastmods=[lastmod])
        rig.run(rig.h.handle(rec("s.test"), cands))

    listed(T0 - 500)  # older than the fetch: no refresh, but the date is what the estimator needs
    assert rig.url_state(known).sitemap_lastmod == T0 - 500
    listed(T0 - 900)  # an older date from another sitemap does not move it back
    assert rig.url_state(known).sitemap_lastmod == T0 - 500
    listed(4_000_000_000.0)  # years in the future: not recorded
    assert rig.url_state(known).sitemap_lastmod == T0 - 500
    listed(T0 + 100)
    assert rig.url_state(known).sitemap_lastmod == T0 + 100
    writes = [c for c in rig.state.calls if c[0] == "url_put_sitemap_lastmod"]
    assert len(writes) == 2  # only when the date moves forward
