"""Pure per-frame rules: which action a frame applies, and how thinking time is charged."""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from rtplan import games
from rtplan.v1 import env_pb2

if TYPE_CHECKING:
    from rtplan.server._config import SessionConfig

#: An agent may answer frames up to this many frames ahead of the current one (an asynchronous
#: planner sends the action for its landing frame early); further ahead is refused.
MAX_FRAMES_AHEAD = 64
#: An action for a frame that was decided FALLBACK (nothing had come), arriving at most this many
#: frames later, makes that frame's report LATE; later ones are refused as past.
MAX_FRAMES_LATE = 64
#: At most this many actions are kept per frame (agents may refine an answer; this caps memory).
MAX_ACTIONS_PER_FRAME = 8


class Provenance(enum.IntEnum):
    """Where a frame's action came from (values of the protocol's `Provenance`)."""

    ON_TIME = env_pb2.PROVENANCE_ON_TIME
    LATE = env_pb2.PROVENANCE_LATE
    FALLBACK = env_pb2.PROVENANCE_FALLBACK
    INVALID = env_pb2.PROVENANCE_INVALID

    @property
    def label(self) -> str:
        """Lower-case name used in JSON (``"on_time"``, ``"late"``, ...)."""
        return self.name.lower()


@dataclasses.dataclass(frozen=True)
class Arrival:
    """One action an agent submitted for a frame."""

    action: int
    at: float  # server monotonic time (s) when it was received


@dataclasses.dataclass(frozen=True)
class FrameDecision:
    """The action a frame applies and why."""

    action: int
    provenance: Provenance
    slack_ms: float  # deadline - arrival of the judged answer (negative: late); 0 without one
    received_action: int  # the judged answer's action, -1 when nothing arrived
    arrived_at: float | None  # monotonic arrival time of the judged answer


def is_valid_action(action: int, legal: np.ndarray) -> bool:
    """True when `action` is in range and legal under the `[A]` bool mask `legal`."""
    return 0 <= action < len(legal) and bool(legal[action])


def decide_action(
    arrivals: Sequence[Arrival],
    *,
    deadline: float | None,
    legal: np.ndarray,
    fallback: int,
) -> FrameDecision:
    """Chooses a frame's action from the answers that arrived for it (the real-time protocol).

    The latest answer that arrived by the deadline is the agent's answer (an agent may refine
    its choice until then). It applies if it is in range and legal, else the fallback plays
    (INVALID). With no answer by the deadline the fallback plays: LATE when an answer came
    after the deadline (before the frame was decided), FALLBACK when none came (an answer that
    comes later still makes it LATE: see `MAX_FRAMES_LATE`).

    Args:
        arrivals: the answers for this frame, in arrival order.
        deadline: monotonic deadline of the frame; None in simulated-clock mode (no deadline:
            every answer is on time).
        legal: `[A]` bool legal-action mask of the frame's state.
        fallback: the action played when the agent's answer is missing, late or invalid.

    Returns:
        The frame's action, its provenance, and the slack of the judged answer.
    """
    on_time = [a for a in arrivals if deadline is None or a.at <= deadline]
    if on_time:
        chosen = on_time[-1]
        slack = 0.0 if deadline is None else (deadline - chosen.at) * 1e3
        if is_valid_action(chosen.action, legal):
            return FrameDecision(chosen.action, Provenance.ON_TIME, slack, chosen.action, chosen.at)
        return FrameDecision(fallback, Provenance.INVALID, slack, chosen.action, chosen.at)
    if arrivals:
        first = arrivals[0]
        slack = (deadline - first.at) * 1e3
        return FrameDecision(fallback, Provenance.LATE, slack, first.action, first.at)
    return FrameDecision(fallback, Provenance.FALLBACK, 0.0, -1, None)


@dataclasses.dataclass(frozen=True)
class ActionCheck:
    """What to do with an incoming `Action{frame, action}`."""

    error: str | None  # what is wrong with it, None when nothing is
    keep: bool  # True: store it for its frame, whose decision judges it (maybe as INVALID)


def check_action(
    frame: int, action: int, *, current: int, num_actions: int, legal: np.ndarray | None
) -> ActionCheck:
    """Checks an action message against the session's current frame.

    Args:
        frame: the frame the action is tagged with.
        action: the action index.
        current: the session's current (undecided) frame.
        num_actions: A.
        legal: the current frame's `[A]` legal mask (checked only when `frame == current`).

    Returns:
        Refused (not kept) for a past frame or a frame too far ahead. Kept with an error for
        an action out of range, or illegal at the current frame: its frame will report INVALID
        and play the fallback. Kept without error otherwise.
    """
    if frame < current:
        return ActionCheck(f"frame {frame} already past (the current frame is {current})", False)
    if frame > current + MAX_FRAMES_AHEAD:
        return ActionCheck(
            f"frame {frame} is too far ahead: actions may be sent for frames {current} to "
            f"{current + MAX_FRAMES_AHEAD}",
            False,
        )
    if not 0 <= action < num_actions:
        message = f"action {action} out of range [0, {num_actions}) for frame {frame}"
        return ActionCheck(message, True)
    if frame == current and legal is not None and not legal[action]:
        return ActionCheck(f"action {action} is illegal at frame {frame}", True)
    return ActionCheck(None, True)


def wall_ticks(elapsed_s: float, tick_s: float) -> int:
    """Clock ticks charged for `elapsed_s` seconds of thinking: every started tick counts.

    The real-time rule of the clock games: a move's cost is ceil(elapsed / tick), so any
    positive thinking time costs at least one tick.
    """
    if elapsed_s <= 0:
        return 0
    return math.ceil(elapsed_s / tick_s - 1e-9)


def clock_ticks(seconds: float, tick_s: float) -> int:
    """Clock ticks of `seconds` at `tick_s` seconds a tick (a time control in seconds, e.g.
    "1+1", as the game's integer clock), to the nearest tick."""
    return max(0, round(seconds / tick_s))


def initial_ticks(
    config: SessionConfig, kind: games.Kind, clock_ticks_per_frame: int
) -> int | None:
    """A real-time clock game's time control in ticks of its session (`time_s` seconds at
    `config.period / clock_ticks_per_frame` s a tick); None: the game's own initial time."""
    if not (kind is games.Kind.CLOCK and not config.simulated and config.time_s):
        return None
    return clock_ticks(config.time_s, config.period / clock_ticks_per_frame)


def countdown_start(ready_at: float, countdown_s: float) -> float:
    """When frame 0's clock starts: `countdown_s` seconds after the player is ready (its
    monotonic `ready_at`); the frame loop does not tick before then."""
    return ready_at + max(0.0, countdown_s)


def buffered_turn(
    arrivals: Sequence[Arrival],
    pending: int | None,
    *,
    deadline: float | None,
    legal: np.ndarray,
    published_at: float,
) -> tuple[tuple[Arrival, ...], int | None]:
    """A person's buffered turn (Pac-Man): a pressed direction that is illegal when its frame
    is decided waits, and applies at the first frame where it is legal.

    The latest answer by the deadline decides: legal, it plays and clears the buffer; in range
    but illegal, it becomes the pending turn and the frame gets no answer (the fallback plays,
    as FALLBACK). With no answer by the deadline, a pending turn that is legal now answers the
    frame on time (as arrived at the frame's publication) and clears the buffer.

    Args:
        arrivals: the person's answers for this frame, in arrival order.
        pending: the buffered action, or None.
        deadline: the frame's monotonic deadline (None: simulated clock).
        legal: `[A]` bool legal mask of the frame's state.
        published_at: monotonic time the frame was published.

    Returns:
        (the arrivals the frame rule judges, the pending action after this frame).
    """
    on_time = [a for a in arrivals if deadline is None or a.at <= deadline]
    if on_time:
        latest = on_time[-1]
        if is_valid_action(latest.action, legal):
            return tuple(arrivals), None
        if 0 <= latest.action < len(legal):
            late = tuple(a for a in arrivals if a not in on_time)
            return late, latest.action
        return tuple(arrivals), pending
    if pending is not None and is_valid_action(pending, legal):
        return (Arrival(pending, published_at), *arrivals), None
    return tuple(arrivals), pending


def clock_charge(
    decision: FrameDecision, *, left: int, declared: int | None, published_at: float, tick_s: float
) -> int:
    """Clock ticks a move charges its mover's clock (clock games: the agent's moves and the
    planner opponent's; the reflex and random opponents move for free).

    A declared cost (simulated clock: the planner agent's sims(k) ticks) is paid as it is; else
    the thinking time from the frame's publication to the judged answer, in started ticks. A
    move that missed the clock (no answer, or a late one) pays all that was left (in strict
    mode the flag falls). An empty clock is charged nothing.
    """
    if left <= 0:
        return 0
    if declared is not None:
        return int(declared)
    if decision.arrived_at is None or decision.provenance is Provenance.LATE:
        return left
    return min(left, wall_ticks(decision.arrived_at - published_at, tick_s))


def budget_at(ks: Sequence[int], decision: int) -> int:
    """The budget k of the `decision`-th decision (0-based) of a fixed k-sequence, cycled."""
    return int(ks[decision % len(ks)])
