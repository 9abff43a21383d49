"""The recent frames an agent's action may name: which accept it, and what it means for each."""

from __future__ import annotations

import dataclasses

import numpy as np

from rtplan.server._records import Report
from rtplan.server._rules import (
    MAX_FRAMES_AHEAD,
    MAX_FRAMES_LATE,
    Arrival,
    Provenance,
    check_action,
)
from rtplan.server._runtime import AGENT_PLAYER


@dataclasses.dataclass(frozen=True)
class Admission:
    """What to do with an incoming `Action{frame, action}`."""

    error: str | None  # what to tell the agent, None when nothing is wrong
    keep: bool = False  # store it for its frame, whose decision judges it (maybe as INVALID)
    late: Report | None = None  # it came late for a frame decided FALLBACK: now LATE


class FrameWindow:
    """The deadlines of recent frames, the clock opponent's recent frames, and the FALLBACK
    reports of the agent's recent frames until their action comes late (the report turns LATE
    and waits for the next frame) or `MAX_FRAMES_LATE` frames pass."""

    def __init__(self) -> None:
        self._deadlines: dict[int, float | None] = {}
        self._opponents: set[int] = set()
        self._unanswered: dict[int, tuple[Report, float]] = {}  # frame -> (report, deadline)
        self._late: list[Report] = []

    def published(self, frame: int, deadline: float | None, *, opponents: bool) -> None:
        """Frame `frame` is out (`opponents`: the clock opponent moves in it)."""
        self._deadlines[frame] = deadline
        self._deadlines.pop(frame - 2 * MAX_FRAMES_AHEAD, None)
        self._opponents.discard(frame - 2 * MAX_FRAMES_AHEAD)
        if opponents:
            self._opponents.add(frame)

    def decided(self, report: Report, *, agents: bool) -> None:
        """Frame `report.frame` was decided (`agents`: the agent was to answer it)."""
        deadline = self._deadlines.get(report.frame)
        if agents and deadline is not None and report.provenance is Provenance.FALLBACK:
            self._unanswered[report.frame] = (report, deadline)
        self._unanswered.pop(report.frame - MAX_FRAMES_LATE, None)

    def admit(
        self, frame: int, arrival: Arrival, *, current: int, num_actions: int, legal: np.ndarray
    ) -> Admission:
        """Judges an action for `frame` that came while `current` is the undecided frame.

        The first action for a past frame decided FALLBACK makes its report LATE; other past
        frames are refused, as are the opponent's frames and frames too far ahead. An action out
        of range, or illegal at the current frame, is kept with an error: its frame will report
        INVALID and play the fallback.
        """
        if frame in self._opponents:
            return Admission(
                f"frame {frame} is the opponent's move (your agent is player {AGENT_PLAYER})"
            )
        if frame < current and frame in self._unanswered:
            report, deadline = self._unanswered.pop(frame)
            late = dataclasses.replace(
                report,
                provenance=Provenance.LATE,
                slack_ms=(deadline - arrival.at) * 1e3,
                received_action=arrival.action,
            )
            self._late.append(late)
            return Admission(None, late=late)
        check = check_action(
            frame, arrival.action, current=current, num_actions=num_actions, legal=legal
        )
        if not check.keep:
            deadline = self._deadlines.get(frame) if frame < current else None
            if deadline is None:
                return Admission(check.error)
            after = (arrival.at - deadline) * 1e3
            return Admission(f"{check.error}; it arrived {after:.1f} ms after its deadline")
        if check.error is not None:
            return Admission(f"{check.error}; the frame will play the fallback", keep=True)
        return Admission(None, keep=True)

    def take_late(self) -> list[Report]:
        """The LATE reports not yet sent (the next frame carries them)."""
        late, self._late = self._late, []
        return late
