"""Rules of `tetris-rt-v0` on hand-built boards."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rtplan.games import make
from rtplan.games.tetris import NUM_COLS, NUM_ROWS, SPAWN_X, SPAWN_Y, Tetris

LEFT, RIGHT, CW, CCW, DROP, NOOP = range(6)
I, S, Z, O, T, L, J = range(7)  # noqa: E741 (the pieces' own names)

# Rotation 0 of each piece, packed top-left in its 4x4 box, written out by hand.
EXPECTED_ROT0 = {
    I: ["X...", "X...", "X...", "X..."],
    S: [".XX.", "XX..", "....", "...."],
    Z: ["XX..", ".XX.", "....", "...."],
    O: ["XX..", "XX..", "....", "...."],
    T: ["XXX.", ".X..", "....", "...."],
    L: ["X...", "X...", "XX..", "...."],
    J: [".X..", ".X..", "XX..", "...."],
}


@pytest.fixture(scope="module")
def game() -> Tetris:
    return Tetris()


@pytest.fixture(scope="module")
def step(game):
    return jax.jit(game.step)


@pytest.fixture(scope="module")
def from_board():
    return jax.jit(Tetris.from_board)


_obs = jax.jit(Tetris().observe)


def empty() -> np.ndarray:
    return np.zeros((NUM_ROWS, NUM_COLS), bool)


def mask(art: list[str]) -> np.ndarray:
    return np.array([[c == "X" for c in row] for row in art])


def pack(m: np.ndarray) -> np.ndarray:
    """Moves the filled cells of a 4x4 mask to its top-left corner."""
    rows, cols = np.nonzero(m)
    out = np.zeros_like(m)
    out[rows - rows.min(), cols - cols.min()] = True
    return out


def piece_cells(state, x: int, y: int) -> np.ndarray:
    """The 4x4 window of the observation's piece channel with top-left (y, x)."""
    return np.asarray(_obs(state)[y : y + 4, x : x + 4, 1]) > 0


def pos(state) -> tuple[int, int, int]:
    s = state.inner
    return int(s.x), int(s.y), int(s.rotation)


def assert_same(a, b) -> None:
    """Two pytrees (PRNG keys included) hold equal arrays."""

    def check(x, y):
        if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        np.testing.assert_array_equal(x, y)

    jax.tree.map(check, a, b)


def play(step, state, actions):
    for a in actions:
        state = step(state, a)
    return state


def assert_spawned(state) -> None:
    """The falling piece is a fresh one at spawn, and the observation shows it there."""
    assert pos(state) == (SPAWN_X, SPAWN_Y, 0)
    expected = mask(EXPECTED_ROT0[int(state.inner.piece)])
    np.testing.assert_array_equal(piece_cells(state, SPAWN_X, SPAWN_Y), expected)
    assert int(np.asarray(_obs(state)[..., 1]).sum()) == 4


# --- Line clears ------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_line_clears_pay_and_shift_rows(step, from_board, n):
    board = empty()
    # Bottom n rows full except the well at column 0; the rows above them in the I piece's span
    # miss column 1 too, so they stay incomplete. Two marker cells sit above the span.
    board[NUM_ROWS - n :, 1:] = True
    board[NUM_ROWS - 4 : NUM_ROWS - n, 2:] = True
    board[15, 5] = True
    board[14, 7] = True
    state = from_board(board, I, 0, 0, 0, jax.random.key(0))
    state = step(state, DROP)

    assert float(state.reward) == [0, 40, 100, 300, 1200][n]
    assert state.reward.dtype == jnp.float32
    assert int(state.inner.score) == [0, 40, 100, 300, 1200][n]
    assert int(state.inner.lines) == n
    expected = empty()
    expected[16 + n :, 0] = True  # the I cells left in the incomplete rows
    expected[16 + n :, 2:] = True
    expected[15 + n, 5] = True
    expected[14 + n, 7] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    np.testing.assert_array_equal(np.asarray(_obs(state)[..., 0]), expected)
    assert not bool(state.terminated)
    assert_spawned(state)


def test_non_adjacent_lines_clear_and_gravity_lock_pays(step, from_board):
    board = empty()
    board[16:, 1:] = True
    board[17, 5] = False  # rows 17 and 19 stay incomplete
    board[19, 8] = False
    board[12, 0] = True  # marker above the piece
    # The I piece rests on the floor already; a noop locks it at once.
    state = from_board(board, I, 0, 0, 16, jax.random.key(0))
    state = step(state, NOOP)

    assert float(state.reward) == 100.0
    expected = empty()
    expected[18:, :] = True
    expected[18, 5] = False  # old row 17
    expected[19, 8] = False  # old row 19
    expected[14, 0] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    assert_spawned(state)


def test_lock_without_lines_pays_nothing(step, from_board):
    state = from_board(empty(), T, 0, 3, 0, jax.random.key(0))
    state = step(state, DROP)
    assert float(state.reward) == 0.0
    assert int(state.inner.lines) == 0
    assert int(np.asarray(state.inner.board).sum()) == 4


# --- Hard drop --------------------------------------------------------------------------------


def test_hard_drop_lands_on_floor_and_spawns_same_tick(step, from_board):
    state = from_board(empty(), O, 0, 7, 2, jax.random.key(1))
    state = step(state, DROP)
    expected = empty()
    expected[18:, 7:9] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    assert int(state.frame) == 1
    assert_spawned(state)


def test_hard_drop_stops_on_obstacle_not_lowest_free_row(step, from_board):
    board = empty()
    board[10, 4] = True  # one block under the O's right column; free rows below it
    state = from_board(board, O, 0, 3, 0, jax.random.key(1))
    state = step(state, DROP)
    expected = board.copy()
    expected[8:10, 3:5] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    assert_spawned(state)


def test_hard_drop_starts_from_current_row_under_an_overhang(step, from_board):
    board = empty()
    board[5, 2:7] = True  # a roof above the piece
    board[19, 0:3] = True
    state = from_board(board, T, 0, 1, 8, jax.random.key(1))  # T cells (8,1..3), (9,2)
    state = step(state, DROP)
    expected = board.copy()
    expected[17, 1:4] = True  # its stem rests on the block at (19, 2)
    expected[18, 2] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    assert_spawned(state)


def test_hard_drop_of_a_resting_piece_locks_in_place(step, from_board):
    board = empty()
    board[12, 3:6] = True
    state = from_board(board, S, 0, 3, 10, jax.random.key(1))  # S cells rows 10-11
    state = step(state, DROP)
    expected = board.copy()
    expected[10, 4:6] = True
    expected[11, 3:5] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)


# --- Moves, rotations and gravity -------------------------------------------------------------


def test_noop_falls_one_row(step, from_board):
    state = from_board(empty(), L, 2, 4, 3, jax.random.key(0))
    state = step(state, NOOP)
    assert pos(state) == (4, 4, 2)
    assert float(state.reward) == 0.0
    assert not np.asarray(state.inner.board).any()


@pytest.mark.parametrize(
    ("piece", "rotation", "x", "action"),
    [
        (I, 0, 0, LEFT),  # left wall
        (I, 0, 9, RIGHT),  # right wall
        (O, 0, 8, RIGHT),
        (I, 1, 6, RIGHT),  # horizontal I against the right wall
        (I, 0, 7, CW),  # turning horizontal would leave the board
        (I, 0, 8, CCW),
        (L, 0, 9 - 1, CW),  # L turned is 3 wide
        (T, 1, 8, CCW),
    ],
)
def test_move_or_rotation_into_wall_is_ignored(step, from_board, piece, rotation, x, action):
    state = from_board(empty(), piece, rotation, x, 5, jax.random.key(0))
    state = step(state, action)
    assert pos(state) == (x, 6, rotation)


@pytest.mark.parametrize(
    ("cell", "action"),
    [
        ((6, 4), RIGHT),  # a block beside the O's lower right cell
        ((5, 1), LEFT),
        ((5, 4), CW),
    ],
)
def test_move_or_rotation_into_locked_block_is_ignored(step, from_board, cell, action):
    board = empty()
    board[cell] = True
    state = from_board(board, O if action != CW else I, 0, 2, 5, jax.random.key(0))
    state = step(state, action)
    assert pos(state) == (2, 6, 0)
    np.testing.assert_array_equal(np.asarray(state.inner.board), board)


def test_move_is_tested_at_current_row_then_gravity_locks(step, from_board):
    board = empty()
    board[7, 4] = True  # below where the move takes the O, not beside it
    state = from_board(board, O, 0, 2, 5, jax.random.key(0))
    state = step(state, RIGHT)
    expected = board.copy()
    expected[5:7, 3:5] = True  # moved right at row 5, then could not fall: locked there
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    assert_spawned(state)


def test_valid_moves_and_rotations_apply(step, from_board):
    state = from_board(empty(), T, 0, 3, 2, jax.random.key(0))
    assert pos(step(state, LEFT)) == (2, 3, 0)
    assert pos(step(state, RIGHT)) == (4, 3, 0)
    assert pos(step(state, CW)) == (3, 3, 1)
    assert pos(step(state, CCW)) == (3, 3, 3)


def test_locks_on_floor_when_gravity_is_blocked(step, from_board):
    state = from_board(empty(), O, 0, 3, 17, jax.random.key(0))
    state = step(state, NOOP)
    assert pos(state) == (3, 18, 0)  # still falling: not locked yet
    assert not np.asarray(state.inner.board).any()
    state = step(state, LEFT)  # moves left at row 18, then cannot fall: locks this tick
    expected = empty()
    expected[18:, 2:4] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    assert float(state.reward) == 0.0
    assert int(state.frame) == 2
    assert_spawned(state)


def test_locks_on_block_when_gravity_is_blocked(step, from_board):
    board = empty()
    board[14, 5] = True
    state = from_board(board, J, 0, 4, 11, jax.random.key(0))  # J cells (11,5) (12,5) (13,4-5)
    state = step(state, NOOP)
    expected = board.copy()
    expected[11:14, 5] = True
    expected[13, 4] = True
    np.testing.assert_array_equal(np.asarray(state.inner.board), expected)
    assert not bool(state.terminated)
    assert_spawned(state)


# --- Top-out ----------------------------------------------------------------------------------


def test_blocked_spawn_terminates_and_absorbs(step, from_board):
    board = empty()
    # Columns 3-6 are filled from row 1 down: every piece's spawn cells include one there.
    board[1:, 3:7] = True
    state = from_board(board, O, 0, 0, 18, jax.random.key(0))
    assert not bool(state.done)
    state = step(state, NOOP)
    assert bool(state.terminated)
    assert not bool(state.truncated)
    assert float(state.reward) == 0.0
    assert int(np.asarray(state.inner.board)[18:, 0:2].sum()) == 4  # the O was locked first
    for action in range(6):
        again = step(state, action)
        assert float(again.reward) == 0.0
        assert_same(again, state)


def test_from_board_overlapping_piece_is_terminal(from_board):
    board = empty()
    board[0, 3] = True
    assert bool(from_board(board, I, 0, 3, 0, jax.random.key(0)).terminated)
    assert not bool(from_board(board, I, 0, 4, 0, jax.random.key(0)).terminated)


# --- Pieces -----------------------------------------------------------------------------------


@pytest.mark.parametrize("piece", range(7))
def test_piece_shapes_and_clockwise_rotations(step, from_board, piece):
    shapes = []
    for r in range(4):
        state = from_board(empty(), piece, r, 3, 5, jax.random.key(0))
        shape = piece_cells(state, 3, 5)
        assert shape.sum() == 4
        assert int(np.asarray(_obs(state)[..., 1]).sum()) == 4
        np.testing.assert_array_equal(pack(shape), shape)  # packed top-left
        shapes.append(shape)

        turned = step(state, CW)
        assert pos(turned) == (3, 6, (r + 1) % 4)
        np.testing.assert_array_equal(piece_cells(turned, 3, 6), pack(np.rot90(shape, -1)))
        turned = step(state, CCW)
        assert pos(turned) == (3, 6, (r - 1) % 4)
        np.testing.assert_array_equal(piece_cells(turned, 3, 6), pack(np.rot90(shape, 1)))

    np.testing.assert_array_equal(shapes[0], mask(EXPECTED_ROT0[piece]))
    for r in range(4):
        np.testing.assert_array_equal(shapes[(r + 1) % 4], pack(np.rot90(shapes[r], -1)))
    if piece == O:
        for shape in shapes:
            np.testing.assert_array_equal(shape, shapes[0])


# --- Chance -----------------------------------------------------------------------------------


def pieces_seen(step, state, actions, count: int) -> list[int]:
    """The first `count` pieces of the episode: the current one, then one per lock."""
    seen = [int(state.inner.piece)]
    for a in actions:
        if len(seen) == count or bool(state.done):
            break
        state = step(state, a)
        # A step without a lock leaves the piece at least one row down, so row 0 means spawn.
        if int(state.inner.y) == 0:
            seen.append(int(state.inner.piece))
    return seen


def test_piece_sequence_does_not_depend_on_actions(game, step):
    state = game.init(jax.random.key(7))
    # Hard drops in turning columns lock every tick; noops lock about every 18 ticks.
    fast = [a for _ in range(20) for a in (LEFT, LEFT, LEFT, DROP, RIGHT, RIGHT, DROP)]
    slow = [NOOP] * 400
    mixed = list(np.random.default_rng(0).choice([LEFT, RIGHT, CW, CCW, NOOP], 400))
    a = pieces_seen(step, state, fast, 8)
    b = pieces_seen(step, state, slow, 8)
    c = pieces_seen(step, state, mixed, 8)
    assert len(a) == len(b) == len(c) == 8
    assert a == b == c
    assert len(set(a)) > 1


def test_rekey_changes_future_pieces_not_current_position(game, step):
    state = play(step, game.init(jax.random.key(3)), [NOOP, LEFT, NOOP, CW])
    other = game.rekey(state, jax.random.key(99))
    assert pos(other) == pos(state)
    assert int(other.inner.piece) == int(state.inner.piece)
    np.testing.assert_array_equal(_obs(other), _obs(state))
    same = game.rekey(state, state.inner.key)
    drops = [DROP, LEFT, LEFT, DROP, RIGHT, RIGHT, DROP, RIGHT, DROP] * 2
    assert pieces_seen(step, same, drops, 6) == pieces_seen(step, state, drops, 6)
    assert pieces_seen(step, other, drops, 6) != pieces_seen(step, state, drops, 6)


def test_init_is_deterministic_in_key_and_varies_across_keys(game):
    first = [int(game.init(jax.random.key(k)).inner.piece) for k in range(40)]
    assert first == [int(game.init(jax.random.key(k)).inner.piece) for k in range(40)]
    assert set(first) == set(range(7))


# --- API and horizon --------------------------------------------------------------------------


def test_init_state_and_static_api(game):
    assert make("tetris-rt-v0").id == "tetris-rt-v0"
    assert game.num_actions == 6 and len(game.action_names) == 6
    assert game.horizon == 2000
    state = game.init(jax.random.key(0))
    assert _obs(state).shape == game.observation_shape == (20, 10, 2)
    assert _obs(state).dtype == jnp.float32
    assert state.legal_action_mask.dtype == jnp.bool_
    assert bool(state.legal_action_mask.all())
    assert int(state.frame) == 0 and float(state.reward) == 0.0
    assert not bool(state.done) and int(state.current_player) == 0
    assert int(game.fallback_action(state)) == NOOP
    assert game.fallback_action(state).dtype == jnp.int32
    assert state.inner.board.dtype == jnp.bool_
    assert_spawned(state)


def test_horizon_truncates_without_terminating():
    game = Tetris(horizon=50)
    step = jax.jit(game.step)
    state = game.init(jax.random.key(0))
    for t in range(1, 51):
        state = step(state, NOOP if t % 3 else RIGHT)
        assert int(state.frame) == t
        assert not bool(state.terminated)
        assert bool(state.truncated) == (t == 50)
    again = step(state, DROP)
    assert float(again.reward) == 0.0
    assert_same(again, state)


def test_batched_step_matches_single_steps(game, step):
    keys = jax.random.split(jax.random.key(5), 4)
    states = jax.vmap(game.init)(keys)
    actions = jnp.array([LEFT, CW, DROP, NOOP])
    batched = jax.jit(jax.vmap(game.step))(states, actions)
    for i in range(4):
        single = step(jax.tree.map(lambda a, i=i: a[i], states), actions[i])
        assert_same(jax.tree.map(lambda a, i=i: a[i], batched), single)
