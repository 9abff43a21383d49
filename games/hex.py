"""Speed Hex: Hex 11x11 with the swap rule, on the clock wrapper."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pgx

from rtplan.games._core import Board, State
from rtplan.games.clock import ClockGame, board_symmetry

SIZE = 11
#: Column letters, left to right.
COLUMNS = "abcdefghijk"
#: pgx's swap action (legal on the second ply only).
SWAP = SIZE * SIZE
#: The cells: column letter, then row number from 1 at the top.
BOARD = Board.row_major(COLUMNS, [str(r + 1) for r in range(SIZE)])
#: The edges each colour joins to win, by colour (pgx's `_is_terminal`): colour 0 the first and
#: last rows (top and bottom), colour 1 the first and last columns (left and right).
GOAL_EDGES = ("rows", "columns")


def cell_name(action: int) -> str:
    """A cell's name: column letter, then row from 1 ("a1" is row 0, col 0); 121 -> "swap"."""
    return "swap" if action == SWAP else BOARD.name(action)


def parse_cell(text: str) -> int:
    """The action of a cell name ("f6", "swap"); inverse of `cell_name`.

    Raises:
        ValueError: not a cell of the 11x11 board.
    """
    return SWAP if text.strip().lower() == "swap" else BOARD.action(text)


class SpeedHex(ClockGame):
    """Hex 11x11 with the swap rule and per-player clocks.

    pgx facts: actions 0..120 are cells, index = row * 11 + col, named "a1" (row 0, col 0)
    to "k11" (column letter, then row number); action 121 is swap, legal only on the second
    ply. pgx's planes are [mine, opponent's, colour, can-swap]. There are no draws.

    Goal (`GOAL_EDGES`): colour 0 (red, the first to move) wins by a chain joining row 1 and
    row 11 (the top and bottom edges, e.g. f1 ... f11); colour 1 (blue) by a chain joining
    column a and column k (left and right). Swap moves the first stone to its mirror cell
    ((r, c) -> (c, r)) and makes it blue; the colours keep their edges.
    Fallback: the legal cell nearest the centre (hex distance, ties by lower index).
    """

    id = "speed-hex-v0"
    fallback_description = "the legal cell nearest the centre"
    num_actions = 122
    action_names = tuple(cell_name(a) for a in range(SWAP + 1))
    board = BOARD
    colour_names = ("red", "blue")
    goal_edges = GOAL_EDGES
    colour_plane = 2
    #: Every ply fills a cell but the swap, which moves the first stone: at most 121 + 1.
    max_plies = SIZE * SIZE + 1
    observation_shape = (11, 11, 6)
    #: The identity and the half turn: each player's two edges map to themselves, and pgx's
    #: neighbour offsets (dr, dc) are closed under negation. (The mirror that swaps the
    #: players' edges also swaps colours, so it is not a symmetry of a position.)
    num_symmetries = 2

    def _make_env(self) -> pgx.Env:
        return pgx.make("hex")

    def symmetry(self, index: jax.Array, planes: jax.Array, *per_action: jax.Array):
        """Identity (0) or the half turn (1); swap (action 121) maps to itself."""
        return board_symmetry(((0, False), (2, False)), index, planes, per_action)

    def fallback_action(self, state: State) -> jax.Array:
        """`[]` int32: the legal cell nearest the centre; deterministic (no chance events)."""
        cells = state.legal_action_mask[:121]
        best = jnp.argmin(jnp.where(cells, jnp.asarray(_HEX_PRIORITY), 121)).astype(jnp.int32)
        return jnp.where(cells.any(), best, jnp.argmax(state.legal_action_mask).astype(jnp.int32))


def _hex_priority(size: int = 11) -> np.ndarray:
    """`[size*size]` int32 rank of each cell by hex distance to the centre, ties by index."""
    idx = np.arange(size * size)
    # pgx's neighbours of (r, c) are (r, c±1), (r±1, c), (r+1, c-1), (r-1, c+1): axial
    # coordinates, where the distance is (|dr| + |dc| + |dr + dc|) / 2.
    dr = idx // size - size // 2
    dc = idx % size - size // 2
    dist = (np.abs(dr) + np.abs(dc) + np.abs(dr + dc)) // 2
    order = np.lexsort((idx, dist))
    rank = np.empty_like(idx)
    rank[order] = idx
    return rank.astype(np.int32)


_HEX_PRIORITY = _hex_priority()
