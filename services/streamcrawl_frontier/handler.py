"""The frontier's run-loop handler: seeds in, URLs in, fetch results in; leased fetch requests out.

State per owned partition is one core `Frontier` (Mercator front/back queues + timer heap), rebuilt from
Cassandra on assignment, with a bounded part of it in memory (streamcrawl_frontier.shards). Results settle host timers
(streamcrawl_frontier.results); ticks lease ready hosts and settle expired leases
(streamcrawl_frontier.dispatch). The lease rules themselves are streamcrawl_core.lease.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from prometheus_client import Counter
from streamcrawl_contracts.messages import Envelope, FetchResult, SeedMessage, UrlCandidates, UrlMessage
from streamcrawl_contracts.topics import SEEDS, URL_CANDIDATES
from streamcrawl_core.identity import url_identity
from streamcrawl_core.partition import partition_for
from streamcrawl_core.urls import UrlError
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record
from streamcrawl_runtime.ports.state import QueuedUrl

from streamcrawl_frontier.dispatch import FrontierDispatch
from streamcrawl_frontier.shards import UrlMeta

log = logging.getLogger("streamcrawl.frontier")
REROUTED = Counter("streamcrawl_frontier_rerouted_total", "Seeds that arrived on the wrong partition")
REPLAY_DROPPED = Counter("streamcrawl_frontier_replay_dropped_total",
                         "Discoveries re-sent by dedup after a crash for URLs already finished")


class FrontierHandler(FrontierDispatch):
    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        if isinstance(message, SeedMessage):
            return self._seed(record, message)
        if isinstance(message, UrlMessage):
            await self._enqueue(record, message)
            return []
        if isinstance(message, FetchResult):
            await self.result(record.partition, message)
            return []
        raise PoisonMessage(f"unexpected message type {type(message).__name__}")

    def _seed(self, record: Record, seed: SeedMessage) -> Sequence[Output]:
        try:
            url, host, fp = url_identity(seed.url)
        except UrlError as exc:
            raise PoisonMessage(f"malformed seed URL ({exc.reason}): {seed.url[:200]}") from exc
        if record.key != host or record.partition != partition_for(host, self.partitions):
            # Produced unkeyed or with a wrong key: send it to the partition that owns the host.
            REROUTED.inc()
            return [Output(SEEDS, host, seed.model_copy(update={"url": url}))]
        # Seeds take the same path as every other URL: through the dedup seen-set to this frontier.
        cand = UrlCandidates(host=host, depth=0, source_url="seed:" + seed.source, urls=[url], url_fps=[fp])
        return [Output(URL_CANDIDATES, host, cand)]

    async def _enqueue(self, record: Record, msg: UrlMessage) -> None:
        part = record.partition
        fr = self.frontiers.get(part)
        if fr is None:  # not ours any more (revoked mid-flight): the new owner replays it
            return
        if msg.replayed and not fr.is_known(msg.url):
            # Re-sent by dedup after a crash: if this frontier already finished the URL, the replay must
            # not fetch it again. Only replays pay this read.
            row = await self.state.url_get(msg.host, msg.url_fp)
            if row is not None and row.frontier_done_at is not None:
                REPLAY_DROPPED.inc()
                return
        if fr.is_known(msg.url):
            return  # queued or in flight here already: its durable row exists
        if log.isEnabledFor(logging.DEBUG):  # per URL: nothing is built when debug is off
            log.debug("queued", extra={"url": msg.url, "kind": msg.kind, "replayed": msg.replayed,
                                       "partition": part, "offset": record.offset})
        now = self.clock()
        chain = tuple(msg.redirect_chain)
        item = QueuedUrl(part, msg.host, msg.url_fp, msg.url, msg.priority, msg.kind, msg.not_before, msg.depth, now,
                         chain)
        window = self.windows.get(msg.host)
        if window is None:
            if len(self.windows) >= self.max_hosts:
                # No room in memory: the URL waits in Cassandra, and its host in the partition's index,
                # which brings the host in once there is room.
                await self.state.queue_put(item, index_host=True)
                self.scans[part].went_cold()
                return
            window = await self.load_host(fr, msg.host, now)
            if fr.is_known(msg.url):
                return  # its durable row was in the queue head just read
        window.pending += 1  # not idle while the write runs: the index sweep must not drop the host meanwhile
        try:
            await self.state.queue_put(item, index_host=not window.indexed)
        finally:
            window.pending -= 1
        window.indexed = True
        if self.keep_in_memory(fr, msg.host, window, item.key, msg.kind) and fr.add(
                msg.url, msg.host, msg.priority, msg.not_before, msg.kind, enqueued_at=now):
            self.meta[msg.url] = UrlMeta(msg.url_fp, msg.depth, part, priority=msg.priority, redirect_chain=chain)
