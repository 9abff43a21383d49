"""Pure frame rules, the drift-free ticker, the bounded queues, the frame window and the stats,
without any server."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest

from rtplan.games import Kind
from rtplan.planner import landing_frame
from rtplan.server._agents import GrpcAgent, PlannerAgent, _Option
from rtplan.server._config import SessionConfig, SessionError
from rtplan.server._frames import FrameWindow
from rtplan.server._queue import AgentLink, DropOldestQueue
from rtplan.server._records import Report
from rtplan.server._rules import (
    MAX_ACTIONS_PER_FRAME,
    MAX_FRAMES_AHEAD,
    MAX_FRAMES_LATE,
    Arrival,
    FrameDecision,
    Provenance,
    budget_at,
    buffered_turn,
    check_action,
    clock_charge,
    clock_ticks,
    countdown_start,
    decide_action,
    wall_ticks,
)
from rtplan.server._stats import SessionStats
from rtplan.server._ticker import Ticker
from rtplan.server._viewers import Viewer, ViewerHub
from rtplan.v1 import planner_pb2

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
    # The planner agent lands its options by the planner's own rule.
    assert landing_frame(5, 3, kind=Kind.COMMITTED) == 7
    assert landing_frame(5, 1, kind=Kind.COMMITTED) == 5
    assert landing_frame(5, 32, kind=Kind.CLOCK) == 5


def test_clock_charge_is_the_thinking_time_or_all_that_is_left():
    def on_time(at):
        return FrameDecision(1, Provenance.ON_TIME, 5.0, 1, at)

    kw = dict(published_at=10.0, tick_s=0.01)
    assert clock_charge(on_time(10.021), left=12, declared=None, **kw) == 3  # started ticks
    assert clock_charge(on_time(10.5), left=12, declared=None, **kw) == 12  # capped by the clock
    assert clock_charge(on_time(10.021), left=12, declared=2, **kw) == 2  # sims(k), as declared
    late = FrameDecision(3, Provenance.LATE, -5.0, 1, 10.001)
    silent = FrameDecision(3, Provenance.FALLBACK, 0.0, -1, None)
    assert clock_charge(late, left=7, declared=None, **kw) == 7
    assert clock_charge(silent, left=7, declared=None, **kw) == 7
    assert clock_charge(silent, left=0, declared=None, **kw) == 0  # an empty clock


def test_a_time_control_in_seconds_is_the_games_ticks():
    tick_s = (1 / 9) / 32  # 9 FPS, 32 clock ticks a frame (the server's defaults)
    assert clock_ticks(60, tick_s) == 17280  # "1+1": a minute a side ...
    assert clock_ticks(1, tick_s) == 288  # ... and a second back per move
    assert clock_ticks(180, tick_s) * tick_s == pytest.approx(180)
    assert clock_ticks(0, tick_s) == 0


def test_a_buffered_turn_waits_for_the_first_frame_where_it_is_legal():
    wall = np.array([True, False, True, False, False])  # up, down legal; right, left walls
    open_ = np.array([True, True, True, True, False])
    kw = dict(deadline=10.0, published_at=9.9)
    # "left" pressed into a wall: it waits, and the frame gets no answer (the fallback plays).
    arrivals, pending = buffered_turn([Arrival(3, 9.95)], None, legal=wall, **kw)
    assert (arrivals, pending) == ((), 3)
    assert decide_action(arrivals, deadline=10.0, legal=wall, fallback=0).provenance is (
        Provenance.FALLBACK
    )
    # Still a wall next frame: it keeps waiting.
    assert buffered_turn([], 3, legal=wall, **kw) == ((), 3)
    # The first frame where it is legal: it answers on time, as of the frame's publication.
    arrivals, pending = buffered_turn([], 3, legal=open_, **kw)
    assert pending is None and arrivals == (Arrival(3, 9.9),)
    d = decide_action(arrivals, deadline=10.0, legal=open_, fallback=0)
    assert (d.action, d.provenance) == (3, Provenance.ON_TIME)
    # A legal key replaces the wait; a newer illegal one replaces the pending turn.
    assert buffered_turn([Arrival(2, 9.95)], 3, legal=wall, **kw) == ((Arrival(2, 9.95),), None)
    assert buffered_turn([Arrival(1, 9.95)], 3, legal=wall, **kw) == ((), 1)
    # A key after the deadline is judged late as before; out of range stays invalid.
    late = Arrival(3, 10.5)
    assert buffered_turn([late], None, legal=wall, **kw) == ((late,), None)
    assert buffered_turn([Arrival(7, 9.95)], None, legal=wall, **kw) == ((Arrival(7, 9.95),), None)


class FakeTime:
    """A monotonic clock that moves only when slept on (each sleep oversleeps `jitter` s, as a
    loaded machine does), or when a test stalls it."""

    def __init__(self, jitter: float = 0.0) -> None:
        self.now = 100.0
        self.jitter = jitter
        self.slept = 0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept += 1
        self.now += seconds + self.jitter


def test_ticker_is_drift_free_and_counts_late_ticks():
    period, jitter = 0.01, 0.001
    fake = FakeTime(jitter)
    ticker = Ticker(period, late_after=0.004, clock=fake.clock, sleep=fake.sleep)

    async def run():
        ticks = []
        for n in range(1, 31):
            if n == 10:
                fake.now += 0.035  # a stall: ticks 10..12 fire late, the schedule stays
            ticks.append(await ticker.wait(n))
        return ticks

    ticks = asyncio.run(run())
    # Every tick is anchored at start + n * period, never at the previous tick.
    for tick in ticks:
        assert tick.scheduled == pytest.approx(ticker.start + tick.index * period, abs=1e-12)
        assert tick.fired >= tick.scheduled
    # No drift: 30 ticks each a little late end one jitter after the schedule, not 30 later.
    assert ticks[-1].fired - ticker.start == pytest.approx(30 * period + jitter, abs=1e-9)
    late = [t.index for t in ticks if t.lag > ticker.late_after]
    # Tick 9 fired 1 ms late, then 35 ms passed: ticks 10, 11, 12 are 26, 16, 6 ms late and fire
    # at once; tick 13 sleeps again and is back to the 1 ms jitter.
    assert late == [10, 11, 12] and [t.lag > jitter + 1e-9 for t in ticks].count(True) == 3
    assert ticker.late_ticks == 3 and ticker.max_lag == pytest.approx(0.026, abs=1e-9)
    assert ticker.ticks == 30 and fake.slept == 30 - 3  # the stalled ticks needed no sleep


def test_no_tick_fires_before_the_countdown_ends():
    """A person's session: frame 0 is shown when the page is ready, and its deadline (tick 1)
    is a period after the countdown, so the game does not move during it."""
    fake = FakeTime()
    ready = fake.now
    start = countdown_start(ready, 3.0)
    ticker = Ticker(0.1, start=start, clock=fake.clock, sleep=fake.sleep)
    tick = asyncio.run(ticker.wait(1))  # frame 0's deadline: the first frame that moves
    assert tick.scheduled == pytest.approx(ready + 3.1) and fake.now >= ready + 3.1
    assert countdown_start(ready, 0.0) == ready  # agents and planners: at once


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
            fast.get_nowait()
        assert [slow.get_nowait() for _ in range(3)] == ["7", "8", "9"]
        assert slow.dropped == 7 and fast.dropped == 0 and hub.dropped == 7
        gone = hub.join()
        for i in range(5):
            hub.broadcast(str(i))
        hub.leave(gone)  # what a viewer lost stays counted after it left
        assert hub.dropped == 7 + 3 * 2  # slow, fast and gone each lost 2 of the 5
        hub.close("bye")
        items = [slow.get_nowait() for _ in range(slow.qsize())]
        assert items[-2:] == ["bye", None]
        late = hub.join()  # joined after the end: the last message, then the end
        assert [late.get_nowait(), late.get_nowait()] == ["bye", None]

    asyncio.run(run())
    with pytest.raises(ValueError, match=">= 2 slots"):
        ViewerHub(1)


def test_one_drop_oldest_queue_is_bounded_and_its_end_is_never_dropped():
    assert issubclass(AgentLink, DropOldestQueue) and Viewer(2).__class__ is DropOldestQueue

    async def run():
        link = AgentLink(maxsize=2)
        assert [link.put(i) for i in range(5)] == [False, False, True, True, True]
        assert link.dropped == 3
        link.close()
        assert link.dropped == 4  # the end marker took the oldest slot
        assert not link.put(99)  # ignored after close
        items = [link.get_nowait() for _ in range(link.qsize())]
        assert items == [4, None]

    asyncio.run(run())


def test_session_config_and_errors():
    cfg = SessionConfig("snake-rt-v0", fps=20.0, ks=(2, 1))
    assert cfg.period == pytest.approx(0.05) and not cfg.simulated
    assert cfg.to_dict()["ks"] == [2, 1]
    err = SessionError(grpc.StatusCode.PERMISSION_DENIED, "no")
    assert err.http_status == 403 and err.status().code == 7


def test_an_agent_may_refine_its_answer_up_to_the_cap_per_frame():
    """A second action for a frame replaces the first when both are on time (an agent refines
    its answer); past `MAX_ACTIONS_PER_FRAME` a frame takes no more (memory stays bounded)."""
    agent = GrpcAgent()
    assert agent.receive(5, Arrival(0, 1.0)) and agent.receive(5, Arrival(1, 2.0))
    for i in range(MAX_ACTIONS_PER_FRAME - 2):
        assert agent.receive(5, Arrival(1, 3.0 + i))
    assert not agent.receive(5, Arrival(3, 9.0))  # one too many: refused, not applied
    assert agent.receive(6, Arrival(3, 9.0))  # the cap is per frame
    d = decide(agent.answer(5, host=None).arrivals)
    assert (d.action, d.provenance, d.received_action) == (1, Provenance.ON_TIME, 1)


def test_four_agent_behaviours_get_exact_reports_under_a_fake_clock():
    """The real-time frame rules on a fake clock (period 0.25 s): frames answered on time, half
    a period after the deadline, with an out-of-range action, or not at all, cycle; each frame's
    final report and the counters say exactly which (a late action turns its frame's FALLBACK
    report LATE). Session.submit's path: the frame window admits, the agent's mailbox keeps."""
    period, behaviour = 0.25, ("on_time", "late", "invalid", "silent")
    window, agent, stats = FrameWindow(), GrpcAgent(), SessionStats()
    reports, errors, pending = {}, [], []  # pending: (arrival time, frame, action)

    def submit(frame: int, action: int, at: float, current: int) -> None:
        arrival = Arrival(action, at)
        got = window.admit(frame, arrival, current=current, num_actions=4, legal=LEGAL)
        if got.late is not None:
            stats.came_late(got.late.slack_ms)
            reports[got.late.frame] = got.late
        elif got.keep:
            assert agent.receive(frame, arrival)
        if got.error is not None:
            errors.append(got.error)

    for n in range(18):
        published, deadline = n * period, (n + 1) * period
        window.published(n, deadline, opponents=False)
        agent.begin(n, host=None)
        for item in [x for x in pending if x[0] < deadline]:
            pending.remove(item)
            submit(item[1], item[2], item[0], current=n)
        kind = behaviour[n % 4] if n < 16 else "silent"
        if kind == "on_time":
            submit(n, 0, published + 0.01, current=n)
        elif kind == "late":
            pending.append((deadline + 0.5 * period, n, 1))
        elif kind == "invalid":
            submit(n, 9, published + 0.01, current=n)
        d = decide_action(
            agent.answer(n, host=None).arrivals, deadline=deadline, legal=LEGAL, fallback=FALLBACK
        )
        stats.frame(d.provenance, None if d.arrived_at is None else d.slack_ms)
        reports[n] = Report(
            n, d.action, d.provenance, d.slack_ms, d.received_action, "agent", None, 0, None
        )
        window.decided(reports[n], agents=True)

    for n in range(16):
        r, kind = reports[n], behaviour[n % 4]
        if kind == "on_time":
            assert (r.provenance, r.action, r.slack_ms) == (
                Provenance.ON_TIME,
                0,
                pytest.approx(240),
            )
        elif kind == "late":
            assert (r.provenance, r.received_action) == (Provenance.LATE, 1)
            assert r.action == FALLBACK and r.slack_ms == pytest.approx(-125)
        elif kind == "invalid":
            assert (r.provenance, r.received_action, r.action) == (Provenance.INVALID, 9, FALLBACK)
        else:
            assert (r.provenance, r.received_action, r.slack_ms) == (Provenance.FALLBACK, -1, 0)
    assert errors == [
        f"action 9 out of range [0, 4) for frame {n}; the frame will play the fallback"
        for n in (2, 6, 10, 14)
    ]
    d = stats.to_dict(viewer_drops=0, link_drops=0)
    assert (d["frames"], d["on_time"], d["late"], d["invalid"], d["fallback"]) == (18, 4, 4, 4, 6)


class FakeHost:
    """An `AgentHost` that records the planner events an agent reports."""

    def __init__(self) -> None:
        self.events = []

    def plan_replied(self, latency_ms, search_ms, *, discarded):
        self.events.append(("replied", round(latency_ms), search_ms, discarded))

    def plan_failed(self, message):
        self.events.append(("failed", message))


def test_planner_answers_are_matched_by_request_id_and_late_ones_discarded():
    host = FakeHost()
    agent = PlannerAgent(stub=None, plan_timeout_s=1.0)

    def option(rid, closed=False):
        return _Option(rid, decision_frame=0, k=2, landing=1, sent_at=0.0, closed=closed)

    def answer(rid, action=3):
        return planner_pb2.PlannedAction(action=action, request_id=rid, search_ms=1.0)

    live = option(5)
    agent._planned(live, answer(4), 0.05, host)  # another request's answer: never applied
    assert live.planned is None and "answer for request 4, expected 5" in live.error
    assert host.events == []
    live = option(5)
    agent._planned(live, answer(5), 0.05, host)
    assert live.planned == Arrival(3, 0.05) and live.error is None
    past = option(6, closed=True)  # its landing frame was already decided
    agent._planned(past, answer(6), 0.2, host)
    assert past.planned is None
    assert host.events == [("replied", 50, 1.0, False), ("replied", 200, 1.0, True)]


class GatedHost(FakeHost):
    """A committed game's host for a gated planner agent: reflex 0 on every frame."""

    kind = Kind.COMMITTED

    def __init__(self) -> None:
        super().__init__()
        info = {"reflex": 0, "reflex_for": lambda self, served: 0}  # `HostInfo.reflex_for`
        self.info, self.published_at = type("Info", (), info)(), 0.0
        self.config = type("Config", (), {"served": False})()

    def plan_sent(self, k):
        self.events.append(("sent", k))

    def plan_cancelled(self):
        self.events.append(("cancelled",))


def test_a_late_gated_decision_keeps_its_option_on_the_reflex_until_it_can_no_longer_land():
    """Budgets up to 3 (`max_k`): a decision not there by its frame plays the reflex there and
    waits, up to the frame where k=3 would land; a late decision whose landing frame is still
    ahead plays its planned action there, one whose landing frame passed ends the option at
    the next frame, missed; a decision that never comes ends it at k=3's landing frame."""
    host = GatedHost()
    agent = PlannerAgent(stub=None, plan_timeout_s=1.0, max_k=3)

    def pending():
        agent._option = _Option(1, decision_frame=10, k=None, landing=None, sent_at=0.0, gated=True)
        return agent._option

    def decide(opt, k):
        d = planner_pb2.Decision(k=k, landing_frame=10 + k - 1, gate_probabilities=(0.5, 0.5))
        assert agent._decided(opt, d, host) is None

    opt = pending()  # the decision comes during frame 10, k=2: lands on 11 as planned
    assert agent.answer(10, host).source == "reflex" and not opt.closed
    decide(opt, 2)
    agent._planned(opt, planner_pb2.PlannedAction(action=3, request_id=1), 0.01, host)
    landed = agent.answer(11, host)
    assert landed.landing and landed.arrivals == (Arrival(3, 0.01),) and opt.closed
    opt = pending()  # k=1 decided after its landing frame (10) passed: frame 11 misses
    assert agent.answer(10, host).source == "reflex"
    decide(opt, 1)
    agent._planned(opt, planner_pb2.PlannedAction(action=3, request_id=1), 0.01, host)
    missed = agent.answer(11, host)
    assert missed.landing and missed.arrivals == () and opt.closed
    opt = pending()  # never decided: reflex on 10 and 11, missed on 12 (k=3's landing)
    assert [agent.answer(n, host).landing for n in (10, 11, 12)] == [False, False, True]
    assert opt.closed and opt.k is None
    # Without `max_k` (as before) an undecided option ends on its decision frame.
    agent = PlannerAgent(stub=None, plan_timeout_s=1.0)
    opt = pending()
    assert agent.answer(10, host).landing and opt.closed


def report(frame, provenance=Provenance.FALLBACK):
    received = -1 if provenance is Provenance.FALLBACK else 1
    return Report(frame, 3, provenance, 0.0, received, "agent", None, 0, None)


def test_an_action_for_a_fallback_frame_that_comes_late_makes_it_late_once():
    window = FrameWindow()
    kw = dict(num_actions=4, legal=LEGAL)
    for n in range(3):
        window.published(n, deadline=10.0 + n, opponents=False)
    window.decided(report(0), agents=True)  # nothing came for frame 0
    window.decided(report(1, Provenance.ON_TIME), agents=True)
    # An action for frame 0 comes 30 ms after its deadline: frame 0 is LATE, no error.
    got = window.admit(0, Arrival(1, 10.03), current=2, **kw)
    assert got.error is None and not got.keep
    assert (got.late.frame, got.late.provenance, got.late.received_action) == (
        0,
        Provenance.LATE,
        1,
    )
    assert got.late.action == 3 and got.late.slack_ms == pytest.approx(-30.0)
    assert window.take_late() == [got.late] and window.take_late() == []
    # A second late action for frame 0, and one for the on-time frame 1, are refused.
    again = window.admit(0, Arrival(2, 10.05), current=2, **kw)
    assert again.late is None and "frame 0 already past" in again.error
    assert "it arrived 50.0 ms after its deadline" in again.error
    assert "frame 1 already past" in window.admit(1, Arrival(2, 11.5), current=2, **kw).error
    # Nothing to report late in simulated mode (no deadline), nor for the opponent's frames.
    window.published(2, deadline=None, opponents=False)
    window.decided(report(2), agents=True)
    window.published(3, deadline=13.0, opponents=True)
    window.decided(report(3), agents=False)
    assert window.admit(2, Arrival(1, 20.0), current=4, **kw).late is None
    assert "opponent's move" in window.admit(3, Arrival(1, 20.0), current=4, **kw).error


def test_a_fallback_frame_takes_a_late_action_for_max_frames_late_frames():
    window = FrameWindow()
    for n in range(MAX_FRAMES_LATE + 2):
        window.published(n, deadline=float(n), opponents=False)
        window.decided(report(n), agents=True)
    current = MAX_FRAMES_LATE + 2
    kw = dict(current=current, num_actions=4, legal=LEGAL)
    assert window.admit(1, Arrival(0, 99.0), **kw).late is None  # too long ago
    assert window.admit(2, Arrival(0, 99.0), **kw).late.provenance is Provenance.LATE


def test_the_frame_share_histogram_counts_every_judged_answer_once():
    stats = SessionStats(period_ms=100.0)
    stats.frame(Provenance.ON_TIME, slack_ms=85.0)  # used 15% of the frame
    stats.frame(Provenance.ON_TIME, slack_ms=1.0)  # 99%
    stats.frame(Provenance.FALLBACK, slack_ms=None)
    stats.came_late(-30.0)  # the fallback frame's action came 30 ms after the deadline
    share = stats.to_dict(viewer_drops=0, link_drops=0)["frame_share"]
    assert share["counts"][3] == 1 and share["counts"][19] == 1 and share["counts"][20] == 1
    assert sum(share["counts"]) == 3 and share["mean"] == pytest.approx(
        (0.15 + 0.99 + 1.3) / 3, abs=1e-4
    )


def test_stats_keep_one_count_per_frame_and_per_drop():
    stats = SessionStats()
    for p in (Provenance.ON_TIME, Provenance.FALLBACK, Provenance.FALLBACK, Provenance.INVALID):
        stats.frame(p, slack_ms=None if p is Provenance.FALLBACK else 1.0)
    stats.came_late(-5.0)
    d = stats.to_dict(viewer_drops=4, link_drops=2)
    assert (d["frames"], d["on_time"], d["late"], d["fallback"], d["invalid"]) == (4, 1, 1, 1, 1)
    assert d["slack_ms"]["max"] == 1.0 and d["slack_ms"]["p5"] < 0
    assert d["viewer_drops"] == 4 and d["agent_drops"] == 2
    assert d["frame_share"] is None  # no fixed frame period given: nothing to share out
    stats.link_ended(3)  # the streams that ended count theirs once
    assert stats.to_dict(viewer_drops=0, link_drops=0)["agent_drops"] == 3
    assert stats.brief(viewer_drops=4)["viewer_drops"] == 4
