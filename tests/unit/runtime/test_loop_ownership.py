"""The run loop's handler owns partition index i only while partition i of every topic it reads is here."""

from __future__ import annotations

from streamcrawl_runtime.loop_ownership import Ownership

TOPICS = ("seeds", "urls", "results")


def _index(i: int, topics: tuple[str, ...] = TOPICS) -> list[tuple[str, int]]:
    return [(t, i) for t in topics]


def test_whole_indexes_are_owned_and_released_together() -> None:
    own = Ownership(TOPICS)
    gained, hold, release = own.assign(_index(0) + _index(3))
    assert (gained, hold, release) == ([0, 3], [], [])
    lost, hold = own.revoke(_index(3))
    assert (lost, hold) == ([3], [])
    assert own.owned == {0} and own.assigned == set(_index(0))


def test_a_partial_index_is_held_until_complete_then_read_again() -> None:
    own = Ownership(TOPICS)
    gained, hold, release = own.assign([("seeds", 2), ("urls", 2)])
    assert gained == [] and hold == [("seeds", 2), ("urls", 2)] and release == []
    assert own.owned == set() and own.held == {("seeds", 2), ("urls", 2)}
    gained, hold, release = own.assign([("results", 2)])
    assert gained == [2] and hold == [] and release == [("seeds", 2), ("urls", 2)]
    assert own.held == set()


def test_losing_one_partition_of_an_index_releases_the_index_and_holds_the_rest() -> None:
    own = Ownership(TOPICS)
    own.assign(_index(1))
    lost, hold = own.revoke([("urls", 1)])
    assert lost == [1] and hold == [("results", 1), ("seeds", 1)]
    assert own.owned == set() and own.held == {("results", 1), ("seeds", 1)}
    lost, hold = own.revoke([("results", 1), ("seeds", 1)])
    assert lost == [] and hold == [] and own.held == set() and own.assigned == set()


def test_a_single_topic_service_owns_what_it_is_assigned() -> None:
    own = Ownership(("fetch_requests",))
    assert own.assign([("fetch_requests", 5), ("fetch_requests", 1)])[0] == [1, 5]
    assert own.revoke([("fetch_requests", 9)]) == ([], [])  # not ours: nothing happens
    assert own.clear() == [1, 5] and own.owned == set()


def test_assigning_again_changes_nothing() -> None:
    own = Ownership(TOPICS)
    own.assign(_index(4))
    assert own.assign(_index(4)) == ([], [], [])
