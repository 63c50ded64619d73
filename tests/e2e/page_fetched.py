"""Reading what an e2e crawl published: page_fetched from its start, until the topic has been quiet for a while."""

from __future__ import annotations

import json
import time

from confluent_kafka import Consumer
from streamcrawl_contracts.topics import PAGE_FETCHED

#: Polls of 0.5 s in a row that find nothing before the topic counts as quiet.
QUIET_POLLS = 6


def read_page_fetched(bootstrap: str, group_prefix: str, want: int | None = None,
                      timeout_s: float | None = 30.0) -> list[dict]:
    """Every page_fetched message from the topic's start (a group of its own, nothing committed), decoded,
    read until QUIET_POLLS polls in a row find nothing, or `timeout_s` passes (None: no limit), or (with
    `want`) a poll finds nothing once at least `want` messages are in."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group_prefix}-{time.time()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([PAGE_FETCHED.name])
    out: list[dict] = []
    deadline = None if timeout_s is None else time.time() + timeout_s
    idle = 0
    while (deadline is None or time.time() < deadline) and idle < QUIET_POLLS:
        msgs = c.consume(500, 0.5)
        idle = 0 if msgs else idle + 1
        out.extend(json.loads(m.value()) for m in msgs if m.error() is None)
        if want is not None and len(out) >= want and not msgs:
            break
    c.close()
    return out
