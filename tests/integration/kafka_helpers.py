"""Kafka helpers the integration tests share: per-test topics, reading a topic from its start, and a
handler wrapper that sends a service's outputs on the topic under test to a per-test topic."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping, Sequence

from confluent_kafka import Consumer, Message
from confluent_kafka.admin import AdminClient, NewTopic
from streamcrawl_contracts.messages import Envelope
from streamcrawl_contracts.topics import TopicSpec
from streamcrawl_runtime.ports.loop import Handler, Output, Record

#: The largest record a test reads (the hostile corpus sends and reads records above Kafka's 1 MB default).
MAX_RECORD_BYTES = 2 * 1024 * 1024


def make_topics(bootstrap: str, *names: str, partitions: int = 2, config: Mapping[str, str] | None = None) -> None:
    """Create the test's own topics (replication 1) and wait until they exist."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(n, num_partitions=partitions, replication_factor=1, config=dict(config or {}))
              for n in names]
    for f in admin.create_topics(topics).values():
        f.result(30)


def read_messages(bootstrap: str, topic: str, want: int, timeout: float = 60.0) -> list[Message]:
    """The first `want` records of `topic` from its start (a group of its own, nothing committed), or
    fewer if `timeout` seconds pass first."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}-{uuid.uuid4().hex}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                  "fetch.message.max.bytes": MAX_RECORD_BYTES})
    c.subscribe([topic])
    got: list[Message] = []
    deadline = time.time() + timeout
    while len(got) < want and time.time() < deadline:
        got.extend(m for m in c.consume(200, 0.5) if m.error() is None)
    c.close()
    return got


def read_topic(bootstrap: str, topic: str, want: int, timeout: float = 60.0) -> list[bytes]:
    """The values of `read_messages`."""
    return [m.value() or b"" for m in read_messages(bootstrap, topic, want, timeout)]


class TopicUnderTest:
    """Wraps a service's handler and sends its outputs on the topic under test (`only`) to one per-test
    topic (`to`) instead of the shared one. Outputs on other topics (a redirect's or a robots.txt's
    candidates, WARC archive records) are never produced, so they pollute neither the shared topics nor
    the topic under test; with `keep_side` they are kept in `side` for the test to look at."""

    def __init__(self, inner: Handler, to: TopicSpec, only: TopicSpec, keep_side: bool = True) -> None:
        self.inner, self.to, self.only, self.keep_side = inner, to, only, keep_side
        self.side: list[Output] = []

    def _route(self, outputs: Sequence[Output]) -> list[Output]:
        if self.keep_side:
            self.side.extend(o for o in outputs if o.topic.name != self.only.name)
        return [Output(self.to, o.key, o.value) for o in outputs if o.topic.name == self.only.name]

    async def handle(self, record: Record, message: Envelope) -> Sequence[Output]:
        return self._route(await self.inner.handle(record, message))

    async def on_assign(self, partitions: list[int]) -> None:
        await self.inner.on_assign(partitions)

    async def on_revoke(self, partitions: list[int]) -> None:
        await self.inner.on_revoke(partitions)

    async def tick(self, now: float) -> Sequence[Output]:
        return self._route(await self.inner.tick(now))
