"""Pure frame rules, the drift-free ticker and the bounded queues, without any server."""

from __future__ import annotations

import asyncio
import time

import grpc
import numpy as np
import pytest

from server._rules import (
    MAX_ACTIONS_PER_FRAME,
    MAX_FRAMES_AHEAD,
    Arrival,
    Provenance,
    budget_at,
    check_action,
    decide_action,
    landing_frame,
    wall_ticks,
)
from server._ticker import Ticker
from server._viewers import ViewerHub
from server.session import AgentLink, SessionConfig, SessionError

LEGAL = np.array([True, True, False, True])
FALLBACK = 3


def decide(arrivals, deadline=10.0):
    return decide_action(arrivals, deadline=deadline, legal=LEGAL, fallback=FALLBACK)


def test_on_time_answer_applies_with_its_slack():
    d = decide([Arrival(1, 9.75)])
    assert (d.action, d.provenance, d.received_action) == (1, Provenance.ON_TIME, 1)
    assert d.slack_ms == pytest.approx(250.0)


def test_the_latest_on_time_answer_wins_and_late_ones_are_ignored():
    d = decide([Arrival(0, 9.0), Arrival(1, 9.5), Arrival(0, 10.5)])
    assert (d.action, d.provenance, d.slack_ms) == (1, Provenance.ON_TIME, pytest.approx(500.0))
    # An answer exactly at the deadline is on time.
    assert decide([Arrival(0, 10.0)]).provenance is Provenance.ON_TIME


def test_late_answer_plays_the_fallback_with_negative_slack():
    d = decide([Arrival(1, 10.02), Arrival(0, 10.5)])
    assert (d.action, d.provenance, d.received_action) == (FALLBACK, Provenance.LATE, 1)
    assert d.slack_ms == pytest.approx(-20.0)


def test_no_answer_plays_the_fallback():
    d = decide([])
    assert (d.action, d.provenance, d.received_action, d.slack_ms) == (
        FALLBACK,
        Provenance.FALLBACK,
        -1,
        0.0,
    )
    assert d.arrived_at is None


@pytest.mark.parametrize("action", [2, -1, 4, 99])
def test_illegal_or_out_of_range_answer_is_invalid(action):
    d = decide([Arrival(action, 9.0)])
    assert (d.action, d.provenance, d.received_action) == (FALLBACK, Provenance.INVALID, action)


def test_simulated_clock_has_no_deadline():
    d = decide([Arrival(1, 1e9)], deadline=None)
    assert (d.action, d.provenance, d.slack_ms) == (1, Provenance.ON_TIME, 0.0)


def test_check_action_refuses_past_and_far_frames_and_keeps_invalid_ones():
    kw = dict(current=10, num_actions=4, legal=LEGAL)
    past = check_action(9, 1, **kw)
    assert not past.keep and "frame 9 already past (the current frame is 10)" in past.error
    far = check_action(10 + MAX_FRAMES_AHEAD + 1, 1, **kw)
    assert not far.keep and "too far ahead" in far.error
    assert check_action(10 + MAX_FRAMES_AHEAD, 1, **kw).error is None
    rng = check_action(10, 7, **kw)
    assert rng.keep and "action 7 out of range [0, 4)" in rng.error
    illegal = check_action(10, 2, **kw)
    assert illegal.keep and "action 2 is illegal at frame 10" in illegal.error
    # Legality of a future frame is judged when it comes.
    assert check_action(12, 2, **kw).error is None


def test_clock_and_budget_helpers():
    assert [wall_ticks(x, 0.01) for x in (0.0, 1e-6, 0.01, 0.0101, 0.05)] == [0, 1, 1, 2, 5]
    assert [budget_at((2, 1, 1), i) for i in range(5)] == [2, 1, 1, 2, 1]
    assert landing_frame(5, 3, committed=True) == 7
    assert landing_frame(5, 1, committed=True) == 5
    assert landing_frame(5, 32, committed=False) == 5


def test_ticker_is_drift_free_and_counts_late_ticks():
    period = 0.01

    async def run():
        ticker = Ticker(period, late_after=0.004)
        ticks = []
        for n in range(1, 31):
            if n == 10:
                time.sleep(0.035)  # a stall: ticks 10..13 fire late, the schedule stays
            ticks.append(await ticker.wait(n))
        return ticker, ticks

    ticker, ticks = asyncio.run(run())
    # Every tick is anchored at start + n * period, never at the previous tick.
    for tick in ticks:
        assert tick.scheduled == pytest.approx(ticker.start + tick.index * period)
        assert tick.fired >= tick.scheduled
    # No drift: the stall delayed a few ticks, not the end of the schedule.
    assert ticks[-1].fired - ticker.start == pytest.approx(30 * period, abs=0.02)
    assert ticker.late_ticks >= 2 and ticker.max_lag >= 0.02
    assert ticker.ticks == 30
    late = [t.index for t in ticks if t.lag > ticker.late_after]
    assert {10, 11} <= set(late)


def test_ticker_catches_up_after_a_stall_without_skipping():
    now = [0.0]
    ticker = Ticker(0.1, start=0.0, late_after=0.001, clock=lambda: now[0])
    now[0] = 0.35  # ticks 1, 2, 3 are all past: they fire at once, in order, and are late

    async def run():
        return [await ticker.wait(n) for n in (1, 2, 3)]

    ticks = asyncio.run(run())
    assert [t.index for t in ticks] == [1, 2, 3]
    assert [round(t.lag, 6) for t in ticks] == [0.25, 0.15, 0.05]
    assert ticker.late_ticks == 3 and ticker.max_lag == pytest.approx(0.25)
    with pytest.raises(ValueError, match="period must be > 0"):
        Ticker(0.0)


def test_viewer_queue_drops_the_oldest_and_always_ends():
    async def run():
        hub = ViewerHub(3)
        slow, fast = hub.join(), hub.join()
        for i in range(10):
            hub.broadcast(str(i))
            fast.queue.get_nowait()
        assert [slow.queue.get_nowait() for _ in range(3)] == ["7", "8", "9"]
        assert slow.dropped == 7 and fast.dropped == 0 and hub.dropped == 7
        for i in range(5):
            hub.broadcast(str(i))
        hub.close("bye")
        items = [slow.queue.get_nowait() for _ in range(slow.queue.qsize())]
        assert items[-2:] == ["bye", None]
        late = hub.join()  # joined after the end: the last message, then the end
        assert [late.queue.get_nowait(), late.queue.get_nowait()] == ["bye", None]

    asyncio.run(run())
    with pytest.raises(ValueError, match=">= 2 slots"):
        ViewerHub(1)


def test_agent_link_is_bounded_and_its_end_is_never_dropped():
    async def run():
        link = AgentLink(maxsize=2)
        for i in range(5):
            link.send(i)
        assert link.dropped == 3
        link.close()
        link.send(99)  # ignored after close
        items = [link.queue.get_nowait() for _ in range(link.queue.qsize())]
        assert items == [4, None]

    asyncio.run(run())


def test_session_config_and_errors():
    cfg = SessionConfig("snake-rt-v0", fps=20.0, ks=(2, 1))
    assert cfg.period == pytest.approx(0.05) and not cfg.simulated
    assert cfg.to_dict()["ks"] == [2, 1]
    err = SessionError(grpc.StatusCode.PERMISSION_DENIED, "no")
    assert err.http_status == 403 and err.status().code == 7
    assert MAX_ACTIONS_PER_FRAME >= 2


def test_planner_answers_are_matched_by_request_id_and_late_ones_discarded():
    from types import SimpleNamespace

    from rtplan.v1 import planner_pb2
    from server._agents import PlannerAgent, _Option
    from server.session import SessionStats

    session = SimpleNamespace(stats=SessionStats())
    agent = PlannerAgent(session, stub=None)

    def option(rid, closed=False):
        return _Option(rid, decision_frame=0, k=2, landing=1, sent_at=0.0, closed=closed)

    def answer(rid, action=3):
        return planner_pb2.PlannedAction(action=action, request_id=rid, search_ms=1.0)

    live = option(5)
    agent._planned(live, answer(4), now=0.05)  # another request's answer: never applied
    assert live.planned is None and "answer for request 4, expected 5" in live.error
    live = option(5)
    agent._planned(live, answer(5), now=0.05)
    assert live.planned == Arrival(3, 0.05) and live.error is None
    past = option(6, closed=True)  # its landing frame was already decided
    agent._planned(past, answer(6), now=0.2)
    assert past.planned is None and session.stats.planner_late_answers == 1
