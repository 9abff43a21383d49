"""A frame's move: the action the rules pick from the answer, its clock charge and its report."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from rtplan import games
from rtplan.server._agent_api import Answer
from rtplan.server._config import SessionConfig
from rtplan.server._frame_info import HostInfo
from rtplan.server._records import Report
from rtplan.server._rules import FrameDecision, clock_charge, decide_action


@dataclasses.dataclass(frozen=True)
class Move:
    """What a frame plays, decided at its deadline before the game steps."""

    frame: int
    answer: Answer
    decision: FrameDecision
    by_agent: bool  # the session's agent was to answer (not the clock games' opponent)
    cost: int  # clock ticks charged to the mover (clock games), else 0
    credit: int  # clock ticks the mover's increment gives back (clock games), else 0
    mover: int  # the player id who moved
    left: int  # the mover's clock after the charge (clock games), else 0

    @property
    def action(self) -> int:
        return self.decision.action


class Mover(Protocol):
    """What a move's decision reads of its session (`server.session.Session`)."""

    frame: int
    info: HostInfo  # the frame's legal mask, fallback, reflex and clocks
    config: SessionConfig  # its fallback; simulated: a declared cost is paid
    deadline: float | None  # None: simulated clock
    published_at: float
    increment: int  # clock ticks given back after a move on the clock
    tick_s: float  # seconds per clock tick


def decide_move(answer: Answer, s: Mover, by_agent: bool, on_clock: bool) -> Move:
    """Decides the current frame of session `s` from the mover's answer
    (`server._rules.decide_action`), and what the move charges the mover's clock when it is
    `on_clock` (clock games); `by_agent`: the session's agent answered (not the opponent)."""
    info, config = s.info, s.config
    fallback = info.fallback
    reflex = info.reflex_for(config.served)
    # On a clock in real time (reflex timeout), a move that ran out of time is the reflex's, as
    # the game's empty clock moves by reflex: the served reflex, never a pass with the game open.
    timed_out = on_clock and not config.simulated
    if (config.fallback == "reflex" or answer.safe_fallback or timed_out) and reflex >= 0:
        fallback = reflex
    decision = decide_action(
        answer.arrivals, deadline=s.deadline, legal=info.legal, fallback=fallback
    )
    cost = credit = 0
    mover = info.current_player
    if on_clock:
        cost = clock_charge(
            decision,
            left=info.clocks[mover],
            declared=answer.cost if config.simulated else None,
            published_at=s.published_at,
            tick_s=s.tick_s,
        )
        credit = s.increment
    left = info.clocks[mover] - cost if info.clocks else 0
    return Move(s.frame, answer, decision, by_agent, cost, credit, mover, left)


def move_report(move: Move, after: HostInfo, *, kind: games.Kind) -> Report:
    """The report of a played move; `after`: the frame info of the state it led to (a clock
    game's credit is what the game gave back: none to an empty clock)."""
    clock = kind is games.Kind.CLOCK
    credit = max(0, after.clocks[move.mover] - max(move.left, 0)) if clock else move.credit
    d, a = move.decision, move.answer
    return Report(
        frame=move.frame,
        action=d.action,
        provenance=d.provenance,
        slack_ms=d.slack_ms,
        received_action=d.received_action,
        source=a.source,
        k=a.k,
        cost=move.cost,
        latency_ms=a.latency_ms,
        decision=a.decision,
        credit=credit,
    )
