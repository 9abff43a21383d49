"""Per-game jitted functions (init, frame step, reflex, batched step), one compile per process."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import jax.numpy as jnp

from rtplan import games
from rtplan.planner import Planner, PlannerConfig
from rtplan.server._frame_info import FrameInfo


@dataclasses.dataclass(frozen=True)
class _Fns:
    game: games.Game
    planner: Planner | None
    init: Any  # (key) -> state
    info: Any  # (params, state) -> FrameInfo
    frame: Any  # (params, state, action, cost, credit) -> (state, FrameInfo)
    observe: Any  # (state) -> [*obs] float32
    set_clock: Any  # clock games: (state, initial ticks) -> state; None otherwise
    frames: Any  # (params, states [C], actions [C], live [C]) -> (states, FrameInfo [C])
    put: Any  # (states [C], slot, state) -> states with row `slot` replaced
    serve: Any  # (state) -> `Game.served_state(state)`: what the planner gets in real time


@functools.lru_cache(maxsize=16)
def compiled(game_id: str, game_params: tuple = (), cfg: PlannerConfig | None = None) -> _Fns:
    """Jitted batch-1 functions of one game (and network); cached so every session and every
    server of the process shares one compile per game.

    Args:
        game_id: registered id.
        game_params: the game's settings as sorted (name, value) pairs.
        cfg: a planner config (its `game_params` must equal `game_params`) for the reflex, or
            None for a game without a network.
    """
    planner = Planner(cfg) if cfg is not None else None
    game = planner.game if planner is not None else games.make(game_id, **dict(game_params))
    clock = games.kind_of(game) is games.Kind.CLOCK

    def info(params, state) -> FrameInfo:
        if planner is None:
            reflex = served_reflex = jnp.int32(-1)
        else:
            batch = jax.tree.map(lambda x: x[None], state)
            logits = planner.evaluate(params, batch).logits
            reflex = planner.masked_argmax(logits, batch.legal_action_mask)[0]
            # Real time: the move without search a served side plays (`Game.served_state`).
            served = jax.vmap(game.served_mask)(batch)
            served_reflex = planner.masked_argmax(logits, served)[0]
        if clock:
            rewards, clocks = state.inner.rewards, state.inner.clocks
        else:
            rewards, clocks = state.reward[None], jnp.zeros((0,), jnp.int32)
        return FrameInfo(
            frame=state.frame,
            reward=state.reward,
            rewards=rewards,
            terminated=state.terminated,
            truncated=state.truncated,
            current_player=state.current_player,
            legal=state.legal_action_mask,
            clocks=clocks,
            fallback=game.fallback_action(state),
            reflex=reflex,
            served_reflex=served_reflex,
        )

    def frame(params, state, action, cost, credit):
        nxt = game.step(state, action, cost, credit) if clock else game.step(state, action, cost)
        return nxt, info(params, nxt)

    def frames(params, states, actions, live):
        # The batch-1 frame, vmapped: each row computes what `frame` computes for it alone
        # (tests/server/test_server_batch.py checks the frames match exactly). Rows not `live` are
        # padding: they keep their state.
        zero = jnp.int32(0)
        step = jax.vmap(frame, in_axes=(None, 0, 0, None, None))
        nxt, infos = step(params, states, actions, zero, zero)

        def keep(new, old):
            return jnp.where(live.reshape(live.shape + (1,) * (new.ndim - 1)), new, old)

        return jax.tree.map(keep, nxt, states), infos

    def put(states, slot, state):
        return jax.tree.map(lambda b, x: b.at[slot].set(x), states, state)

    return _Fns(
        game=game,
        planner=planner,
        init=jax.jit(game.init),
        info=jax.jit(info),
        frame=jax.jit(frame),
        observe=jax.jit(game.observe),
        set_clock=jax.jit(game.set_initial_time) if clock else None,
        # A join donates the batch: its put reuses the buffers instead of copying every row
        # (`TickGroup` re-points the rows its members read: `_Rows.moved`).
        frames=jax.jit(frames),
        put=jax.jit(put, donate_argnums=0),
        serve=jax.jit(game.served_state),
    )
