"""The run loop's settings (LoopConfig) and the consumer settings of each group protocol, apart from the
Kafka driver (streamcrawl_runtime.kafka_loop builds the consumer from them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from streamcrawl_contracts.messages import Envelope


@dataclass
class LoopConfig:
    service: str
    group_id: str
    subscriptions: dict[str, type[Envelope]]  # topic name → payload model
    bootstrap: str
    #: "consumer": Kafka 4's group protocol (KIP-848): incremental, server-side range assignment.
    #: "classic": the eager protocol with the client's range assignor (brokers before Kafka 4); every
    #: rebalance then stops the whole group.
    group_protocol: Literal["consumer", "classic"] = "consumer"
    #: How long a revoked partition's records in flight may run before the partition is handed over
    #: anyway; those still running are cancelled (their work is replayed by the next owner). The fetcher's
    #: longest request is longer: a handover cuts it short rather than keeping the host waiting.
    revoke_drain_s: float = 30.0
    #: The producer's linger.ms (StackSettings.kafka_linger_ms says why 20).
    linger_ms: int = 20
    max_in_flight: int = 256
    resume_below: int = 128
    poll_batch: int = 500
    commit_interval_s: float = 0.5
    #: How long an asynchronous commit may stay unanswered before the next one is sent anyway.
    commit_wait_s: float = 30.0
    tick_interval_s: float = 0.2
    # A paused loop (backpressure) polls this often, for the rebalance callbacks, which run only in a poll;
    # and a poll that found a record gathers what else arrives within it into one batch.
    busy_poll_s: float = 0.02
    # The longest a busy loop (handlers in flight, not paused) blocks in poll. A record wakes the poll at
    # once, so no record waits for it; what waits is the loop's own work after a handler finishes: a tick
    # the handler brought forward, a commit. It was a 20 ms poll-and-sleep cycle: measured at 530 µs of CPU
    # a pass against 560 µs for a 100 ms blocking poll, that was 2.6% of a core for every busy process
    # (0.6% blocking), paid by each instance (a fetcher waiting on politeness is busy all the time): the
    # cost that grew with the instance count in the scale benchmark (docs/benchmarks-scale-instances.md).
    # 0 keeps the old cycle (bench/loop_busy.py compares the two).
    busy_wait_s: float = 0.1
    # The longest an idle loop (nothing in flight) blocks in poll: a stop signal, the readiness probes
    # (asyncio tasks) and a handler without `tick_due` wait at most this long.
    idle_wait_s: float = 1.0
    max_attempts: int = 3
    #: A partition whose oldest unfinished record has not finished for this long is logged (a warning every
    #: 30 s while it lasts): longer than any record's legitimate wait (a fetch's lease is 60 s).
    stall_warn_s: float = 120.0
    #: How often the loop looks for assigned partitions that have records to read and delivered nothing
    #: since the last look while the loop was not paused (kafka_stuck); they are restarted. 0: never.
    stuck_check_s: float = 15.0
    #: A partition just assigned is looked at this soon (then every stuck_check_s again): a fetch that never
    #: starts after a rebalance (a broker freeze's end fences and reassigns every member) held its hosts for
    #: up to two whole intervals otherwise, 24 s in one engine-fault e2e run. A look too early restarts a
    #: partition whose records were on their way, which costs a ListOffsets and nothing else. 0: no early look.
    stuck_after_assign_s: float = 5.0
    #: After this many checks in a row failed (the consumer's own offset lookup erring) while the broker
    #: answers another client, the consumer is taken for wedged and replaced by a new one (kafka_stuck).
    #: 0: never.
    wedged_after_checks: int = 4
    #: A member that has had no partition for this long asks whether its group still lists it; outside it
    #: twice in a row, its consumer is replaced by a new member (kafka_stuck._watch_orphan_async). 0: never.
    orphan_after_s: float = 10.0
    #: The same look, this soon after the group fenced the member (partitions lost: its session expired,
    #: e.g. across a broker freeze): a fenced member normally rejoins within a heartbeat (1 s here), so one
    #: still outside its group this long after the fence is replaced early. Only a member its group does
    #: not list is replaced: one that rejoined holds its partitions on the broker until its session
    #: expires (15 s here), and a replacement would wait for that (seen: 20 s). 0: orphan_after_s applies.
    orphan_after_fence_s: float = 2.0
    transient_backoff_s: float = 1.0
    # The longest wait between retries of a record during an outage: once the engine is back, a record
    # resumes within this (a longer cap only adds to the time a crawl needs to recover).
    transient_backoff_max_s: float = 5.0
    consumer_overrides: dict[str, Any] = field(default_factory=dict)
    # Look up each assigned partition's log end (one broker round trip per partition, at every
    # assignment) so records can be marked Record.fresh. Only for a handler that reads the flag.
    mark_fresh: bool = False
    # Freeze the start-up heap and collect less often (gctune.settle_heap) just before consuming.
    # For service processes; off by default so a test process building loops keeps the defaults.
    settle_heap: bool = False


def group_protocol_config(protocol: str) -> dict[str, Any]:
    """The consumer settings of a group protocol. Both keep partition i of every subscribed topic on one
    member (co-partitioning): KIP-848's server-side range assignor moves whole indexes, incrementally and
    sticky; the classic client-side range assignor recomputes everything at every rebalance (eager)."""
    if protocol == "consumer":
        # Session and heartbeat timing are the broker's (group.consumer.*: see stack/kafka/server.properties.in).
        return {"group.protocol": "consumer", "group.remote.assignor": "range"}
    if protocol == "classic":
        return {"group.protocol": "classic", "partition.assignment.strategy": "range",
                "session.timeout.ms": 10000, "heartbeat.interval.ms": 2000}
    raise ValueError(f"group protocol must be 'consumer' or 'classic', got {protocol!r}")
