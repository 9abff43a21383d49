"""The referee's clocks: GTP `time_settings` (Canadian byo-yomi) charged move by move."""

from __future__ import annotations

import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class TimeControl:
    """A match's time settings, as GTP's `time_settings MAIN BYO_TIME BYO_STONES` gives them.

    Main time, then Canadian byo-yomi: periods of `byo_time` seconds for `byo_stones` moves
    each. `byo_stones == 0` is sudden death (`MAIN 0 0`). Whole seconds: GTP's arguments are
    integers (GNU Go refuses others).
    """

    #: Main time in seconds.
    main: int
    #: Seconds of each byo-yomi period (0: sudden death).
    byo_time: int = 0
    #: Moves per byo-yomi period (0: sudden death).
    byo_stones: int = 0

    def __post_init__(self) -> None:
        values = (self.main, self.byo_time, self.byo_stones)
        if any(not isinstance(v, int) or v < 0 for v in values):
            raise ValueError(f"time settings are whole numbers >= 0, got {values}")
        if (self.byo_time > 0) != (self.byo_stones > 0):
            # GTP reads byo-yomi time without stones as no time limit; stones without time
            # would be a period of 0 s.
            raise ValueError(
                f"byo-yomi needs both its time and its stones (> 0), got {values}: "
                "sudden death is MAIN 0 0"
            )
        if self.main == 0 and self.byo_stones == 0:
            raise ValueError("no time at all: MAIN 0 0 needs MAIN > 0")

    @property
    def gtp(self) -> str:
        """The arguments of GTP's `time_settings` ("20 0 0")."""
        return f"{self.main} {self.byo_time} {self.byo_stones}"

    def fresh(self) -> Clock:
        """A side's clock at the start of a game (main time, or the first period if none)."""
        if self.main > 0:
            return Clock(float(self.main), 0)
        return Clock(float(self.byo_time), self.byo_stones)


@dataclasses.dataclass(frozen=True)
class Clock:
    """One side's clock as GTP's `time_left COLOUR SECONDS STONES` states it."""

    #: Seconds left: of the main time (`stones == 0`), else of the current byo-yomi period.
    seconds: float
    #: Moves left to play in the current period; 0 in main time.
    stones: int = 0

    @property
    def gtp(self) -> str:
        """The arguments of GTP's `time_left` after the colour: whole seconds, rounded down (GTP
        takes integers; down, so that no engine is told it has time it has not)."""
        return f"{math.floor(max(self.seconds, 0.0))} {self.stones}"


def charge(control: TimeControl, clock: Clock, seconds: float) -> Clock | None:
    """The clock after a move that took `seconds`; None when its flag fell (a loss on time).

    In main time the move is charged to what is left; past its end (`<= 0`) the overrun goes
    to the first byo-yomi period, of which this move is the first stone (sudden death: the flag
    falls). In a period the move is charged to the period's time, and once its stones are
    played a fresh period starts. Running a period's time out before its stones are played
    is a loss on time.
    """
    left = clock.seconds - seconds
    stones = clock.stones
    if stones == 0:
        if left > 0:
            return Clock(left, 0)
        if control.byo_stones == 0:
            return None
        left, stones = left + control.byo_time, control.byo_stones
    if left < 0:
        return None
    if stones == 1:
        return Clock(float(control.byo_time), control.byo_stones)
    return Clock(left, stones - 1)
