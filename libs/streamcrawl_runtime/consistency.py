"""Cassandra consistency levels by statement class: every statement the product runs is in one class, found
from the table it reads or writes, and each class has a level of its own (StackSettings, so a deployment
sets them once: STREAMCRAWL_CASSANDRA_CONSISTENCY_<CLASS>). Driver-free; the acsylla session applies it.

- leases (host_state), QUORUM: leases, fencing marks (started/fetched) and politeness timers; a read
  must see the last write.
- claims (content_index, crawl_settings), QUORUM, and SERIAL for the lightweight transaction: the first
  claimer wins, across dedup instances.
- state (url_state, frontier_host_queue, frontier_hosts, due_index, due_by_part, simhash_index), QUORUM: durable
  before an offset is committed.
- control (blocklist, host_overrides, crawl_pauses, schema_migrations), QUORUM: an operator's change is
  seen by every service.
- stats (frontier_summary, host_outcomes, system tables), ONE: observability; a stale or lost row costs
  nothing.

QUORUM with a replication factor of 3 (the chart's) survives one replica down for reads and writes alike,
and a QUORUM read always overlaps the last QUORUM write. On the single-node local stack (replication
factor 1) every level is that one node. A multi-datacenter keyspace (NetworkTopologyStrategy) wants the
LOCAL_ variants (LOCAL_QUORUM, LOCAL_SERIAL): the production values file sets them. A batch runs at the
strongest level of its statements.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

Level = Literal["ONE", "LOCAL_ONE", "TWO", "THREE", "QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL"]
SerialLevel = Literal["SERIAL", "LOCAL_SERIAL"]
StatementClass = Literal["leases", "claims", "state", "control", "stats"]

TABLE_CLASS: dict[str, StatementClass] = {
    "host_state": "leases",
    "content_index": "claims", "crawl_settings": "claims",
    "url_state": "state", "frontier_host_queue": "state", "frontier_hosts": "state", "due_index": "state",
    "due_by_part": "state", "simhash_index": "state",
    "blocklist": "control", "host_overrides": "control", "crawl_pauses": "control", "schema_migrations": "control",
    "frontier_summary": "stats", "host_outcomes": "stats", "local": "stats", "peers": "stats",
}
#: A table not in the map (a new one, a schema statement) gets the state class: safe, if not the cheapest.
DEFAULT_CLASS: StatementClass = "state"
#: Weakest to strongest, for the level of a batch.
_STRENGTH = ("ONE", "LOCAL_ONE", "TWO", "LOCAL_QUORUM", "THREE", "QUORUM", "EACH_QUORUM", "ALL")


@dataclass(frozen=True)
class ConsistencyPolicy:
    leases: Level = "QUORUM"
    claims: Level = "QUORUM"
    state: Level = "QUORUM"
    control: Level = "QUORUM"
    stats: Level = "ONE"
    serial: SerialLevel = "SERIAL"  # the Paxos phase of lightweight transactions (IF NOT EXISTS)

    def for_class(self, cls: StatementClass) -> Level:
        level: Level = getattr(self, cls)
        return level

    def for_table(self, table: str) -> Level:
        return self.for_class(TABLE_CLASS.get(table, DEFAULT_CLASS))

    def strongest(self, levels: Iterable[Level]) -> Level:
        return max(levels, key=_STRENGTH.index)
