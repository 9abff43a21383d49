"""Per-game runtimes (a game, its network, its compiled functions) shared by every session."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import threading
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from rtplan import games, wire
from rtplan.games.render import describe_view, render
from rtplan.harness.checkpoint import load_metadata, planner_path
from rtplan.planner import PlannerConfig
from rtplan.planner.store import load_planner
from rtplan.server._compiled import compiled
from rtplan.server._frame_info import HostInfo
from rtplan.v1 import env_pb2, tensor_pb2

#: Clock games: the session's agent is always this player id; the built-in opponent the other.
AGENT_PLAYER = 0


#: Rows of a tick group's first batch (`server._tick_group`); it doubles when full.
MIN_BATCH = 8


def batch_sizes(rows: int) -> tuple[int, ...]:
    """The batch sizes a tick group of up to `rows` members passes through: MIN_BATCH, doubled
    until one holds `rows` (none for 0)."""
    sizes, size = [], MIN_BATCH
    while rows > 0:
        sizes.append(size)
        if size >= rows:
            break
        size *= 2
    return tuple(sizes)


#: The env server's collector thresholds once a game is compiled (`Runtimes.get`): measured
#: with `bench/bench_sessions.py` (docs/services.md).
GC_THRESHOLDS = (10_000, 50, 100)


def state_digest(state: games.State) -> str:
    """A short hex digest of every leaf of a state (dtype, shape and bytes)."""
    h = hashlib.blake2b(digest_size=12)
    for leaf in jax.tree_util.tree_leaves(jax.device_get(state)):
        a = np.asarray(leaf)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def init_key(seed: int) -> jax.Array:
    """The init PRNG key of a session seed (0 <= seed < 2**63)."""
    return jax.random.PRNGKey(seed)


class GameRuntime:
    """One game as this server runs it: the game (with the checkpoint's settings), its network
    parameters when a checkpoint exists, and the shared jitted functions."""

    def __init__(self, game_id: str, checkpoint: Path | None) -> None:
        """
        Args:
            game_id: a registered game id (UnknownGameError otherwise).
            checkpoint: a planner checkpoint of this game, or None (no reflex, no planner).
        """
        games.game_class(game_id)  # UnknownGameError names the registered games
        self.game_id = game_id
        self.checkpoint = checkpoint
        if checkpoint is not None:
            cfg, self.params, self.meta = load_planner(game_id, str(checkpoint))
        else:
            cfg, self.params, self.meta = None, None, {}
        self.config: PlannerConfig | None = cfg
        params = tuple(sorted(cfg.game_params)) if cfg is not None else ()
        self._fns = compiled(game_id, params, cfg)
        self.game: games.Game = self._fns.game
        #: The game's kind (`games.kind_of`).
        self.kind = games.kind_of(self.game)
        self._warm = threading.Lock()
        self._warmed = False
        self._batch_warmed: set[int] = set()

    @property
    def has_network(self) -> bool:
        """A checkpoint is loaded: the reflex (and the planner agent) are available."""
        return self.params is not None

    @property
    def budgets(self) -> tuple[int, ...]:
        return self.config.budgets if self.config is not None else ()

    @property
    def game_params(self) -> dict:
        return dict(self.config.game_params) if self.config is not None else {}

    def init(self, seed: int, *, initial_time: int | None = None) -> tuple[games.State, HostInfo]:
        """The first state of a session with this seed, and its frame info; a clock game's
        clocks start at `initial_time` ticks when given (else the game's)."""
        state = self._fns.init(init_key(seed))
        if initial_time is not None and self._fns.set_clock is not None:
            state = self._fns.set_clock(state, np.int32(initial_time))
        return state, HostInfo.from_device(self._fns.info(self.params, state))

    def step(self, state: games.State, action: int, cost: int = 0, credit: int = 0):
        """Plays one frame (one ply in clock games, charging `cost` ticks to the mover and then
        crediting `credit`, its increment)."""
        a, c, k = np.int32(action), np.int32(cost), np.int32(credit)
        nxt, info = self._fns.frame(self.params, state, a, c, k)
        return nxt, HostInfo.from_device(info)

    # Batched ticks (`server._tick_group`): rows of one padded batch [C], C a power of two.

    def batch(self, capacity: int) -> games.State:
        """A batch of `capacity` rows, each the first state of seed 0 (padding until a session's
        state is put in its row)."""
        state = self._fns.init(init_key(0))
        return jax.tree.map(lambda x: jnp.repeat(x[None], capacity, axis=0), state)

    def grow(self, states: games.State, capacity: int) -> games.State:
        """`states` with rows added up to `capacity` (copies of row 0: padding)."""
        size = jax.tree_util.tree_leaves(states)[0].shape[0]
        extra = capacity - size
        return jax.tree.map(
            lambda b: jnp.concatenate([b, jnp.repeat(b[:1], extra, axis=0)]), states
        )

    def put(self, states: games.State, slot: int, state: games.State) -> games.State:
        """`states` with row `slot` set to `state` (`states` is donated: use only the result)."""
        return self._fns.put(states, np.int32(slot), state)

    def step_batch(self, states: games.State, actions: np.ndarray, live: np.ndarray):
        """Plays one frame in every `live` row (single-player games: no clock charge).

        Args:
            states: the batch [C].
            actions: [C] int32, each live row's action (padding rows: any legal index).
            live: [C] bool, the rows that hold a session's frame to play.

        Returns:
            (the next batch, live rows stepped and the others unchanged; its `FrameInfo` [C]
            on the host as NumPy arrays).
        """
        nxt, infos = self._fns.frames(self.params, states, actions, live)
        return nxt, jax.device_get(infos)

    def batch_warmed(self, capacity: int) -> bool:
        """The batched functions for `capacity` rows are compiled (`warm_batch`)."""
        return capacity in self._batch_warmed

    def warm_batch(self, capacity: int) -> None:
        """Compiles the batched functions for `capacity` rows (blocking: off the event loop)."""
        with self._warm:
            if capacity not in self._batch_warmed:
                self._compile_batch(capacity)
                self._batch_warmed.add(capacity)

    def _compile_batch(self, capacity: int) -> None:
        states = self.batch(capacity)
        states = self.put(states, 0, jax.tree.map(lambda x: x[0], states))
        actions = np.zeros(capacity, np.int32)
        jax.block_until_ready(self.step_batch(states, actions, np.ones(capacity, bool))[0])
        self.grow(self.batch(capacity // 2 or 1), capacity)

    def observe(self, state: games.State) -> np.ndarray:
        return np.asarray(jax.device_get(self._fns.observe(state)))

    def state_proto(self, state: games.State) -> tensor_pb2.GameState:
        return wire.state_to_proto(self.game, state)

    def served_state(self, state: games.State) -> games.State:
        """`Game.served_state(state)` (jitted once per game)."""
        return self._fns.serve(state)

    def warm(self) -> None:
        """Compiles every function (blocking; call it off the event loop)."""
        with self._warm:
            if self._warmed:
                return
            state, info = self.init(0)
            if self.kind is games.Kind.CLOCK:
                self.init(0, initial_time=1)
            self.step(state, info.fallback, 0)
            self.observe(state)
            self.state_proto(self.served_state(state))
            render(self.game, state)  # its first call compiles (~0.8 s for Pac-Man): not in a tick
            # A replay is re-simulated by the game's functions without a network (`replay.
            # resimulate`): compiled here, not by a visitor's first replay, whose compile in a
            # worker thread took the CPU from the ticks (ticks 2 s late in the soak).
            replay = compiled(self.game_id, tuple(sorted(self.game_params.items())), None)
            replay_state = replay.init(init_key(0))
            replay.frame(None, replay_state, np.int32(info.fallback), np.int32(0), np.int32(0))
            self._warmed = True

    def spec(self) -> env_pb2.GameSpec:
        return game_spec(self.game)

    def describe(self) -> dict:
        """JSON summary for GET /v1/games."""
        return describe_game(self.game, self.checkpoint, self.budgets, self.game_params)


def describe_game(game: games.Game, checkpoint: Path | None, budgets, game_params) -> dict:
    """JSON summary of a game as a server runs it."""
    return {
        "id": game.id,
        "num_actions": game.num_actions,
        "action_names": list(game.action_names),
        "num_players": game.num_players,
        "horizon": game.horizon or 0,
        "observation_shape": list(game.observation_shape),
        "fallback": game.fallback_description,
        "checkpoint": checkpoint is not None,
        "budgets": list(budgets),
        "game_params": dict(game_params),
        "view": describe_view(game),
    }


def game_spec(game: games.Game) -> env_pb2.GameSpec:
    """The protocol's `GameSpec` of a game."""
    return env_pb2.GameSpec(
        game_id=game.id,
        observation=tensor_pb2.TensorSpec(
            name="observation",
            dtype=tensor_pb2.DTYPE_FLOAT32,
            shape=list(game.observation_shape),
        ),
        num_actions=game.num_actions,
        action_names=list(game.action_names),
        num_players=game.num_players,
        horizon=game.horizon or 0,
        fallback=game.fallback_description,
    )


class Runtimes:
    """The runtimes of one server, built on first use (off the event loop) and then shared."""

    def __init__(self, checkpoint_dir: Path, *, batch_rows: int = 0) -> None:
        """
        Args:
            checkpoint_dir: the folder of the planner checkpoints.
            batch_rows: tick groups (single-player games): every batch size up to this many
                rows is compiled with the game, before any session plays it; each larger one
                compiles as a group passes half full (`TickGroup`); 0: no tick groups.
        """
        self.checkpoint_dir = Path(checkpoint_dir)
        self.batch_rows = batch_rows
        self._runtimes: dict[str, GameRuntime] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._meta: dict[str, tuple] = {}

    def checkpoint_for(self, game_id: str) -> Path | None:
        path = planner_path(self.checkpoint_dir, game_id)
        return path if path.is_file() else None

    async def get(self, game_id: str) -> GameRuntime:
        """The warmed runtime of `game_id` (UnknownGameError for an unregistered id)."""
        games.game_class(game_id)
        if game_id in self._runtimes:
            return self._runtimes[game_id]
        lock = self._locks.setdefault(game_id, asyncio.Lock())
        async with lock:
            if game_id not in self._runtimes:
                rt = await asyncio.to_thread(GameRuntime, game_id, self.checkpoint_for(game_id))
                await asyncio.to_thread(rt.warm)
                if rt.kind is games.Kind.COMMITTED:
                    for size in batch_sizes(self.batch_rows):
                        await asyncio.to_thread(rt.warm_batch, size)
                self._runtimes[game_id] = rt
                # Compiling left a large heap that lives as long as the server; keep it out of
                # the collector so that a full collection inside a tick traverses only what
                # the sessions allocate (splicing lists: no pause now).
                gc.freeze()
                # Each tick allocates a few objects per session that live one period; with the
                # default thresholds (700, 10, 10) they reached the oldest generation, and
                # 512 sessions paid a 8-12 ms full collection every second (a late tick when
                # one fell just before a deadline). Collected young, they never get there.
                gc.set_threshold(*GC_THRESHOLDS)
        return self._runtimes[game_id]

    def loaded(self, game_id: str) -> GameRuntime | None:
        return self._runtimes.get(game_id)

    def info(self, game_id: str) -> tuple[games.Game, Path | None, tuple, dict]:
        """(game, checkpoint, budgets, game params) without loading weights or compiling."""
        if game_id not in self._meta:
            ckpt = self.checkpoint_for(game_id)
            budgets, params = (), {}
            if ckpt is not None:
                cfg = load_metadata(ckpt)["planner_config"]
                budgets = tuple(cfg.get("budgets", ()))
                params = {str(k): v for k, v in cfg.get("game_params", ())}
            self._meta[game_id] = (games.make(game_id, **params), ckpt, budgets, params)
        return self._meta[game_id]

    def spec(self, game_id: str) -> env_pb2.GameSpec:
        """The `GameSpec` of a game as this server runs it (no compile needed)."""
        rt = self._runtimes.get(game_id)
        return rt.spec() if rt is not None else game_spec(self.info(game_id)[0])

    def describe(self, game_id: str) -> dict:
        """JSON summary of a game as this server runs it (no compile needed)."""
        rt = self._runtimes.get(game_id)
        return rt.describe() if rt is not None else describe_game(*self.info(game_id))
