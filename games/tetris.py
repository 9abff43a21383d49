"""Real-time Tetris in pure JAX: one gravity tick per step on a 20x10 board."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct
from jumanji.environments.packing.tetris.constants import REWARD_LIST, TETROMINOES_LIST

from rtplan.games._core import Game, State

#: Piece names by index.
PIECE_NAMES = ("I", "S", "Z", "O", "T", "L", "J")
#: Board size.
NUM_ROWS = 20
NUM_COLS = 10
#: Spawn position of every new piece: the 4x4 box's left column and top row, rotation 0.
SPAWN_X = NUM_COLS // 2 - 2
SPAWN_Y = 0

NOOP = 5

# The board is worked on as one int32 bit row per board row: column c is bit c + _OFF. The
# offset leaves wall bits on both sides, so a piece shifted to x = -1 or x = 10 hits a wall
# instead of needing a separate bounds test.
_OFF = 3
_FULL = ((1 << NUM_COLS) - 1) << _OFF  # the 10 cells of a row
_WALLS = ~_FULL  # every other bit, as a signed int32
_COL_BITS = np.left_shift(1, np.arange(NUM_COLS) + _OFF).astype(np.int32)  # [C]

# Jumanji's piece table, index order 0=I, 1=S, 2=Z, 3=O, 4=T, 5=L, 6=J; each mask is packed
# into the top-left of its 4x4 box. Rotation r + 1 is rotation r turned clockwise (checked for
# every piece in tests/games/test_tetris_rules.py), as in the reference, so "rotate_cw" adds 1.
_MASKS = np.asarray(TETROMINOES_LIST, dtype=bool)  # [7, 4, 4, 4] piece, rotation, row, col
# Bit row i of a mask has bit j set for cell (i, j); shifting it left by x + _OFF places it.
_PIECE_ROWS = (_MASKS * (1 << np.arange(4))).sum(-1).astype(np.int32)  # [7, 4, 4]
_REWARDS = np.asarray(REWARD_LIST, dtype=np.float32)  # [5]

# Candidate top rows for the landing test: every row the box can occupy, plus row NUM_ROWS,
# which always collides with the floor (row 0 of every mask is non-empty).
_NUM_Y = NUM_ROWS + 1
_YS = np.arange(_NUM_Y, dtype=np.int32)  # [Y]
_ROWS = np.arange(NUM_ROWS, dtype=np.int32)  # [R]


@struct.dataclass
class TetrisState:
    """Our own Tetris state; `State.inner` for `Tetris`.

    Attributes:
        board: locked cells only; the falling piece is not drawn in.
        piece: falling piece, 0=I, 1=S, 2=Z, 3=O, 4=T, 5=L, 6=J.
        rotation: index into the piece's 4 rotations; r + 1 is a clockwise turn.
        x: board column of the left edge of the piece's 4x4 box.
        y: board row of the top edge of the piece's 4x4 box.
        key: PRNG key of the pieces still to come; split once per new piece.
        score: sum of the rewards paid so far.
        lines: rows cleared so far.
    """

    board: jax.Array  # [R, C] bool
    piece: jax.Array  # [] int32
    rotation: jax.Array  # [] int32
    x: jax.Array  # [] int32
    y: jax.Array  # [] int32
    key: jax.Array  # [] PRNG key (or uint32 [2] raw key)
    score: jax.Array  # [] int32
    lines: jax.Array  # [] int32


def _to_bits(board: jax.Array) -> jax.Array:
    """`[R, C]` bool board -> `[R]` int32 bit rows (column c at bit c + _OFF)."""
    return jnp.where(board, _COL_BITS, 0).sum(-1, dtype=jnp.int32)


def _from_bits(rows: jax.Array) -> jax.Array:
    """`[R]` int32 bit rows -> `[R, C]` bool cells."""
    return (rows[:, None] & _COL_BITS) != 0


def _windows(rows: jax.Array) -> jax.Array:
    """`[4, Y]` int32: entry (i, y) is the padded board's bit row y + i, walls and floor set.

    A piece with bit rows `p` ([4], already shifted to its column) fits with its box top at row
    y iff `p & windows[:, y]` is zero.
    """
    padded = jnp.concatenate([rows | _WALLS, jnp.full((4,), -1, jnp.int32)])  # [R + 4]
    return jnp.stack([padded[i : i + _NUM_Y] for i in range(4)])


def _place(piece_rows: jax.Array, y: jax.Array) -> jax.Array:
    """`[R]` int32: the bit rows `piece_rows` ([4], shifted) put at box top row `y`."""
    # A sum of one-hot selects is cheaper than a gather once vmapped on CPU.
    hits = _ROWS[None, :] == (y + jnp.arange(4))[:, None]  # [4, R]
    return jnp.where(hits, piece_rows[:, None], 0).sum(0, dtype=jnp.int32)


def _draw(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Splits the key once and draws a uniform piece. Returns (next key, piece)."""
    key, sub = jax.random.split(key)
    return key, jax.random.randint(sub, (), 0, _MASKS.shape[0], dtype=jnp.int32)


def _observe(board: jax.Array, piece_bits: jax.Array) -> jax.Array:
    """`[R, C, 2]` float32: locked board, and the falling piece's cells (bit rows)."""
    return jnp.stack([board, _from_bits(piece_bits)], -1).astype(jnp.float32)


def piece_cells(inner: TetrisState) -> np.ndarray:
    """`[4, 2]` (row, col) board cells of the falling piece of one unbatched state (numpy)."""
    mask = _MASKS[int(inner.piece), int(inner.rotation)]
    return np.argwhere(mask) + np.array([int(inner.y), int(inner.x)])


class Tetris(Game):
    """Real-time Tetris (`tetris-rt-v0`), our own pure-JAX rules after the reference `TetrisRT`.

    One step is one gravity tick on a 20x10 board. Jumanji's piece table and line rewards are
    reused; the falling piece spawns at column 3, row 0, rotation 0.

    - Observation `[20, 10, 2]` float32: channel 0 the locked cells, channel 1 the falling
      piece drawn at its position (cropped to the board). No preview, no hold.
    - Actions: 0 left, 1 right, 2 rotate clockwise, 3 rotate counter-clockwise, 4 hard drop,
      5 noop. All are always legal; a move or rotation that would leave the board or overlap a
      locked cell is ignored (no wall kicks). After the move the piece falls one row, or locks
      at once if it cannot (no lock delay). Hard drop moves it to its landing row and locks.
    - Reward: on lock, 0/40/100/300/1200 for 0/1/2/3/4 cleared lines. No survival bonus, no
      death penalty.
    - Termination: top-out, the next piece overlaps the board at spawn. Truncation: `horizon`
      frames (default 2000); the reference counted this as a termination.
    - Fallback: noop.
    - Chance: pieces are uniform i.i.d. over the 7. The state key is split only when a piece
      is drawn (at `init` and at each lock), so the n-th piece of an episode depends on the
      init key alone, not on when pieces lock; different thinking budgets on one seed see the
      same pieces. (The reference advanced its key every tick, so the sequence depended on
      timing.)
    """

    id = "tetris-rt-v0"
    fallback_description = "no-op (the piece falls one row)"
    num_actions = 6
    action_names = ("left", "right", "rotate_cw", "rotate_ccw", "hard_drop", "noop")
    observation_shape = (NUM_ROWS, NUM_COLS, 2)
    num_players = 1

    def __init__(self, *, horizon: int = 2000) -> None:
        self.horizon = int(horizon)

    def init(self, key: jax.Array) -> State:
        """Starts a game on an empty board.

        Args:
            key: PRNG key; it draws every piece of the game.

        Returns:
            The first state: the first piece at spawn, frame 0, zero reward, not done.
        """
        key, piece = _draw(key)
        board = jnp.zeros((NUM_ROWS, NUM_COLS), bool)
        return self.from_board(board, piece, 0, SPAWN_X, SPAWN_Y, key)

    @staticmethod
    def from_board(
        board: jax.Array,
        piece: jax.Array | int,
        rotation: jax.Array | int,
        x: jax.Array | int,
        y: jax.Array | int,
        key: jax.Array,
        *,
        frame: jax.Array | int = 0,
    ) -> State:
        """Builds a state from a hand-made position, e.g. for tests.

        Args:
            board: `[20, 10]` bool locked cells. It should hold no full row: a running game
                never has one, and lines are only cleared in the rows a locking piece touches.
            piece: `[]` int falling piece, 0=I, 1=S, 2=Z, 3=O, 4=T, 5=L, 6=J.
            rotation: `[]` int rotation index in 0..3.
            x: `[]` int column of the piece box's left edge.
            y: `[]` int row of the piece box's top edge.
            key: PRNG key that draws the pieces after this one (consumed as the state key).
            frame: `[]` int frame counter of the state.

        Returns:
            A state with zero reward, all actions legal, not
            truncated; terminated iff the piece overlaps a locked cell or leaves the board (a
            topped-out position).
        """
        board = jnp.asarray(board, bool)
        piece = jnp.asarray(piece, jnp.int32)
        rotation = jnp.asarray(rotation, jnp.int32)
        x = jnp.asarray(x, jnp.int32)
        y = jnp.asarray(y, jnp.int32)
        shifted = jnp.asarray(_PIECE_ROWS)[piece, rotation] << (x + _OFF)  # [4]
        fits = ~jnp.any(_windows(_to_bits(board))[:, y] & shifted)
        inner = TetrisState(
            board=board,
            piece=piece,
            rotation=rotation,
            x=x,
            y=y,
            key=key,
            score=jnp.zeros((), jnp.int32),
            lines=jnp.zeros((), jnp.int32),
        )
        return State(
            inner=inner,
            legal_action_mask=jnp.ones((6,), bool),
            reward=jnp.zeros((), jnp.float32),
            terminated=~fits,
            truncated=jnp.zeros((), bool),
            frame=jnp.asarray(frame, jnp.int32),
            current_player=jnp.zeros((), jnp.int32),
        )

    def _step(self, state: State, action: jax.Array) -> State:
        s = state.inner
        table = jnp.asarray(_PIECE_ROWS)
        rows = _to_bits(s.board)  # [R]
        windows = _windows(rows)  # [4, Y]
        at_y = jnp.where(s.y == _YS, windows, 0).sum(-1, dtype=jnp.int32)  # [4] rows y..y+3

        # 1. One lateral move or rotation, tested at the current row; ignored if it collides.
        cand_x = s.x + jnp.where(action == 0, -1, 0) + jnp.where(action == 1, 1, 0)
        turn = jnp.where(action == 2, 1, 0) + jnp.where(action == 3, -1, 0)
        cand_rot = (s.rotation + turn) % 4
        cand_fits = ~jnp.any(at_y & (table[s.piece, cand_rot] << (cand_x + _OFF)))
        x = jnp.where(cand_fits, cand_x, s.x)
        rotation = jnp.where(cand_fits, cand_rot, s.rotation)

        # 2-3. Gravity or hard drop. The landing row is the row above the first blocked row
        # below the piece, found by testing every candidate row at once (no while loop).
        shifted = table[s.piece, rotation] << (x + _OFF)  # [4]
        blocked = jnp.any(windows & shifted[:, None], axis=0) & (s.y < _YS)  # [Y]
        landing = jnp.argmax(blocked).astype(jnp.int32) - 1  # row NUM_ROWS is always blocked
        hard = action == 4
        y = jnp.where(hard, landing, jnp.minimum(s.y + 1, landing))
        lock = hard | (landing == s.y)
        placed = _place(shifted, y)  # [R]

        # 4. Lock: merge, clear the full rows among the 4 the piece touches, top one first, so
        # the rows still to test below are not moved.
        merged = rows | placed
        full = (merged & _FULL) == _FULL  # [R]
        cleared = merged
        num_lines = jnp.zeros((), jnp.int32)
        for i in range(4):
            row = y + i
            is_full = jnp.any(full & (row == _ROWS))
            down = jnp.concatenate([jnp.zeros((1,), jnp.int32), cleared[:-1]])
            cleared = jnp.where(is_full & (row >= _ROWS), down, cleared)
            num_lines = num_lines + is_full
        new_rows = jnp.where(lock, cleared, rows)
        reward = jnp.where(lock, jnp.asarray(_REWARDS)[jnp.minimum(num_lines, 4)], 0.0)
        num_lines = jnp.where(lock, num_lines, 0)

        # Draw and spawn the next piece in the same tick; the key moves only on a draw.
        next_key, next_piece = _draw(s.key)
        spawn = table[next_piece, 0] << (SPAWN_X + _OFF)  # [4]
        topped_out = lock & jnp.any(new_rows[:4] & spawn)

        board = _from_bits(new_rows)
        inner = TetrisState(
            board=board,
            piece=jnp.where(lock, next_piece, s.piece),
            rotation=jnp.where(lock, 0, rotation),
            x=jnp.where(lock, SPAWN_X, x),
            y=jnp.where(lock, SPAWN_Y, y),
            key=jnp.where(lock, next_key, s.key),
            score=s.score + reward.astype(jnp.int32),
            lines=s.lines + num_lines,
        )
        return state.replace(
            inner=inner,
            reward=reward.astype(jnp.float32),
            terminated=topped_out,
            truncated=jnp.zeros((), bool),
            frame=state.frame + 1,
        )

    def observe(self, state: State) -> jax.Array:
        """`[20, 10, 2]` float32: locked cells, and the falling piece at its position."""
        s = state.inner
        shifted = jnp.asarray(_PIECE_ROWS)[s.piece, s.rotation] << (s.x + _OFF)
        return _observe(s.board, _place(shifted, s.y))

    def fallback_action(self, state: State) -> jax.Array:
        """`[]` int32: noop (5)."""
        return jnp.asarray(NOOP, jnp.int32)

    def rekey(self, state: State, key: jax.Array) -> State:
        """Replaces the key of the pieces to come; the falling piece and board stay.

        Args:
            state: any state.
            key: the new PRNG key.

        Returns:
            `state` with `inner.key` replaced.
        """
        return state.replace(inner=state.inner.replace(key=key))
