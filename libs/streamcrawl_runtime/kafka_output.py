"""The run loop's output side, apart from its consumer: serialize and produce a record's outputs, hold them
while a flush runs in a worker thread, remember a failed delivery, and build dead letters.

Held outputs belong to records that finished after the flush began, which the commit that follows the
flush does not cover; sending them then would keep the flush from ever seeing an empty queue under load.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

from confluent_kafka import KafkaError, Message, Producer
from prometheus_client import Counter
from streamcrawl_contracts.messages import DeadLetter
from streamcrawl_contracts.topics import DEAD_LETTER

from streamcrawl_runtime.metrics import Children
from streamcrawl_runtime.ports.errors import PoisonMessage
from streamcrawl_runtime.ports.loop import Output, Record

OUTPUTS = Counter("streamcrawl_outputs_total", "Records produced", ["service", "topic"])
_OUTPUTS = Children(OUTPUTS)

#: The largest output (value and key) produced: librdkafka's default message.max.bytes is 1,000,000, and
#: a record's framing needs some of it.
MAX_OUTPUT_BYTES = 990_000
#: The most of a poison record's value a dead letter carries (base64 in JSON): the record itself stays in
#: its topic (source_topic, partition, offset) for its retention; a dead letter must fit Kafka's 1 MB.
DEAD_LETTER_PAYLOAD_BYTES = 64 * 1024

Msg = tuple[str, bytes | None, bytes]  # topic, key, value


class LoopOutput:
    def __init__(self, producer: Producer, service: str) -> None:
        self.producer = producer
        self.service = service
        self.delivery_error: str | None = None
        self._held: list[Msg] | None = None
        self._holds = 0  # holds not yet released

    def _delivered(self, err: KafkaError | None, _msg: Message) -> None:
        if err is not None:
            self.delivery_error = str(err)

    def produce(self, outputs: Sequence[Output]) -> None:
        """Serialize and send ``outputs`` (or hold them while a flush runs). Raises PoisonMessage for an
        output the broker would refuse as too large, before any of them is sent."""
        msgs: list[Msg] = []
        for out in outputs:
            payload = out.value.model_dump_json().encode()
            key = out.key.encode() if out.key is not None else None
            if len(payload) + len(key or b"") > MAX_OUTPUT_BYTES:
                raise PoisonMessage(f"an output of {len(payload)} bytes to {out.topic.name} is over the limit")
            msgs.append((out.topic.name, key, payload))
        if self._held is not None:
            self._held.extend(msgs)
            return
        self._send(msgs)

    def hold(self) -> None:
        """Hold outputs from now until the matching release(). Holds nest: the loop's periodic flush runs
        in the background while a handover flushes the partitions it gives up. A second hold sends what
        the first holds: those outputs belong to records the second flush's commit covers."""
        if self._held is None:
            self._held = []
        elif self._held:
            held, self._held = self._held, []
            self._send(held)
        self._holds += 1

    def release(self) -> None:
        self._holds = max(0, self._holds - 1)
        if self._holds:
            return
        held, self._held = self._held or [], None
        self._send(held)

    def _send(self, msgs: Sequence[Msg]) -> None:
        for topic, key, payload in msgs:
            while True:
                try:
                    self.producer.produce(topic, value=payload, key=key, on_delivery=self._delivered)
                    break
                except BufferError:  # local queue full: serve delivery reports, then retry
                    self.producer.poll(0.1)
            _OUTPUTS(self.service, topic).inc()
        self.producer.poll(0)


def dead_letter(service: str, rec: Record, reason: str, exc: BaseException) -> Output:
    """The dead letter of ``rec``: where it came from, why, and at most DEAD_LETTER_PAYLOAD_BYTES of it."""
    kept = rec.value[:DEAD_LETTER_PAYLOAD_BYTES]
    dl = DeadLetter(service=service, source_topic=rec.topic, partition=rec.partition, offset=rec.offset,
                    key=None if rec.key is None else rec.key[:1024], payload_b64=base64.b64encode(kept).decode(),
                    payload_bytes=len(rec.value), payload_truncated=len(kept) < len(rec.value), reason=reason,
                    error_type=type(exc).__name__)
    return Output(DEAD_LETTER, dl.key, dl)
