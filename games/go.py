"""Speed Go: Go 9x9 (area scoring, komi), on the clock wrapper.

Besides the game, the few position edits a Go engine needs that pgx has no API for (a GTP
controller moves either colour, changes komi, and outlives pgx's 162-ply cap): `position`
reads a state's position, `SpeedGo.reposition` edits its ply count, superko record and ko
ban, and `SpeedGo.traced_komi` makes komi an input of compiled functions. They are the only
code that touches pgx's private fields (pgx is pinned).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pgx.go
from pgx._src.games import go as pgx_go

from rtplan.games._core import Board, State
from rtplan.games.clock import ClockGame, board_symmetry

SIZE = 9
#: GTP column letters: A-T without I (never confused with J); 9x9 uses the first nine.
COLUMNS = "ABCDEFGHJKLMNOPQRST"[:SIZE]
#: pgx's pass action.
PASS = SIZE * SIZE
#: pgx ends a 9x9 game after 2 * 81 plies (scored like any other end).
MAX_PLIES = 2 * SIZE * SIZE
#: The points, named as GTP names them (rows counted from the bottom).
BOARD = Board.row_major(COLUMNS, [str(SIZE - r) for r in range(SIZE)])


def _neighbour_table(steps) -> np.ndarray:
    """`[81, len(steps)]` int32: each point's neighbour at each (row, col) step; -1 off board."""
    out = np.full((SIZE * SIZE, len(steps)), -1, np.int32)
    for p in range(SIZE * SIZE):
        r, c = divmod(p, SIZE)
        for j, (dr, dc) in enumerate(steps):
            if 0 <= r + dr < SIZE and 0 <= c + dc < SIZE:
                out[p, j] = (r + dr) * SIZE + c + dc
    return out


_ORTHOGONAL = _neighbour_table(((-1, 0), (1, 0), (0, -1), (0, 1)))
_DIAGONAL = _neighbour_table(((-1, -1), (-1, 1), (1, -1), (1, 1)))


def vertex_name(action: int) -> str:
    """The GTP vertex of a pgx action: row * 9 + col, row 0 at the top; 0 -> "A9", 81 -> "pass"."""
    return "pass" if action == PASS else BOARD.name(action)


def parse_vertex(text: str) -> int:
    """pgx's action of a GTP vertex ("D4", "d4", "pass"); inverse of `vertex_name`.

    Raises:
        ValueError: not a vertex of the 9x9 board.
    """
    return PASS if text.strip().lower() == "pass" else BOARD.action(text)


class Position(NamedTuple):
    """A Speed Go position read from its state (host arrays): what an engine's move guards,
    scorers and colour bookkeeping need."""

    stones: np.ndarray  # [81] int32: > 0 black, < 0 white, 0 empty (row-major, row 0 on top)
    ply: int  # pgx's ply count; its colour to move is the parity (0 black, 1 white)
    passes: int  # consecutive passes just played
    superko: bool  # the last move repeated an earlier position (pgx ends the game: mover loses)
    hashes: np.ndarray  # [162, 2] uint32: the superko record, one hash per ply (0: none)
    ko: int  # the point the ko rule bans for the mover (-1: none)

    @property
    def to_play(self) -> int:
        """The colour to move: 0 black, 1 white."""
        return self.ply % 2

    def own(self) -> np.ndarray:
        """`[81]` int: +1 the mover's stones, -1 the opponent's, 0 empty."""
        return np.sign(self.stones) * (1 if self.to_play == 0 else -1)


def position(state: State) -> Position:
    """The position of an unbatched Speed Go state, read in one transfer."""
    x = state.inner.board._x
    board, ply, passes, psk, hashes, ko = jax.device_get(
        (x.board, x.step_count, x.consecutive_pass_count, x.is_psk, x.hash_history, x.ko)
    )
    return Position(
        np.asarray(board), int(ply), int(passes), bool(psk), np.asarray(hashes), int(ko)
    )


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

    def served_mask(self, state: State) -> jax.Array:
        """`[82]` bool: what a served side plays, searched or not. Jit-able.

        The raw policy passes in positions it reads badly (on the empty board too), a side out
        of time that passes hands the board to its opponent, and a search ahead on the board
        passes while its opponent plays on. So, while the game is open:

        - the board moves are the legal points that are *sensible* (`sensible_points`): not
          one of the mover's own eyes, not a self-atari, not a superko repetition (which
          loses at once);
        - pass only when no sensible point is left, or when the opponent has just passed and
          the pass, which ends the game, wins it by the count (pgx's area count with komi).

        Two passes still end a game: once the board is settled every point left is an own
        eye, a self-atari or the opponent's area, and both sides pass. A finished game (or a
        caller's mask with nothing sensible in it) keeps `state.legal_action_mask`.
        """
        x = state.inner.board._x
        legal = state.legal_action_mask
        points = legal[:PASS] & self.sensible_points(state)
        black_wins = self.black_area_margin(state) > 0
        wins = jnp.where(x.color == 0, black_wins, ~black_wins)
        pass_ok = ~points.any() | ((x.consecutive_pass_count > 0) & wins)
        mask = jnp.append(points, pass_ok & legal[PASS])
        return jnp.where(state.terminated | ~mask.any(), legal, mask)

    def sensible_points(self, state: State) -> jax.Array:
        """`[81]` bool: the empty points whose stone is neither one of the mover's own eyes, nor a
        self-atari, nor a superko repetition (legality is not checked). Jit-able.

        An own eye: every orthogonal neighbour the mover's, and at most one diagonal the
        opponent's (none on the edge): filling it never helps under area scoring. A self-atari:
        the stone's group has one liberty after the move (captures made): the opponent takes
        it next, as in a seki's shared liberty or a lost capturing race.
        """
        x = state.inner.board._x
        my_sign = jnp.where(x.color == 0, 1, -1)
        own = x.board * my_sign  # > 0 the mover's stones, < 0 the opponent's
        orth, diag = jnp.asarray(_ORTHOGONAL), jnp.asarray(_DIAGONAL)

        def on_board(table, cells):  # [81, 4] cell values, 0 off the board
            return jnp.where(table >= 0, cells[jnp.maximum(table, 0)], 0)

        empty = x.board == 0
        surrounded = jnp.all((orth < 0) | (on_board(orth, own) > 0), axis=1)
        theirs = jnp.sum(on_board(diag, own) < 0, axis=1)
        edge = jnp.any(diag < 0, axis=1)
        eye = empty & surrounded & jnp.where(edge, theirs == 0, theirs <= 1)

        rules = self._env._game
        after = jax.vmap(lambda a: rules.step(x, a))(jnp.arange(PASS))

        def liberties(board, point):  # of the group at `point` on `board` [81]
            group = board == board[point]
            touches = jnp.any((orth >= 0) & group[jnp.maximum(orth, 0)], axis=1)
            return jnp.sum((board == 0) & touches)

        libs = jax.vmap(liberties)(after.board, jnp.arange(PASS))
        return empty & ~eye & (libs >= 2) & ~after.is_psk

    def black_area_margin(self, state: State) -> jax.Array:
        """`[]` float32: black's area minus white's minus komi, as pgx counts a finished game
        (dead stones count as alive): > 0, black would win if the game ended now."""
        scores = pgx_go._count_scores(state.inner.board._x, SIZE)
        return (scores[0] - self._env._game.komi - scores[1]).astype(jnp.float32)

    def reposition(
        self,
        state: State,
        ply: jax.Array,
        hashes: jax.Array,
        ko: jax.Array,
        passes: jax.Array | None = None,
    ) -> State:
        """`state` with pgx's ply count, superko record (`[162, 2]` uint32) and ko ban replaced,
        and what they decide recomputed: the player to move (the ply's parity), the legal
        moves, the observation and whether the game is over. Board and history planes are
        kept; so are the passes unless `passes` (`[]` int, the consecutive passes) is given.
        Jit-able.

        A GTP controller uses it to hand the move to the other colour without a pass, to start
        pgx's ply count afresh before its 162-ply cap (keeping recent hashes), and to play on
        after two passes (`passes` 0: GTP has no game-over state). A state that is no longer
        over has zero rewards.
        """
        board = state.inner.board
        x = board._x._replace(
            step_count=jnp.asarray(ply, jnp.int32),
            hash_history=jnp.asarray(hashes, jnp.uint32),
            ko=jnp.asarray(ko, jnp.int32),
        )
        if passes is not None:
            x = x._replace(consecutive_pass_count=jnp.asarray(passes, jnp.int32))
        rules = self._env._game
        terminated = rules.is_terminal(x) | state.inner.timed_out
        legal = jnp.where(terminated, True, rules.legal_action_mask(x))
        board = board.replace(
            _x=x,
            current_player=board._player_order[x.color],
            legal_action_mask=legal,
            terminated=terminated,
        )
        board = board.replace(observation=self._env.observe(board))
        rewards = jnp.where(terminated, state.inner.rewards, 0.0)
        return state.replace(
            inner=state.inner.replace(board=board, rewards=rewards),
            legal_action_mask=board.legal_action_mask,
            current_player=board.current_player,
            terminated=terminated,
            reward=jnp.where(terminated, state.reward, 0.0),
        )

    @contextlib.contextmanager
    def traced_komi(self, komi: jax.Array) -> Iterator[None]:
        """While tracing inside it, the rules read `komi` (a traced scalar) instead of
        `self.komi`, so komi becomes an input of the compiled step and searches: a new komi
        needs no compile. pgx reads komi in its scoring only."""
        rules = self._env._game
        constant = rules.komi
        rules.komi = komi
        try:
            yield
        finally:
            rules.komi = constant
