"""settle_heap: the start-up heap leaves the collector's reach, young collections come less often."""

from __future__ import annotations

import gc

from streamcrawl_runtime.gctune import YOUNG_THRESHOLD, settle_heap


class _Node:
    def __init__(self) -> None:
        self.peer: _Node | None = None


def test_settle_heap_freezes_startup_objects_and_raises_the_young_threshold():
    before = gc.get_threshold()
    startup = _Node()
    assert any(o is startup for o in gc.get_objects())
    try:
        settle_heap()
        assert not any(o is startup for o in gc.get_objects())  # frozen: full collections skip it
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
        # Later objects are still collected, cycles included.
        a, b = _Node(), _Node()
        a.peer, b.peer = b, a
        assert any(o is a for o in gc.get_objects())
        del a, b
        assert gc.collect() >= 2
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
