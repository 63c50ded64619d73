"""The run loop's watch for a member that is outside its group with no partition (kafka_stuck's orphan
watch), against the real broker: such a consumer is replaced by a new member, and a spare member (more
members than partitions) is left alone."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

import pytest
from confluent_kafka import Producer
from streamcrawl_contracts.messages import Envelope, SeedMessage
from streamcrawl_contracts.topics import Key, TopicSpec
from streamcrawl_runtime.kafka_loop import LoopConfig, RunLoop
from streamcrawl_runtime.ports.loop import Output, Record

from tests.integration.kafka_helpers import make_topics
from tests.integration.test_kafka_loop import PARTS, Echo, _six_hosts_a_partition

pytestmark = pytest.mark.integration


class _FirstNeverJoins(RunLoop):
    """A loop whose first consumer never takes part in its group (as a fenced KIP-848 member that never
    rejoins: it polls on, with no assignment, and the group does not list it); a replacement joins."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.first = self.consumer

    def _subscribe(self) -> None:
        if self.consumer is not self.first:
            super()._subscribe()


@pytest.mark.parametrize("orphan_after_s", [2.0, 0.0], ids=["watch", "no-watch"])
def test_a_member_outside_its_group_is_replaced(stack, unique, orphan_after_s):
    """With no partition for orphan_after_s and outside its group at two looks in a row, the consumer is
    replaced, and the new member handles every record, each once. Without the watch (0) none comes."""
    src, dst = f"t-orphan-{unique}", f"t-orphan-out-{unique}"
    handler, seen, by_part, send = _six_hosts_a_partition(stack.kafka_bootstrap, src, dst, unique)
    hosts = [h for p in range(PARTS) for h in by_part[p][:2]]
    send(hosts)
    loop = _FirstNeverJoins(LoopConfig(
        service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage}, bootstrap=stack.kafka_bootstrap,
        commit_interval_s=0.2, stuck_after_assign_s=1.0, orphan_after_s=orphan_after_s), handler)

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        end = time.time() + 20
        while len(seen) < len(hosts) and time.time() < end:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # a record delivered twice would come now
        loop.stop()
        await task

    asyncio.run(drive())
    if orphan_after_s:
        assert loop.consumers_replaced == 1
        assert loop.consumer is not loop.first
        assert sorted(seen) == sorted(f"http://{h}/" for h in hosts)
    else:
        assert loop.consumers_replaced == 0
        assert seen == []


def test_a_spare_member_with_no_partition_is_left_alone(stack, unique):
    """Two members, one partition: the one without a partition is in its group, so its looks (made) replace
    nothing, and the records are handled once, by the other."""
    src, dst = f"t-spare-{unique}", f"t-spare-out-{unique}"
    make_topics(stack.kafka_bootstrap, src, dst, partitions=1)
    handlers = [Echo(TopicSpec(dst, Key.HOST, 3600_000, "test")) for _ in range(2)]
    cfg = LoopConfig(service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage},
                     bootstrap=stack.kafka_bootstrap, commit_interval_s=0.2, stuck_after_assign_s=0.5,
                     orphan_after_s=1.0)
    loops = [RunLoop(cfg, h) for h in handlers]
    prod = Producer({"bootstrap.servers": stack.kafka_bootstrap})

    async def drive() -> None:
        tasks = [asyncio.create_task(loop.run(install_signals=False)) for loop in loops]
        end = time.time() + 30
        while not any(h.assigned for h in handlers) and time.time() < end:
            await asyncio.sleep(0.2)
        for i in range(5):
            host = f"s{i}.{unique}.test"
            prod.produce(src, key=host.encode(), partition=0,
                         value=SeedMessage(url=f"http://{host}/").model_dump_json().encode())
        assert prod.flush(30) == 0
        end = time.time() + 8  # several looks of the spare: a look every 0.5 s after 1 s without a partition
        while time.time() < end:
            await asyncio.sleep(0.2)
        # The spare is the one without the partition now: while both join, the partition may move once.
        spare.extend(loop for loop in loops if not loop._own.assigned)
        for loop in loops:
            loop.stop()
        await asyncio.gather(*tasks)

    spare: list[RunLoop] = []
    asyncio.run(drive())
    assert len(spare) == 1, "expected one member without a partition"
    assert spare[0].orphan_looks >= 1
    assert [loop.consumers_replaced for loop in loops] == [0, 0]
    assert sum(loop.handled for loop in loops) == 5


class _StaysOutAfterFence(RunLoop):
    """A loop whose consumer, once fenced, stays out of its group (unsubscribed: it polls on with no
    assignment, as a fenced KIP-848 member that never rejoins did after a Kafka freeze)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.first = self.consumer
        self.left = False

    def _note_fenced(self) -> None:
        super()._note_fenced()
        if not self.left and self.consumer is self.first:
            self.left = True
            self.consumer.unsubscribe()  # in the lost callback: before the client can rejoin


@pytest.mark.parametrize("after_fence_s", [1.0, 0.0], ids=["soon", "orphan_after_s"])
def test_a_fenced_member_outside_its_group_is_replaced_soon(stack, unique, after_fence_s):
    """A member its group fences (its loop stood still past max.poll.interval.ms, as a session expires
    across a broker freeze: librdkafka reports its partitions lost) and that stays out of its group is
    replaced orphan_after_fence_s after the fence, long before orphan_after_s (60 s here); the new member
    handles the rest. With orphan_after_fence_s 0 nothing is replaced within the test's 25 s."""
    src, dst = f"t-fence-{unique}", f"t-fence-out-{unique}"
    handler, seen, by_part, send = _six_hosts_a_partition(stack.kafka_bootstrap, src, dst, unique)
    first, rest = [by_part[p][0] for p in range(PARTS)], [by_part[p][1] for p in range(PARTS)]
    inner = handler.handle
    stood_still: list[float] = []

    async def stand_still_once(record: Record, message: Envelope) -> Sequence[Output]:
        if not stood_still:
            stood_still.append(time.time())
            time.sleep(4.0)  # blocks the event loop: no poll past max.poll.interval.ms
        return await inner(record, message)

    handler.handle = stand_still_once  # type: ignore[method-assign]
    loop = _StaysOutAfterFence(LoopConfig(
        service="test", group_id=f"g-{unique}", subscriptions={src: SeedMessage}, bootstrap=stack.kafka_bootstrap,
        commit_interval_s=0.2, orphan_after_s=60.0, orphan_after_fence_s=after_fence_s,
        consumer_overrides={"max.poll.interval.ms": 1500}), handler)

    async def drive() -> None:
        task = asyncio.create_task(loop.run(install_signals=False))
        send(first)
        end = time.time() + 25
        while not loop.left and time.time() < end:
            await asyncio.sleep(0.2)
        send(rest)
        want = {f"http://{h}/" for h in first + rest}
        while not want <= set(seen) and time.time() < end:
            await asyncio.sleep(0.2)
        loop.stop()
        await task

    asyncio.run(drive())
    assert loop.fences >= 1 and loop.left, "the member was not fenced: the test proves nothing"
    if after_fence_s:
        assert loop.consumers_replaced == 1
        assert loop.consumer is not loop.first
        assert set(seen) == {f"http://{h}/" for h in first + rest}
    else:
        assert loop.consumers_replaced == 0
        assert not {f"http://{h}/" for h in rest} & set(seen)
