"""Lease rules (streamcrawl_core.lease): fencing, the send guard, the expiry decision, the lease table."""

from __future__ import annotations

import pytest
from streamcrawl_core.lease import (
    CONFIRM_MARGIN_S,
    NO_MARKS,
    Extend,
    Hold,
    Lease,
    LeaseMarks,
    LeaseTable,
    Release,
    Replay,
    confirm_after,
    early_check_at,
    grant,
    handled,
    interrupted_delay_basis,
    interrupted_fetch_s,
    may_send,
    must_confirm,
    on_expiry,
    replay_check,
)


def test_grant_is_unique_and_dated() -> None:
    a, b = grant("http://a/", 1, 3, 100.0, 120.0), grant("http://a/", 1, 3, 100.0, 120.0)
    assert a.lease_id != b.lease_id and len(a.lease_id) == 32
    assert (a.url, a.url_fp, a.part, a.expires_at) == ("http://a/", 1, 3, 220.0)


@pytest.mark.parametrize(("marks", "verdict"), [
    (LeaseMarks("L", None), Replay.NOT_STARTED),                       # current, never started
    (LeaseMarks("L", "L", "L", 5.0), Replay.FINISHED),                 # finished wins over everything
    (LeaseMarks(None, "L"), Replay.FINISHED),                          # finished, lease since cleared
    (LeaseMarks("M", None), Replay.SUPERSEDED),                        # another lease is current
    (LeaseMarks(None, None), Replay.SUPERSEDED),                       # no lease: done and cleared
    (LeaseMarks("L", "K", "L", 5.0), Replay.INTERRUPTED),              # started, not finished
    (LeaseMarks("L", None, "L", None), Replay.NOT_STARTED),            # a mark without a time is no start
    (LeaseMarks("L", None, "K", 5.0), Replay.NOT_STARTED),             # the start mark of another lease
    (LeaseMarks("M", None, "L", 5.0), Replay.SUPERSEDED),              # started, but superseded since
])
def test_replay_check(marks: LeaseMarks, verdict: Replay) -> None:
    assert replay_check("L", marks) is verdict


def test_no_marks_supersedes() -> None:
    assert replay_check("L", NO_MARKS) is Replay.SUPERSEDED


def test_may_send_guard() -> None:
    assert may_send(94.9, 100.0, 5.0) and may_send(95.0, 100.0, 5.0)
    assert not may_send(95.01, 100.0, 5.0) and not may_send(101.0, 100.0, 0.0)


def test_interrupted_fetch_s_is_never_negative() -> None:
    assert interrupted_fetch_s(10.0, 14.5) == 4.5 and interrupted_fetch_s(10.0, 9.0) == 0.0


def test_an_interrupted_request_counts_the_hosts_last_known_fetch_time_for_the_10x_rule() -> None:
    assert interrupted_delay_basis(26.0, 0.2) == 0.2  # a crash noticed 26 s later: the host is not slow
    assert interrupted_delay_basis(26.0, None) == 26.0  # nothing known: the elapsed time, as before
    assert interrupted_delay_basis(0.5, 3.0) == 0.5  # never more than the request can have lasted
    assert interrupted_delay_basis(-1.0, 3.0) == 0.0 and interrupted_delay_basis(4.0, -1.0) == 4.0


@pytest.mark.parametrize(("marks", "now", "decision"), [
    (LeaseMarks("L", None), 200.0, Release()),                          # nothing went out
    (LeaseMarks("L", "L", "L", 100.0), 200.0, Release()),               # finished: the result is on its way
    (LeaseMarks("L", None, "K", 100.0), 200.0, Release()),              # another lease's start
    (LeaseMarks("L", None, "L", 100.0), 200.0, Extend(230.0)),          # may still run until start + 130
    (LeaseMarks("L", None, "L", 100.0), 229.9, Extend(230.0)),
    (LeaseMarks("L", None, "L", 100.0), 230.0, Hold(130.0)),            # over: hold 10x the time since start
    (LeaseMarks("L", None, "L", 100.0), 400.0, Hold(300.0)),
])
def test_on_expiry(marks: LeaseMarks, now: float, decision: object) -> None:
    assert on_expiry("L", marks, now, max_request_s=130.0) == decision


def test_lease_table_tracks_one_lease_per_host_and_skips_stale_entries() -> None:
    t = LeaseTable()
    a1 = Lease("a1", "http://a/1", 1, 0, 10.0)
    a2 = Lease("a2", "http://a/2", 2, 0, 20.0)
    b1 = Lease("b1", "http://b/1", 3, 1, 15.0)
    t.track("a", a1)
    t.track("b", b1)
    assert len(t) == 2 and "a" in t and sorted(t) == ["a", "b"]
    t.track("a", a2)  # replaces a1; a1's heap entry is stale
    assert t.get("a") is a2
    assert t.next_time() == min(a2.expires_at, b1.expires_at)  # a1's stale entry is not reported
    assert t.next_due(12.0) is None  # a1's entry comes up and is skipped
    assert t.next_due(15.0) == ("b", b1)
    assert t.end("b", "other") is None and t.end("b", "b1") is b1 and "b" not in t
    t.untrack("a", a1)  # not the current lease: kept
    assert t.get("a") is a2
    t.recheck_at("a", a2, 30.0)
    assert t.next_due(20.0) == ("a", a2)  # the original expiry entry
    assert t.next_due(25.0) is None
    assert t.next_due(30.0) == ("a", a2)  # the re-check entry
    assert t.next_time() is None
    t.drop_parts({0})
    assert len(t) == 0 and t.next_due(100.0) is None


# ------------------------------------------------------------------ the early check


def test_early_check_comes_check_s_after_the_grant_or_later_under_load() -> None:
    assert early_check_at(100.0, 60.0, 20.0) == 120.0
    assert early_check_at(100.0, 60.0, 20.0, start_delay_s=15.0) == 130.0  # requests wait ~15 s to start
    assert early_check_at(100.0, 60.0, 20.0, start_delay_s=-3.0) == 120.0
    assert early_check_at(100.0, 60.0, 20.0, start_delay_s=30.0) is None  # too close to the expiry
    assert early_check_at(100.0, 60.0, 0.0) is None  # off
    assert early_check_at(100.0, 60.0, 55.0) is None


def test_confirm_after_precedes_the_earliest_check_by_the_margin() -> None:
    assert confirm_after(100.0, 60.0, 20.0) == 120.0 - CONFIRM_MARGIN_S
    assert confirm_after(100.0, 60.0, 0.0) == 0.0
    assert confirm_after(100.0, 60.0, 58.0) == 0.0  # no early check: no confirming read either
    # whatever the start delay, the check is never earlier than what the fetcher confirms for
    for delay in (0.0, 5.0, 12.0, 20.0):
        check = early_check_at(100.0, 60.0, 20.0, delay)
        assert check is None or check >= confirm_after(100.0, 60.0, 20.0) + CONFIRM_MARGIN_S


def test_must_confirm() -> None:
    assert not must_confirm(114.9, 115.0)
    assert must_confirm(115.0, 115.0) and must_confirm(140.0, 115.0)
    assert not must_confirm(1e12, 0.0)  # a request from before early checks


@pytest.mark.parametrize(("marks", "expected"), [
    (NO_MARKS, False),
    (LeaseMarks("L1", None), False),
    (LeaseMarks("L1", None, "L1", 5.0), True),  # started: may be running
    (LeaseMarks(None, None, "L1", 5.0), True),  # started, then fenced: still running maybe
    (LeaseMarks("L1", "L1"), True),  # finished without a request (dns_error): the result is coming
    (LeaseMarks("L1", "L0", "L0", 5.0), False),  # an older lease's marks
    (LeaseMarks("L1", None, "L1", None), False),
])
def test_handled(marks: LeaseMarks, expected: bool) -> None:
    assert handled("L1", marks) is expected


def test_fence_and_confirm_cannot_both_miss() -> None:
    """Every interleaving of the frontier's fence-then-read and the fetcher's start-then-read: never both
    a request sent and the lease ended (the URL leased again)."""
    import itertools

    frontier = ["fence", "read"]
    fetcher = ["start", "confirm"]
    for order in set(itertools.permutations(frontier + fetcher)):
        if order.index("fence") > order.index("read") or order.index("start") > order.index("confirm"):
            continue
        current, marks_started = "L1", False
        sent = ended = False
        for step in order:
            if step == "fence":
                current = None
            elif step == "start":
                marks_started = True
            elif step == "read":
                ended = not handled("L1", LeaseMarks(current, None, "L1" if marks_started else None,
                                                     1.0 if marks_started else None))
            elif step == "confirm":
                sent = current == "L1"
        assert not (sent and ended), order
