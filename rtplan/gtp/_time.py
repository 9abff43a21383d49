"""The GTP clocks (Canadian byo-yomi) and the proportional time manager that spends them."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable

from games.go import SIZE

#: pgx ends a 9x9 game after 2 * 81 plies (see `games.go.SpeedGo`).
MAX_PLIES = 2 * SIZE * SIZE
#: The proportional time manager spends this fraction of its per-move share of the clock ...
SAFETY = 0.8
#: ... less this lag per move (the GTP round trip over pipes and the engine's own Python around
#: the search: a few ms here), in seconds. It was 50 ms, which zeroed every allowance under
#: 5 s of sudden death (3 s / 81 moves * 0.8 = 30 ms) although a 96-simulation search takes
#: 15-20 ms: every move was policy-only.
LAG_S = 0.01
#: It expects at least this many more moves of its own, however late the game.
MIN_MOVES_LEFT = 5


@dataclasses.dataclass
class Clock:
    """One colour's GTP clock (Canadian byo-yomi, as `time_settings` and `time_left` give it).

    `stones == 0`: main time, `remaining` seconds of it; `stones > 0`: in byo-yomi, `remaining`
    seconds for `stones` more moves. `remaining` None means no time limit.
    """

    remaining: float | None = None
    stones: int = 0


@dataclasses.dataclass(frozen=True)
class TimeSettings:
    """GTP time settings in seconds; `main` None means no time limit."""

    #: Main time in seconds (None: no time limit).
    main: float | None = None
    #: Byo-yomi period in seconds (0: absolute time).
    byo_time: float = 0.0
    #: Moves per byo-yomi period.
    byo_stones: int = 0

    def fresh(self) -> Clock:
        """A clock at the start of a game."""
        if self.main is None:
            return Clock()
        if self.main <= 0 and self.byo_stones > 0:
            return Clock(self.byo_time, self.byo_stones)
        return Clock(self.main, 0)

    def spend(self, clock: Clock, seconds: float) -> Clock:
        """The clock after a move that took `seconds` (when the controller sends no time_left)."""
        if clock.remaining is None:
            return clock
        left = clock.remaining - seconds
        if clock.stones == 0:
            if left > 0 or self.byo_stones == 0:
                return Clock(max(left, 0.0), 0)
            return Clock(max(self.byo_time + left, 0.0), self.byo_stones)  # into byo-yomi
        if clock.stones > 1:
            return Clock(max(left, 0.0), clock.stones - 1)
        return Clock(self.byo_time, self.byo_stones)  # a new period


def move_allowance(settings: TimeSettings, clock: Clock, ply: int) -> float:
    """Seconds the proportional time manager gives the next move (inf with no time limit).

    In main time: the remaining time over the moves expected to be left (our share of the plies
    pgx allows), but at least a byo-yomi period's share per stone when there is byo-yomi. In
    byo-yomi: the period's remaining time over its remaining stones. Then `SAFETY` of that, less
    `LAG_S`.
    """
    if clock.remaining is None:
        return math.inf
    if clock.stones > 0:
        share = clock.remaining / clock.stones
    else:
        moves_left = max(MIN_MOVES_LEFT, (MAX_PLIES - ply + 1) // 2)
        share = clock.remaining / moves_left
        if settings.byo_stones > 0:
            share = max(share, settings.byo_time / settings.byo_stones)
    return max(SAFETY * share - LAG_S, 0.0)


def choose_budget(
    budgets: Iterable[int], search_s: Callable[[int], float], allowance_s: float
) -> int:
    """The largest budget k whose search time fits the move's allowance; 0 (the policy-only
    reflex move) if none does.

    Args:
        budgets: the planner's budgets k.
        search_s: k -> the option's measured (or estimated) search time in seconds.
        allowance_s: seconds for this move (`move_allowance`).
    """
    fits = [k for k in budgets if search_s(k) <= allowance_s]
    return max(fits) if fits else 0
