"""The clock wrapper: a two-player pgx board game whose moves are charged to thinking clocks."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax
import jax.numpy as jnp
import pgx
from flax import struct

from rtplan.games._core import Game, Kind, State, legal_or_any, tree_where

_TIMEOUT_MODES = ("reflex", "strict")
#: Ticks per player that never run out: clock games played for their board alone (self-play
#: training, calibration, board-only evaluation) use this as `initial_time`.
UNLIMITED_CLOCK = 2**30


@struct.dataclass
class ClockState:
    """The clock-game part of `State.inner`.

    Attributes:
        board: the pgx state of the board. After a strict-mode timeout it is the position
            before the move that lost on time (the flag fell before the stone was placed), so
            its own `terminated` is False; `State.terminated` is the authority.
        clocks: `[2]` int32 remaining ticks, indexed by player id (not by colour), never < 0.
        initial_time: `[]` int32 T0 of this episode (drawn per episode by gate training).
        rewards: `[2]` float32 reward of the last step, indexed by player id.
        timed_out: `[]` bool, the game ended by a strict-mode loss on time.
    """

    board: pgx.State
    clocks: jax.Array  # [2] int32
    initial_time: jax.Array  # [] int32
    rewards: jax.Array  # [2] float32
    timed_out: jax.Array  # [] bool


class ClockGame(Game):
    """A two-player pgx board game where each move is charged to the mover's clock.

    Time is counted in integer ticks; one MCTS simulation costs one tick. The charge is passed
    to `step` as `cost` and is made on the move itself, i.e. after the mover has thought.

    Observation: float32 `[H, W, C + 2]`, pgx's planes for the player to move, then two
    constant planes: that player's remaining time / T0 and the opponent's remaining time / T0.

    Actions: pgx's actions (board cells, plus swap in Hex or pass in Go).

    Reward: `State.reward` is the reward of the player who made the move; `inner.rewards`
    holds both players' rewards by player id. Rewards are 0 until the end, then +1 / -1.
    An illegal move loses for the mover (pgx's rule).

    Termination: the board game ends by its rules (pgx's `terminated`), or, in strict mode,
    when a move's charge leaves the mover with <= 0 ticks. There is no horizon.

    Timeout modes:
        "reflex": an empty clock never loses. A player whose clock is empty moves by reflex
            (see `needs_reflex`) and the move costs 0; other moves are charged in full, with
            the clock clamped at 0.
        "strict": if the charge leaves the mover with <= 0 ticks (spending exactly to 0 also
            loses), the mover loses at once: -1 for the mover, +1 for the opponent, even if the
            move would have won on the board. The board move is not applied.

    Clock games have no chance events after `init` (pgx only draws which player id moves
    first), so `rekey` is the identity and `fallback_action` needs no key.
    """

    kind: ClassVar[Kind] = Kind.CLOCK
    num_players: int = 2
    horizon: int | None = None
    #: The pgx plane that holds the colour of the player to move (constant over the board).
    colour_plane: int
    #: The most plies a game can last (the proportional time manager's horizon).
    max_plies: int

    def __init__(self, *, initial_time: int = 300, timeout: str = "reflex"):
        if timeout not in _TIMEOUT_MODES:
            raise ValueError(
                f"timeout must be one of {_TIMEOUT_MODES}, got {timeout!r}: 'reflex' lets an "
                "empty clock play free reflex moves, 'strict' loses the game on time"
            )
        if int(initial_time) < 0:
            raise ValueError(f"initial_time must be >= 0 ticks, got {initial_time}")
        self.initial_time = int(initial_time)
        self.timeout = timeout
        self._env = self._make_env()

    @abc.abstractmethod
    def _make_env(self) -> pgx.Env:
        """The pgx environment of the board game."""

    # ---- API ----------------------------------------------------------------------------

    def init(self, key: jax.Array) -> State:
        """Starts a game with both clocks at the constructor's `initial_time`.

        Args:
            key: PRNG key; it only picks which player id moves first (pgx's draw).

        Returns:
            The first state: frame 0, zero reward, not done.
        """
        board = self._env.init(key)
        inner = ClockState(
            board=board,
            clocks=jnp.full((2,), self.initial_time, jnp.int32),
            initial_time=jnp.asarray(self.initial_time, jnp.int32),
            rewards=jnp.zeros(2, jnp.float32),
            timed_out=jnp.zeros((), bool),
        )
        return State(
            inner=inner,
            legal_action_mask=board.legal_action_mask,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            frame=jnp.zeros((), jnp.int32),
            current_player=jnp.asarray(board.current_player, jnp.int32),
        )

    def set_initial_time(self, state: State, initial_time: jax.Array | int) -> State:
        """The first state of a game whose T0 is drawn per episode (gate training).

        Args:
            state: a state from `init`.
            initial_time: `[]` int T0 in ticks, may be traced (one compile for every T0).

        Returns:
            `state` with both clocks and `inner.initial_time` at `initial_time`.
        """
        t0 = jnp.asarray(initial_time, jnp.int32)
        inner = state.inner.replace(clocks=jnp.stack([t0, t0]), initial_time=t0)
        return state.replace(inner=inner)

    def step(
        self,
        state: State,
        action: jax.Array,
        cost: jax.Array | int = 0,
        credit: jax.Array | int = 0,
    ) -> State:
        """Plays one move and charges its thinking time to the mover.

        Args:
            state: the current state.
            action: `[]` int action of the player to move.
            cost: `[]` int ticks the mover spent thinking on this move (>= 0).
            credit: `[]` int ticks added to the mover's clock after the move (>= 0; a Fischer
                increment), when the move left time on it: never to an empty clock or a flag.

        Returns:
            The next state. A finished state is absorbing: stepping it returns it unchanged
            with zero rewards (`reward` and `inner.rewards`).
        """
        nxt = self._absorb(
            state,
            self._clock_step(
                state,
                jnp.asarray(action, jnp.int32),
                jnp.asarray(cost, jnp.int32),
                jnp.asarray(credit, jnp.int32),
            ),
        )
        rewards = jnp.where(state.done, jnp.zeros_like(nxt.inner.rewards), nxt.inner.rewards)
        return nxt.replace(inner=nxt.inner.replace(rewards=rewards))

    def _step(self, state: State, action: jax.Array) -> State:
        zero = jnp.zeros((), jnp.int32)
        return self._clock_step(state, action, zero, zero)

    def needs_reflex(self, state: State) -> jax.Array:
        """`[]` bool: reflex mode and the player to move has an empty clock.

        The agent must then play its reflex (policy-only) move; the move costs 0 anyway.
        """
        if self.timeout != "reflex":
            return jnp.zeros((), bool)
        return state.inner.clocks[state.current_player] <= 0

    def clock_features(self, state: State) -> jax.Array:
        """`[2]` float32 [player to move's time / T0, opponent's time / T0]."""
        return _clock_features(state.inner.clocks, state.inner.initial_time, state.current_player)

    def rekey(self, state: State, key: jax.Array) -> State:
        """Returns `state` unchanged: clock games have no chance events after `init`."""
        del key
        return state

    # ---- rules --------------------------------------------------------------------------

    def _clock_step(
        self, state: State, action: jax.Array, cost: jax.Array, credit: jax.Array
    ) -> State:
        inner = state.inner
        mover = state.current_player
        clock = inner.clocks[mover]
        if self.timeout == "reflex":
            # An empty clock moves by reflex, for free; the game goes on.
            charge = jnp.where(clock <= 0, 0, cost)
            flagged = jnp.zeros((), bool)
        else:
            charge = cost
            flagged = clock - cost <= 0
        left = jnp.maximum(clock - charge, 0)
        # The increment rewards a move made in time: an empty clock or a fallen flag gets none.
        left = jnp.where((left > 0) & ~flagged, left + jnp.maximum(credit, 0), left)
        clocks = inner.clocks.at[mover].set(left)

        moved = self._env.step(inner.board, action)
        # The flag fell before the stone was placed: keep the board as it was.
        board = tree_where(flagged, inner.board, moved)
        timeout_rewards = jnp.ones(2, jnp.float32).at[mover].set(-1.0)
        rewards = jnp.where(flagged, timeout_rewards, moved.rewards.astype(jnp.float32))
        terminated = flagged | moved.terminated
        # pgx marks every action legal at the end of a game; do the same after a timeout.
        legal = jnp.where(terminated, True, board.legal_action_mask)

        inner = ClockState(
            board=board,
            clocks=clocks,
            initial_time=inner.initial_time,
            rewards=rewards,
            timed_out=flagged,
        )
        return State(
            inner=inner,
            legal_action_mask=legal_or_any(legal),
            reward=rewards[mover],
            terminated=terminated,
            truncated=jnp.zeros((), bool),
            frame=state.frame + 1,
            current_player=jnp.asarray(board.current_player, jnp.int32),
        )

    def observe(self, state: State) -> jax.Array:
        """pgx's planes for the player to move, then [mover's clock, opponent's clock] / T0."""
        inner = state.inner
        planes = inner.board.observation.astype(jnp.float32)
        feats = _clock_features(inner.clocks, inner.initial_time, inner.board.current_player)
        clock_planes = jnp.broadcast_to(feats, (*planes.shape[:-1], 2))
        return jnp.concatenate([planes, clock_planes], axis=-1)


def board_symmetry(ops, index, planes, per_action):
    """`ops[index]` = (quarter turns, mirror) applied to the `[n, n, C]` planes and to the
    first n*n entries (the cells, index = row * n + col) of each `[A]` array."""
    n = planes.shape[0]

    def move(x, turns, mirror):  # x: [n, n, ...]
        x = jnp.rot90(x, turns, axes=(0, 1))
        return jnp.flip(x, axis=1) if mirror else x

    def branch(turns, mirror):
        def apply(planes, *arrays):
            cells = [move(a[: n * n].reshape(n, n), turns, mirror).reshape(-1) for a in arrays]
            rest = [jnp.concatenate([c, a[n * n :]]) for c, a in zip(cells, arrays, strict=True)]
            return (move(planes, turns, mirror), *rest)

        return apply

    return jax.lax.switch(index, [branch(t, m) for t, m in ops], planes, *per_action)


def _clock_features(clocks: jax.Array, t0: jax.Array, player: jax.Array) -> jax.Array:
    # T0 = 0 (everything by reflex) would divide by zero; both planes are then 0.
    scale = jnp.maximum(t0, 1).astype(jnp.float32)
    return jnp.stack([clocks[player], clocks[1 - player]]).astype(jnp.float32) / scale
