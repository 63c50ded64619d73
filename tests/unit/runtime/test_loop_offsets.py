"""The run loop's offset bookkeeping: the committable prefix, and the watch for records that never finish."""

from streamcrawl_runtime.loop_offsets import PartitionOffsets, StallWatch


def test_commit_point_is_the_completed_prefix() -> None:
    t = PartitionOffsets()
    for off in (5, 6, 7):
        t.start(off)
    t.finish(6)
    assert t.commit_point() == 5  # 5 still pending: the commit names 5, the next record to read
    t.finish(5)
    assert t.commit_point() == 7
    t.finish(7)
    assert t.commit_point() == 8


def test_a_record_that_never_finishes_is_reported_once_it_has_been_oldest_long_enough() -> None:
    watch = StallWatch(after_s=120)
    t = PartitionOffsets()
    t.start(10)
    t.start(11)
    offsets = {("fetch_results", 3): t}
    assert watch.look(offsets, now=0.0) == []
    assert watch.look(offsets, now=90.0) == []
    t.finish(11)  # a later record finishing does not move the oldest pending one
    assert watch.look(offsets, now=150.0) == [(("fetch_results", 3), 10, 1, 150.0)]


def test_progress_restarts_the_clock_and_a_drained_partition_is_forgotten() -> None:
    watch = StallWatch(after_s=120)
    t = PartitionOffsets()
    t.start(1)
    t.start(2)
    offsets = {("parsed", 0): t}
    watch.look(offsets, now=0.0)
    t.finish(1)  # the oldest finished: offset 2 is the oldest from now on
    assert watch.look(offsets, now=100.0) == []
    assert watch.look(offsets, now=200.0) == []  # 2 has been oldest for 100 s only
    assert watch.look(offsets, now=221.0) == [(("parsed", 0), 2, 1, 121.0)]
    t.finish(2)
    assert watch.look(offsets, now=400.0) == []
    t.start(3)
    assert watch.look(offsets, now=401.0) == []  # a new pending record starts its own clock
