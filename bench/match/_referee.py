"""The referee: two engines that each keep their own board, one game between them."""

from __future__ import annotations

import dataclasses
import time as _time
from collections.abc import Callable, Sequence
from typing import Protocol

from bench.match._board import PASS, RESIGN
from bench.match._clock import Clock, TimeControl, charge


class Refused(Exception):
    """An engine refused a command (a GTP `? message` answer, or an illegal move)."""


class Player(Protocol):
    """One side of `referee`: an engine that keeps its own copy of the game."""

    def new_game(self) -> None: ...

    def play(self, colour: int, move) -> None:
        """Plays `colour`'s (0 black, 1 white) move on this engine's board; raises Refused."""

    def genmove(self, colour: int):
        """Chooses and plays a move for `colour` on this engine's board (or RESIGN)."""

    def over(self) -> bool:
        """The game ended by this engine's rules (a GTP engine leaves that to the referee)."""

    def time_settings(self, control: TimeControl) -> None:
        """The game's time settings, after `new_game` (a timed match only)."""

    def time_left(self, colour: int, clock: Clock) -> None:
        """`colour`'s clock, just before its genmove and off the clock (a timed match only)."""


@dataclasses.dataclass
class GameRecord:
    """One refereed game."""

    #: Every move, the opening's included, black's first.
    moves: list
    #: Plies of the random opening.
    opening: int
    #: "two passes", "ply cap", "game over" (an engine's rules ended it), "resign", "time" (a
    #: flag fell) or "refused: ..." (an engine refused the other's move).
    end: str
    #: The colour that resigned, if one did.
    resigned: int | None = None
    #: The colour that lost on time, if one did (its last move, too late, is not in `moves`).
    lost_on_time: int | None = None
    #: A timed game: each colour's clock (black's, white's) at the end (None: no clocks).
    clocks: tuple[Clock, Clock] | None = None
    #: A timed game: the referee's wall time of each genmove in seconds, in the order played
    #: (the opening's plies have none; a flag's last, too-late move is the last entry).
    seconds: list[float] = dataclasses.field(default_factory=list)


def referee(
    black: Player,
    white: Player,
    opening: Sequence,
    *,
    max_plies: int,
    pass_move=PASS,
    time: TimeControl | tuple[TimeControl, TimeControl] | None = None,
    timer: Callable[[], float] = _time.perf_counter,
) -> GameRecord:
    """Plays one game between two engines that each keep their own board.

    Both play the opening; then the side to move gets genmove and the other side play, until
    two passes in a row, `max_plies` plies, a resignation, an engine's own end of game, or a
    move the other engine refuses (recorded, and the game stops there).

    `time`: a timed game, both sides' settings or (black's, white's). Each player gets its own
    colour's settings after `new_game`; the mover gets its own clock (`time_left`, as GoGui's
    twogtp sends it) before each genmove, the genmove's wall time by `timer` (seconds) is
    charged to it (`_clock.charge`), and a side whose flag falls loses on time (`end` "time").
    The opening's plies are free.
    """
    players = (black, white)
    controls = (time, time) if isinstance(time, TimeControl) else time
    for colour, p in enumerate(players):
        p.new_game()
        if controls is not None:
            p.time_settings(controls[colour])
    clocks = None if controls is None else [c.fresh() for c in controls]
    moves: list = []
    seconds: list[float] = []

    def record(end: str, **fields) -> GameRecord:
        final = None if clocks is None else (clocks[0], clocks[1])
        return GameRecord(moves, len(opening), end, clocks=final, seconds=seconds, **fields)

    for move in opening:
        for p in players:
            p.play(len(moves) % 2, move)
        moves.append(move)
    while len(moves) < max_plies:
        if len(moves) >= 2 and moves[-1] == moves[-2] == pass_move:
            return record("two passes")
        if any(p.over() for p in players):
            return record("game over")
        colour = len(moves) % 2
        if clocks is not None:
            players[colour].time_left(colour, clocks[colour])
        start = timer()
        move = players[colour].genmove(colour)
        if clocks is not None:
            seconds.append(timer() - start)
            clock = charge(controls[colour], clocks[colour], seconds[-1])
            if clock is None:
                clocks[colour] = Clock(0.0, clocks[colour].stones)
                return record("time", lost_on_time=colour)
            clocks[colour] = clock
        if move == RESIGN:
            return record("resign", resigned=colour)
        moves.append(move)
        try:
            players[1 - colour].play(colour, move)
        except Refused as e:
            return record(f"refused: {e}")
    if any(p.over() for p in players) or moves[-2:] == [pass_move, pass_move]:
        return record("game over")
    return record("ply cap")
