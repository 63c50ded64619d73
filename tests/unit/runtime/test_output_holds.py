"""LoopOutput's holds: outputs wait while a flush runs, holds nest (the background periodic flush and a
handover's flush), and a second hold sends what the first held, since its commit covers those records."""

from __future__ import annotations

from typing import Any

from streamcrawl_contracts.messages import UrlMessage
from streamcrawl_contracts.topics import Key, TopicSpec
from streamcrawl_runtime.kafka_output import LoopOutput
from streamcrawl_runtime.ports.loop import Output

OUT = TopicSpec("t-out", Key.HOST, 3600_000, "test")


class Sent:
    """Records what reaches the producer's queue."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    def produce(self, topic: str, value: bytes, key: bytes | None, on_delivery: Any) -> None:
        self.keys.append((key or b"").decode())

    def poll(self, _timeout: float) -> int:
        return 0


def _out(host: str) -> Output:
    return Output(OUT, host, UrlMessage(url=f"http://{host}/", host=host, url_fp=1))


def test_held_outputs_go_out_at_release():
    sent = Sent()
    out = LoopOutput(sent, "test")  # type: ignore[arg-type]
    out.hold()
    out.produce([_out("a.test")])
    assert sent.keys == []
    out.release()
    assert sent.keys == ["a.test"]
    out.produce([_out("b.test")])
    assert sent.keys == ["a.test", "b.test"]


def test_a_second_hold_sends_what_the_first_held_and_the_last_release_ends_holding():
    sent = Sent()
    out = LoopOutput(sent, "test")  # type: ignore[arg-type]
    out.hold()  # the periodic flush
    out.produce([_out("a.test")])
    out.hold()  # a handover: its commit covers a.test's record, so a.test must be in the queue it flushes
    assert sent.keys == ["a.test"]
    out.produce([_out("b.test")])
    out.release()  # the handover's flush is done; the periodic one still runs
    assert sent.keys == ["a.test"]
    out.release()
    assert sent.keys == ["a.test", "b.test"]
    out.release()  # an extra release changes nothing
    out.produce([_out("c.test")])
    assert sent.keys == ["a.test", "b.test", "c.test"]
