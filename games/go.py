"""Speed Go: Go 9x9 (area scoring, komi), on the clock wrapper."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pgx
import pgx.go

from games._core import Board, State
from games.clock import ClockGame, board_symmetry

SIZE = 9
#: GTP column letters: A-T without I (never confused with J); 9x9 uses the first nine.
COLUMNS = "ABCDEFGHJKLMNOPQRST"[:SIZE]
#: pgx's pass action.
PASS = SIZE * SIZE
#: pgx ends a 9x9 game after 2 * 81 plies (scored like any other end).
MAX_PLIES = 2 * SIZE * SIZE
#: The points, named as GTP names them (rows counted from the bottom).
BOARD = Board.row_major(COLUMNS, [str(SIZE - r) for r in range(SIZE)])


def vertex_name(action: int) -> str:
    """The GTP vertex of a pgx action: row * 9 + col, row 0 at the top; 0 -> "A9", 81 -> "pass"."""
    return "pass" if action == PASS else BOARD.name(action)


def parse_vertex(text: str) -> int:
    """pgx's action of a GTP vertex ("D4", "d4", "pass"); inverse of `vertex_name`.

    Raises:
        ValueError: not a vertex of the 9x9 board.
    """
    return PASS if text.strip().lower() == "pass" else BOARD.action(text)


class SpeedGo(ClockGame):
    """Go 9x9 (area scoring, komi) with per-player clocks.

    pgx facts: actions 0..80 are points, index = row * 9 + col with row 0 at the top, named
    GTP-style "A9".."J1" (columns A-J without I, rows counted from the bottom); action 81 is
    pass, always legal. pgx's 17 planes are 8 history positions x (mine, opponent's) + colour.

    Termination: two consecutive passes, a positional-superko violation (the mover loses), or
    pgx's cap of 162 plies. At the cap pgx scores the board and pays +1 / -1 like a normal end,
    so it is a termination with an outcome, not a truncation: the result is final and nothing
    should be bootstrapped past it.
    Fallback: pass.
    """

    id = "speed-go-v0"
    fallback_description = "pass"
    num_actions = 82
    action_names = tuple(vertex_name(a) for a in range(PASS + 1))
    board = BOARD
    colour_names = ("black", "white")
    colour_plane = 16
    max_plies = MAX_PLIES
    observation_shape = (9, 9, 19)
    #: The square's 8 rotations and reflections; area scoring, captures and superko are all
    #: invariant under them (komi is not positional).
    num_symmetries = 8

    def __init__(self, *, initial_time: int = 300, timeout: str = "reflex", komi: float = 7.5):
        self.komi = float(komi)
        super().__init__(initial_time=initial_time, timeout=timeout)

    def _make_env(self) -> pgx.Env:
        return pgx.go.Go(size=9, komi=self.komi)

    def symmetry(self, index: jax.Array, planes: jax.Array, *per_action: jax.Array):
        """`index` = quarter turns (index % 4), then a mirror if index >= 4; pass maps to
        itself."""
        ops = tuple((t, m) for m in (False, True) for t in range(4))
        return board_symmetry(ops, index, planes, per_action)

    def fallback_action(self, state: State) -> jax.Array:
        """`[]` int32: pass, which is always legal."""
        del state
        return jnp.int32(PASS)
