"""Reading what an e2e crawl produced: page_fetched from its start, until the topic has been quiet for a while;
which fetch results were durable in Kafka at a moment (a kill -9)."""

from __future__ import annotations

import json
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
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


def urls_with_result_before(bootstrap: str, topic: str, before: float) -> set[str]:
    """URLs of every message on `topic` (fetch results) whose producer stamped it before `before` (epoch
    seconds): results that were durable in Kafka by then. Reads each partition from its start to the end it
    had when called (assign, no group commits)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"e2e-durable-{time.time()}",
                  "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        todo = {p for p, end in ends.items() if end > 0}
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo])
        out: set[str] = set()
        deadline = time.time() + 60
        while todo and time.time() < deadline:
            for m in c.consume(500, 0.5):
                if m.error() is not None:
                    continue
                if m.offset() + 1 >= ends[m.partition()]:
                    todo.discard(m.partition())
                if m.timestamp()[1] / 1000.0 < before:
                    out.add(json.loads(m.value())["url"])
        return out
    finally:
        c.close()
