"""The functional game API shared by every rtplan game."""

from __future__ import annotations

import abc
import dataclasses
import enum
from collections.abc import Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import struct


@dataclasses.dataclass(frozen=True)
class Board:
    """Coordinates of a game played by picking board cells (viewers label and click by these).

    Attributes:
        columns: label of each column, left to right.
        rows: label of each row, top (row 0) to bottom.
        actions: `[rows][columns]` the action that plays each cell.
    """

    columns: tuple[str, ...]
    rows: tuple[str, ...]
    actions: tuple[tuple[int, ...], ...]

    @classmethod
    def row_major(cls, columns: Sequence[str], rows: Sequence[str]) -> Board:
        """A board whose cell (r, c) is action r * len(columns) + c."""
        n = len(columns)
        actions = tuple(tuple(r * n + c for c in range(n)) for r in range(len(rows)))
        return cls(tuple(columns), tuple(rows), actions)

    def name(self, action: int) -> str:
        """The name of the cell `action` plays: its column label, then its row label ("A9").

        Raises:
            ValueError: `action` plays no cell.
        """
        for r, row in enumerate(self.actions):
            if action in row:
                return f"{self.columns[row.index(action)]}{self.rows[r]}"
        raise ValueError(f"action {action} plays no cell")

    def action(self, text: str) -> int:
        """The action of the cell named `text` (any case; inverse of `name`).

        Raises:
            ValueError: no cell has that name.
        """
        text = text.strip()
        columns = [c.lower() for c in self.columns]
        col, row = text[:1].lower(), text[1:]
        if col and col in columns and row.isdigit() and str(int(row)) in self.rows:
            return self.actions[self.rows.index(str(int(row)))][columns.index(col)]
        raise ValueError(f"invalid coordinate {text!r}")


class Kind(enum.StrEnum):
    """What kind of real-time game a game is: how its frames, players and budgets work.

    Ask a game's kind with `games.kind_of`; a game class says it with `Game.kind`.
    """

    #: One player; option k plays k-1 committed reflex frames, then its planned action, while
    #: the frames pass at a fixed rate (Pac-Man, Snake, Tetris).
    COMMITTED = "committed"
    #: Two players on per-player thinking clocks (`games.clock.ClockGame`); a frame is a ply and
    #: a budget is the move's search, charged to the mover's clock (Speed Hex, Speed Go).
    CLOCK = "clock"

    @property
    def num_players(self) -> int:
        """The players of a game of this kind (the protocol's `GameSpec.num_players`)."""
        return 2 if self is Kind.CLOCK else 1


@struct.dataclass
class State:
    """One game state. It fully determines the game's future (see `Game.rekey`).

    Attributes:
        inner: game-specific pytree (the library's state, or our own for Tetris).
        legal_action_mask: `[A]` bool; never all False while the game is running.
        reward: `[]` float32 paid for the last step to the player who made it.
        terminated: `[]` bool, the game ended by its own rules (no future value).
        truncated: `[]` bool, the game was cut at its horizon (the future still has value).
        frame: `[]` int32, steps taken since `init` (a frame in committed-action games, a ply in
            clock games).
        current_player: `[]` int32, the player to move; always 0 in single-player games.
    """

    inner: Any
    legal_action_mask: jax.Array  # [A] bool
    reward: jax.Array  # [] float32
    terminated: jax.Array  # [] bool
    truncated: jax.Array  # [] bool
    frame: jax.Array  # [] int32
    current_player: jax.Array  # [] int32

    @property
    def done(self) -> jax.Array:
        """`[]` bool: the game is over, by its rules or by its horizon."""
        return self.terminated | self.truncated


class Game(abc.ABC):
    """A real-time game: static settings on the object, everything that changes in `State`.

    Every public method is a pure function of its arguments and may be jitted or vmapped by the
    caller; none of them jits itself.

    Perfect simulator: the PRNG key that drives a game's chance events (Tetris pieces, ghost
    tie-breaks, fruit spawns) lives inside the state, so copying a state and stepping it
    reproduces the real future exactly. A planner that searches from a copied state therefore
    sees future chance events. Use `rekey` on the copy to plan without that foresight.
    """

    #: Versioned registry id, e.g. ``"tetris-rt-v0"``.
    id: str
    #: Number of discrete actions A.
    num_actions: int
    #: Human-readable action names, length A.
    action_names: tuple[str, ...]
    #: Shape of `State.observation`.
    observation_shape: tuple[int, ...]
    #: The game's kind, the one answer to "is this a clock game?" (`games.kind_of` asks it);
    #: `games.clock.ClockGame` is the clock kind.
    kind: ClassVar[Kind] = Kind.COMMITTED
    #: Players: always `kind.num_players` (checked when a subclass is defined).
    num_players: int = 1
    #: Frames after which the game is truncated; None if the game always ends by its rules.
    horizon: int | None = None
    #: What `fallback_action` plays, in words (the protocol's `GameSpec.fallback`).
    fallback_description: str = "the game's fallback action"
    #: Board symmetries the rules are invariant under, identity included (`symmetry`).
    num_symmetries: int = 1
    #: Cell coordinates of a game whose moves are board cells; None for the others.
    board: Board | None = None
    #: Name of each player's colour, by colour (clock games); empty for one-player games.
    colour_names: tuple[str, ...] = ()
    #: A connection game's goal, by colour: the board edges that colour's chain must join,
    #: "rows" (the first and last rows: top and bottom) or "columns" (left and right); empty
    #: where a game is not won by connecting edges.
    goal_edges: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.num_players != cls.kind.num_players:
            raise TypeError(
                f"{cls.__name__} has num_players={cls.num_players} but kind {cls.kind.value!r} "
                f"has {cls.kind.num_players}: set `kind` (a two-player game on clocks is "
                "Kind.CLOCK, as rtplan.games.clock.ClockGame)"
            )

    @abc.abstractmethod
    def init(self, key: jax.Array) -> State:
        """Starts a game.

        Args:
            key: PRNG key; it seeds every chance event of the game.

        Returns:
            The first state: frame 0, zero reward, not done.
        """

    def step(self, state: State, action: jax.Array, cost: jax.Array | int = 0) -> State:
        """Advances one frame (one ply in clock games); every game has this one signature.

        Args:
            state: the current state.
            action: `[]` int action; must be legal (`state.legal_action_mask[action]`). The
                real-time protocol replaces an illegal or missing action with
                `fallback_action(state)` before calling this.
            cost: `[]` int ticks the mover spent thinking on this action (>= 0). Clock games
                charge it to the mover's clock; a committed-action game ignores it (its
                frames pass at a fixed rate whatever the agent spent).

        Returns:
            The next state. A finished state is absorbing: stepping it returns it unchanged with
            zero reward.
        """
        del cost
        return self._absorb(state, self._step(state, jnp.asarray(action, jnp.int32)))

    @abc.abstractmethod
    def _step(self, state: State, action: jax.Array) -> State:
        """Game rules for one frame of a running game; sets everything but `truncated`."""

    @abc.abstractmethod
    def observe(self, state: State) -> jax.Array:
        """Network input planes of a state.

        Kept out of `State` so that stepping (and the search tree, which stores states) does not
        pay for planes nobody reads.

        Returns:
            `[*observation_shape]` float32.
        """

    @abc.abstractmethod
    def fallback_action(self, state: State) -> jax.Array:
        """`[]` int32: the action the real-time protocol plays when no valid action arrived."""

    def served_mask(self, state: State) -> jax.Array:
        """`[A]` bool: the actions a served side chooses among in real time, searched or not
        (`served_state`). Never empty, and a subset of `state.legal_action_mask`; here all of
        it (Speed Go keeps its pass for when the game should end)."""
        return state.legal_action_mask

    def served_state(self, state: State) -> State:
        """`state` as a side served in real time decides from it: its `legal_action_mask` is
        `served_mask`, so the reflex (masked argmax: out of time, policy-only, the reflex
        opponent) and a search's root choose among the served moves. Training, the research
        evaluations and the simulated clock decide from `state` itself, as the paper did."""
        return state.replace(legal_action_mask=self.served_mask(state))

    @abc.abstractmethod
    def rekey(self, state: State, key: jax.Array) -> State:
        """Replaces the state's PRNG key, so its future chance events are drawn anew.

        Args:
            state: any state.
            key: the new PRNG key.

        Returns:
            The same position with a different future of chance events. Games without chance
            events after `init` return `state` unchanged.
        """

    def symmetry(self, index: jax.Array, planes: jax.Array, *per_action: jax.Array):
        """Observation planes and per-action arrays under the board symmetry `index`.

        Training data augmentation: if the rules are invariant under a symmetry g, a position
        g(s) with the actions mapped by g is as real as s, so (g(planes), g(policy), g(legal))
        is another valid sample.

        Args:
            index: `[]` int32 in [0, num_symmetries), traced; 0 is the identity.
            planes: `[*observation_shape]` planes of one state.
            per_action: `[A]` arrays indexed by action (policy targets, legal masks).

        Returns:
            `(planes, *per_action)` transformed alike. The default (no symmetry) returns them
            unchanged.
        """
        del index
        return (planes, *per_action)

    def _absorb(self, state: State, nxt: State) -> State:
        """Applies the horizon, and keeps finished states absorbing with zero reward."""
        if self.horizon is not None:
            truncated = (nxt.frame >= self.horizon) & ~nxt.terminated
        else:
            truncated = jnp.zeros((), bool)
        nxt = nxt.replace(truncated=truncated)
        frozen = state.replace(reward=jnp.zeros_like(state.reward))
        return tree_where(state.done, frozen, nxt)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self.id!r})"


def tree_where(mask: jax.Array, a, b):
    """`a` where `mask` else `b`, leaf by leaf (two pytrees of one structure): a per-row select
    when `mask` is `[B]` and the leaves `[B, ...]`, a whole-tree select when `mask` is a
    scalar (as inside `vmap`). The one tree select of games, planner and gate."""

    mask = jnp.asarray(mask)

    def pick(x, y):  # leaves may be Python scalars (a wrapped library's state, unjitted)
        return jnp.where(mask.reshape(mask.shape + (1,) * (jnp.ndim(x) - mask.ndim)), x, y)

    return jax.tree.map(pick, a, b)


def random_opening(game: Game, state: State, key: jax.Array, plies: jax.Array, max_plies: int):
    """Plays `plies` uniformly random legal moves from `state` (a finished game stays put).

    Diversifies the start positions of self-play and evaluation in deterministic two-player
    games. Clock games charge these moves nothing.

    Args:
        game: the game.
        state: one state (vmap for a batch).
        key: PRNG key of the moves.
        plies: `[]` int32 number of moves to play, traced; at most `max_plies`.
        max_plies: static loop bound.

    Returns:
        The state after the moves.
    """
    return random_opening_moves(game, state, key, plies, max_plies)[0]


def random_opening_moves(
    game: Game, state: State, key: jax.Array, plies: jax.Array, max_plies: int
) -> tuple[State, jax.Array]:
    """`random_opening`, and the moves it played (a replay of the opening needs them).

    Returns:
        (the state after the moves, `[max_plies]` int32 the action of each move, -1 past
        `plies`).
    """

    def body(i, carry):
        state, key, moves = carry
        key, sub = jax.random.split(key)
        logits = jnp.where(legal_or_any(state.legal_action_mask), 0.0, -jnp.inf)
        action = jax.random.categorical(sub, logits).astype(jnp.int32)
        nxt = game.step(state, action)
        played = i < plies
        moves = moves.at[i].set(jnp.where(played, action, -1))
        return tree_where(played, nxt, state), key, moves

    moves = jnp.full((max_plies,), -1, jnp.int32)
    state, _, moves = jax.lax.fori_loop(0, max_plies, body, (state, key, moves))
    return state, moves


def legal_or_any(mask: jax.Array) -> jax.Array:
    """Returns `mask`, or all True where it is empty (every action then ends the game)."""
    return jnp.where(mask.any(), mask, jnp.ones_like(mask))
