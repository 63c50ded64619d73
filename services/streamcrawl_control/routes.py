"""The /v1 endpoints: seeds, blocklist, per-host overrides, pause and resume, the host view and stats.
Mutating endpoints need the bearer token (streamcrawl_control.auth); reads too unless opened by a setting."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime

from fastapi import APIRouter, Depends, HTTPException, Response
from prometheus_client import Counter
from starlette.concurrency import run_in_threadpool
from streamcrawl_contracts.messages import SeedMessage
from streamcrawl_contracts.topics import DEFAULT_PARTITIONS
from streamcrawl_core.blocklist import Blocklist, InvalidHost, canonical_host, canonical_pattern
from streamcrawl_core.identity import host_identity
from streamcrawl_core.partition import partition_for
from streamcrawl_core.politeness import HostOverride
from streamcrawl_core.urls import UrlError
from streamcrawl_runtime.ports.control import BlockEntry, ControlStore, PauseRow, PortError, SeedSink

from streamcrawl_control.auth import BearerAuth
from streamcrawl_control.models import (
    MAX_SEEDS,
    BlockEntryOut,
    BlocklistOut,
    BlocklistPut,
    CrawlStats,
    DnsOut,
    HostView,
    LeaseOut,
    OutcomeOut,
    OverrideIn,
    OverrideOut,
    PauseEntry,
    PauseRequest,
    PausesOut,
    Problem,
    QueuedUrlOut,
    QueueOut,
    ResumeRequest,
    RobotsOut,
    SeedOutcome,
    SeedRequest,
    SeedResponse,
)
from streamcrawl_control.stats import StatsCollector

log = logging.getLogger("streamcrawl.control")

ECHO_MAX = 300  # a URL or pattern is echoed back truncated to this many characters
PAUSE_ALL = "*"

_ERRORS: dict[int | str, dict[str, object]] = {
    400: {"model": Problem, "description": "The body is not valid UTF-8"},
    413: {"model": Problem, "description": "The body is over the size limit (or too many seeds)"},
    401: {"model": Problem, "description": "Missing or wrong API token"},
    422: {"model": Problem, "description": "Invalid input"},
    503: {"model": Problem, "description": "Kafka or Cassandra unavailable"},
}


def _host_or_422(raw: str) -> str:
    try:
        return canonical_host(raw)
    except InvalidHost as exc:
        raise HTTPException(422, f"invalid host {raw[:ECHO_MAX]!r}: {exc}") from exc


def _ts(epoch: float | None) -> datetime | None:
    return None if not epoch else datetime.fromtimestamp(epoch, UTC)


def _iso(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _blocklist_out(entries: Sequence[BlockEntry]) -> BlocklistOut:
    return BlocklistOut(patterns=[BlockEntryOut(pattern=e.pattern, reason=e.reason, created_at=e.created_at)
                                  for e in entries])


def _override_out(host: str, o: HostOverride) -> OverrideOut:
    return OverrideOut(host=host, min_delay_s=o.min_delay_s, delay_factor=o.delay_factor,
                       page_budget=o.page_budget, note=o.note, updated_at=o.updated_at)


def _pause_entry(p: PauseRow) -> PauseEntry:
    return PauseEntry(scope=p.scope, reason=p.reason, paused_at=p.paused_at)


def build_router(sink: SeedSink, store: ControlStore, collector: StatsCollector, auth: BearerAuth,
                 seeds_total: Counter, *, max_seeds: int = MAX_SEEDS, pauses_refresh_s: float = 5.0,
                 partitions: int = DEFAULT_PARTITIONS) -> APIRouter:
    read, write = [Depends(auth.read)], [Depends(auth.write)]
    r = APIRouter(prefix="/v1", responses=_ERRORS)

    # ------------------------------------------------------------------------------------ seeds

    @r.post("/seeds", status_code=202, response_model=SeedResponse, dependencies=write,
            responses={413: {"model": Problem, "description": f"More than {max_seeds} URLs, or the body is too big"},
                       422: {"model": SeedResponse | Problem,
                             "description": "No URL was accepted (per URL), or the body is invalid"}})
    async def post_seeds(body: SeedRequest, response: Response) -> SeedResponse:
        """Normalize each URL, check it against the blocklist and produce it to the seeds topic keyed by host.
        Each URL is reported accepted only once Kafka acknowledged it. 202 if any was accepted, 422 if none."""
        if len(body.urls) > max_seeds:
            raise HTTPException(413, f"at most {max_seeds} URLs per request; this one has {len(body.urls)}")
        blocklist = Blocklist(e.pattern for e in await store.list_blocklist())
        results: list[SeedOutcome] = []
        pending: list[tuple[int, str, SeedMessage]] = []
        seen: set[str] = set()
        for raw in body.urls:
            echo = raw[:ECHO_MAX]
            try:
                url, host = host_identity(raw)
            except (UrlError, ValueError) as exc:
                results.append(SeedOutcome(url=echo, status="rejected", error=str(exc)[:ECHO_MAX],
                                           reason=f"invalid:{getattr(exc, 'reason', 'malformed')}"))
                continue
            if url in seen:
                results.append(SeedOutcome(url=echo, status="rejected", reason="duplicate",
                                           error=f"{url} appears twice in this request"))
                continue
            seen.add(url)
            pattern = blocklist.blocked_by(host)
            if pattern is not None:
                results.append(SeedOutcome(url=echo, status="rejected", reason="blocklisted", host=host,
                                           error=f"host matches blocklist pattern {pattern!r}"))
                continue
            pending.append((len(results), host, SeedMessage(url=url, priority=body.priority, source=body.source)))
            results.append(SeedOutcome(url=echo, status="accepted", reason="produced", normalized=url, host=host,
                                       partition=partition_for(host, partitions)))
        if pending:
            await run_in_threadpool(sink.ping)  # an unreachable broker: 503 now, not after the flush timeout
            acks = await run_in_threadpool(sink.send, [(h, m) for _, h, m in pending])
            for (i, _, _), err in zip(pending, acks, strict=True):
                if err is not None:
                    results[i] = results[i].model_copy(update={"status": "rejected", "reason": "kafka",
                                                               "error": err})
            if all(err is not None for err in acks):
                raise PortError(f"kafka: no seed was acknowledged: {acks[0]}")
        accepted = sum(x.status == "accepted" for x in results)
        for x in results:
            seeds_total.labels("accepted" if x.status == "accepted" else x.reason.split(":", 1)[0]).inc()
        log.info("seeds", extra={"accepted": accepted, "rejected": len(results) - accepted})
        if not accepted:
            response.status_code = 422
        return SeedResponse(accepted=accepted, rejected=len(results) - accepted, results=results)

    # -------------------------------------------------------------------------------- blocklist

    @r.get("/blocklist", response_model=BlocklistOut, dependencies=read)
    async def get_blocklist() -> BlocklistOut:
        """Every pattern: `.example.com` blocks example.com and its subdomains; `example.com` only itself."""
        return _blocklist_out(await store.list_blocklist())

    @r.put("/blocklist", response_model=BlocklistOut, dependencies=write)
    async def put_blocklist(body: BlocklistPut) -> BlocklistOut:
        """Add (or re-reason) patterns; dedup applies them within 10 s. One bad pattern stores none (422)."""
        canonical: list[str] = []
        bad: list[str] = []
        for raw in body.patterns:
            try:
                canonical.append(canonical_pattern(raw))
            except InvalidHost as exc:
                bad.append(f"{raw[:ECHO_MAX]!r}: {exc}")
        if bad:
            raise HTTPException(422, f"invalid patterns, none stored: {'; '.join(bad[:20])}")
        stored = [await store.put_block(p, body.reason) for p in dict.fromkeys(canonical)]
        log.info("blocklist put", extra={"patterns": len(stored)})
        return _blocklist_out(stored)

    @r.delete("/blocklist/{pattern}", status_code=204, dependencies=write,
              responses={404: {"model": Problem, "description": "No such pattern"}})
    async def delete_blocklist(pattern: str) -> Response:
        """Remove one pattern (e.g. DELETE /v1/blocklist/.example.com)."""
        try:
            canonical = canonical_pattern(pattern)
        except InvalidHost as exc:
            raise HTTPException(422, f"invalid pattern {pattern[:ECHO_MAX]!r}: {exc}") from exc
        if not await store.delete_block(canonical):
            raise HTTPException(404, f"pattern {canonical!r} is not in the blocklist")
        log.info("blocklist delete", extra={"pattern": canonical})
        return Response(status_code=204)

    # -------------------------------------------------------------------------------- overrides

    @r.get("/hosts/{host}/override", response_model=OverrideOut, dependencies=read,
           responses={404: {"model": Problem, "description": "None set"}})
    async def get_override(host: str) -> OverrideOut:
        h = _host_or_422(host)
        o = await store.get_override(h)
        if o is None:
            raise HTTPException(404, f"no override for {h}")
        return _override_out(h, o)

    @r.put("/hosts/{host}/override", response_model=OverrideOut, dependencies=write)
    async def put_override(host: str, body: OverrideIn) -> OverrideOut:
        """Set the agreed rate of a host (replaces any previous override whole); frontiers apply it within 30 s."""
        h = _host_or_422(host)
        o = await store.put_override(h, HostOverride(body.min_delay_s, body.delay_factor, body.page_budget,
                                                      body.note))
        log.info("override put", extra={"host": h})
        return _override_out(h, o)

    @r.delete("/hosts/{host}/override", status_code=204, dependencies=write,
              responses={404: {"model": Problem, "description": "None set"}})
    async def delete_override(host: str) -> Response:
        h = _host_or_422(host)
        if not await store.delete_override(h):
            raise HTTPException(404, f"no override for {h}")
        log.info("override delete", extra={"host": h})
        return Response(status_code=204)

    # --------------------------------------------------------------------------- pause, resume

    async def pauses_out() -> PausesOut:
        rows = await store.list_pauses()
        return PausesOut(all=any(p.scope == PAUSE_ALL for p in rows),
                         hosts=[_pause_entry(p) for p in rows if p.scope != PAUSE_ALL],
                         entries=[_pause_entry(p) for p in rows], applied_within_s=pauses_refresh_s)

    @r.get("/pauses", response_model=PausesOut, dependencies=read)
    async def get_pauses() -> PausesOut:
        """What is paused: the whole crawl and/or single hosts."""
        return await pauses_out()

    @r.post("/pause", response_model=PausesOut, dependencies=write)
    async def pause(body: PauseRequest) -> PausesOut:
        """Pause the whole crawl (no host) or one host. Owning frontiers lease nothing more for it within
        `applied_within_s` (a request already leased still completes); the pause survives restarts."""
        scope = PAUSE_ALL if body.host is None else _host_or_422(body.host)
        await store.put_pause(scope, body.reason)
        log.info("pause", extra={"scope": scope})
        return await pauses_out()

    @r.post("/resume", response_model=PausesOut, dependencies=write)
    async def resume(body: ResumeRequest) -> PausesOut:
        """Lift the global pause (no host; host pauses stay) or one host's. Idempotent."""
        scope = PAUSE_ALL if body.host is None else _host_or_422(body.host)
        await store.delete_pause(scope)
        log.info("resume", extra={"scope": scope})
        return await pauses_out()

    # ------------------------------------------------------------------------------- host view

    @r.get("/hosts/{host}", response_model=HostView, dependencies=read,
           responses={404: {"model": Problem, "description": "Host never seen, nothing queued, no override"}})
    async def get_host(host: str) -> HostView:
        """A host's queue and first URLs, politeness timer, lease in flight, back-off, robots.txt, DNS answer,
        last 10 outcomes, override, pause and blocklist status. Reads only the host's own rows."""
        h = _host_or_422(host)
        part = partition_for(h, partitions)
        state = await store.get_host_state(h) or {}
        override = await store.get_override(h)
        length, first = await store.host_queue(part, h, 10)
        outcomes = await store.host_outcomes(h, 10)
        if not state and override is None and not length:
            raise HTTPException(404, f"host {h} has no state, no queued URL and no override")
        pauses = {p.scope for p in await store.list_pauses()}
        blocked = Blocklist(e.pattern for e in await store.list_blocklist()).blocked_by(h)
        lease_url = state.get("lease_url")
        return HostView(
            host=h, partition=part, paused=PAUSE_ALL in pauses or h in pauses, blocked_by=blocked,
            queue=QueueOut(length=length, first=[
                QueuedUrlOut(url=q.url, priority=q.priority, kind=q.kind, not_before=_ts(q.not_before),
                             enqueued_at=_ts(q.enqueued_at)) for q in first]),
            next_allowed_at=_iso(state.get("next_allowed_at")),
            lease=LeaseOut(url=lease_url, expires_at=_iso(state.get("lease_expires_at"))) if lease_url else None,
            backoff_level=int(state.get("backoff_level") or 0),
            robots=RobotsOut(status=state.get("robots_status"), fetched_at=_iso(state.get("robots_fetched_at")),
                             crawl_delay_s=state.get("crawl_delay_s")),
            dns=DnsOut(ip=state.get("dns_ip"), error=state.get("dns_error"),
                       expires_at=_iso(state.get("dns_expires_at"))),
            last_fetch_ms=state.get("last_fetch_ms"), last_fetch_end=_iso(state.get("last_fetch_end")),
            urls_this_cycle=state.get("urls_this_cycle"),
            recent_outcomes=[OutcomeOut(at=datetime.fromtimestamp(o.at, UTC), url=o.url, outcome=o.outcome,
                                        status=o.status, fetch_ms=o.fetch_ms) for o in outcomes],
            override=_override_out(h, override) if override else None)

    # ----------------------------------------------------------------------------------- stats

    @r.get("/stats", response_model=CrawlStats, dependencies=read)
    async def get_stats() -> CrawlStats:
        """Rates over 1 and 5 minutes, outcomes, fetch-time quantiles, DNS, seen-set, frontier, busiest hosts,
        recrawl backlog and lag: from the services' metrics, Kafka offsets and the frontier summaries (no
        table scan). An unreachable engine is named under `engine_errors`; the rest is still returned."""
        return await collector.build()

    return r
