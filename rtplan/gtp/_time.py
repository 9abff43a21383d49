"""The GTP clocks (Canadian byo-yomi), the proportional time manager that spends them, and the
clock gate's view of them in ticks."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable

from rtplan.games.clock import UNLIMITED_CLOCK
from rtplan.games.go import MAX_PLIES

# The proportional rule is the clock baselines' (one definition): SAFETY of the share per move,
# at least MIN_MOVES_LEFT own moves expected.
from rtplan.gate.clock.heuristics import (
    MIN_MOVES_LEFT,
    SAFETY,
    own_moves_left,
    proportional_allowance,
)

__all__ = [
    "LAG_S",
    "MAX_PLIES",
    "MIN_MOVES_LEFT",
    "SAFETY",
    "TIMES_KEPT",
    "Clock",
    "SearchTimes",
    "TimeSettings",
    "capped_budget",
    "choose_budget",
    "gate_initial_seconds",
    "gate_seconds",
    "ladder",
    "move_allowance",
    "rung_estimate",
    "to_ticks",
    "told_clock",
]

#: The proportional time manager spends its allowance less this lag per move (the GTP round trip
#: over pipes and the engine's own Python around the search: a few ms here), in seconds. It was
#: 50 ms, which zeroed every allowance under 5 s of sudden death (3 s / 81 moves * 0.8 = 30 ms)
#: although a 96-simulation search takes 15-20 ms: every move was policy-only.
LAG_S = 0.01


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


def told_clock(own: Clock, told: Clock) -> Clock:
    """The clock to keep after the controller's `time_left` said `told`, where `own` is the
    engine's, charged with each of its moves' measured times (`TimeSettings.spend`).

    GTP's time is whole seconds (GNU Go's and `bench.match`'s referee round down): under 3 s of
    sudden death `time_left` said 2 for a whole game, and the clock gate saw the same clock at
    every move. So where the controller states whole seconds, the engine's own count is kept
    while it agrees with them (the same stones, and between the stated seconds and one more);
    otherwise (a controller that states fractions, a new period, one that charges more, a
    reset) the controller's word stands. The engine's count
    leaves out the pipes' lag, a few ms a move, so where they differ the controller's is the
    smaller."""
    if (
        own.remaining is not None
        and told.remaining is not None
        and float(told.remaining).is_integer()
        and own.stones == told.stones
        and told.remaining <= own.remaining < told.remaining + 1
    ):
        return own
    return told


def move_allowance(settings: TimeSettings, clock: Clock, ply: int) -> float:
    """Seconds the proportional time manager gives the next move (inf with no time limit).

    In main time: the remaining time over the moves expected to be left (our share of the plies
    pgx allows), but at least a byo-yomi period's share per stone when there is byo-yomi. In
    byo-yomi: the period's remaining time over its remaining stones. Then `SAFETY` of that, less
    `LAG_S` (`gate.clock.heuristics.proportional_allowance`, the clock baselines' rule).
    """
    if clock.remaining is None:
        return math.inf
    if clock.stones > 0:
        allowance = proportional_allowance(clock.remaining, clock.stones, lag=LAG_S)
    else:
        byo = settings.byo_time / settings.byo_stones if settings.byo_stones > 0 else 0.0
        moves_left = own_moves_left(ply, max_plies=MAX_PLIES)
        allowance = proportional_allowance(clock.remaining, moves_left, floor=byo, lag=LAG_S)
    return float(allowance)


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


#: Real moves whose search times a budget's estimate is the median of (`SearchTimes`).
TIMES_KEPT = 5


class SearchTimes:
    """Each budget's search time in seconds, as the time manager reads it (`search_s(k)`): the
    lower median of its last `TIMES_KEPT` measurements (the start-up timing, then real moves).

    A single slow move (one that waited behind a compile, or a busy machine's hiccup) cannot
    move it: with a running average, one 6.6 s move of k=16 kept every budget above a 0.1 s
    allowance for the rest of a 20-game match, and every move after it was policy-only.

    A rung of the anytime ladder that is compiled but not yet played (`compiled`) is estimated
    from the largest smaller budget measured, quadratic in the simulations (`rung_estimate`),
    so it is first played when a move has room for that, and its real time then replaces it.

    Args:
        sims: k -> the simulations of budget k (the search's config).
    """

    def __init__(self, sims: Callable[[int], int]) -> None:
        self.sims = sims
        self._seen: dict[int, list[float]] = {}
        self._compiled: set[int] = set()

    def measured(self, k: int, seconds: float) -> None:
        """Adds one measured search time of budget k."""
        seen = self._seen.setdefault(k, [])
        seen.append(float(seconds))
        del seen[:-TIMES_KEPT]

    def compiled(self, k: int) -> None:
        """Budget k can play, not measured yet (a ladder rung: `rung_estimate` until it is)."""
        self._compiled.add(k)

    def __contains__(self, k: int) -> bool:
        return k in self._seen or (k in self._compiled and any(j < k for j in self._seen))

    def __getitem__(self, k: int) -> float:
        if k in self._seen:
            return statistics.median_low(self._seen[k])
        if k not in self:
            raise KeyError(k)
        base = max(j for j in self._seen if j < k)
        return rung_estimate(self[base], self.sims(base), self.sims(k))

    def __bool__(self) -> bool:
        return bool(self._seen)

    def items(self) -> list[tuple[int, float]]:
        """(k, seconds) of every budget measured or estimated, by k."""
        return [(k, self[k]) for k in sorted({*self._seen, *self._compiled}) if k in self]

    def copy(self) -> SearchTimes:
        other = SearchTimes(self.sims)
        other._seen = {k: list(v) for k, v in self._seen.items()}
        other._compiled = set(self._compiled)
        return other


def rung_estimate(base_s: float, base_sims: int, sims: int) -> float:
    """A conservative time for a search of `sims` simulations not yet measured, from a smaller
    one's (`base_s` for `base_sims`): quadratic in the simulations. Timed on this machine,
    Speed Go's searches grew about 3x per doubling past 96 simulations (96: 39 ms, 192: 139,
    384: 405, 768: 1,341, 1536: 4,367), so 4x per doubling errs long."""
    return base_s * (sims / base_sims) ** 2


def ladder(top: int, max_simulations: int) -> tuple[int, ...]:
    """The anytime ladder past a planner's largest search of `top` simulations: doubling
    simulation counts (2 top, 4 top, ...) up to `max_simulations` (empty when it is below 2 top).
    A long clock spends its spare seconds on them (issue 45: with only the planner's 16-96
    simulations, the engine used 4 s of a 60 s clock)."""
    rungs, sims = [], 2 * top
    while sims <= max_simulations:
        rungs.append(sims)
        sims *= 2
    return tuple(rungs)


def capped_budget(
    wanted: int, budgets: Iterable[int], search_s: Callable[[int], float], allowance_s: float
) -> int:
    """The learned manager's budget: the largest budget k <= `wanted` whose search time fits
    the move's allowance (`choose_budget` over those budgets), 0 if none does.

    The proportional allowance is a hard ceiling: the gate may spend less than the
    proportional manager would on a move, never more (`wanted` 0 stays 0).
    """
    return choose_budget([k for k in budgets if k <= wanted], search_s, allowance_s)


def gate_seconds(settings: TimeSettings, clock: Clock, ply: int) -> float:
    """`clock` as the clock gate sees it (trained on sudden-death clocks): the seconds the side
    can spend on the own moves expected from ply `ply` on (`own_moves_left`, this one included).

    Sudden death: the remaining time. With byo-yomi, each expected move the current time does
    not cover adds a period's share per stone (`byo_time / byo_stones`): in main time, the main
    time left plus that share for every expected move; in byo-yomi, the period's remaining time
    for its `stones` moves plus the share for the expected moves beyond them. inf with no limit.
    """
    if clock.remaining is None:
        return math.inf
    if settings.byo_stones <= 0:
        return clock.remaining
    share = settings.byo_time / settings.byo_stones
    moves_left = int(own_moves_left(ply, max_plies=MAX_PLIES))
    covered = clock.stones if clock.stones > 0 else 0
    return clock.remaining + share * max(moves_left - covered, 0)


def gate_initial_seconds(settings: TimeSettings) -> float:
    """T0 of the clock gate in seconds: `gate_seconds` of a fresh clock at ply 0 (the main time
    for sudden death; inf with no limit)."""
    return gate_seconds(settings, settings.fresh(), 0)


def to_ticks(seconds: float, per_tick: float) -> int:
    """Whole ticks (simulations) in `seconds` at `per_tick` seconds per simulation, rounded
    down; `UNLIMITED_CLOCK` for inf and at most that."""
    if per_tick <= 0:
        raise ValueError(f"seconds per tick must be > 0, got {per_tick}")
    if not math.isfinite(seconds):
        return UNLIMITED_CLOCK
    return min(max(int(seconds / per_tick), 0), UNLIMITED_CLOCK)
