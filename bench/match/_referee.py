"""The referee: two engines that each keep their own board, one game between them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Protocol

from bench.match._board import PASS, RESIGN


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


@dataclasses.dataclass
class GameRecord:
    """One refereed game."""

    #: Every move, the opening's included, black's first.
    moves: list
    #: Plies of the random opening.
    opening: int
    #: "two passes", "ply cap", "game over" (an engine's rules ended it), "resign" or
    #: "refused: ..." (an engine refused the other's move).
    end: str
    #: The colour that resigned, if one did.
    resigned: int | None = None


def referee(
    black: Player, white: Player, opening: Sequence, *, max_plies: int, pass_move=PASS
) -> GameRecord:
    """Plays one game between two engines that each keep their own board.

    Both play the opening; then the side to move gets genmove and the other side play, until
    two passes in a row, `max_plies` plies, a resignation, an engine's own end of game, or a
    move the other engine refuses (recorded, and the game stops there).
    """
    players = (black, white)
    for p in players:
        p.new_game()
    moves: list = []
    for move in opening:
        for p in players:
            p.play(len(moves) % 2, move)
        moves.append(move)
    while len(moves) < max_plies:
        if len(moves) >= 2 and moves[-1] == moves[-2] == pass_move:
            return GameRecord(moves, len(opening), "two passes")
        if any(p.over() for p in players):
            return GameRecord(moves, len(opening), "game over")
        colour = len(moves) % 2
        move = players[colour].genmove(colour)
        if move == RESIGN:
            return GameRecord(moves, len(opening), "resign", resigned=colour)
        moves.append(move)
        try:
            players[1 - colour].play(colour, move)
        except Refused as e:
            return GameRecord(moves, len(opening), f"refused: {e}")
    if any(p.over() for p in players) or moves[-2:] == [pass_move, pass_move]:
        return GameRecord(moves, len(opening), "game over")
    return GameRecord(moves, len(opening), "ply cap")
