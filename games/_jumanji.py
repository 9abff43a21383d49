"""Adapter from a jumanji environment to the rtplan `Game` API."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from rtplan.games._core import Game, State, legal_or_any


@struct.dataclass
class JumanjiInner:
    """`State.inner` of a jumanji game."""

    env: object  # the jumanji environment state (its PRNG key included)
    last_action: jax.Array  # [] int32, the last action applied (-1 before the first)


class JumanjiGame(Game):
    """A jumanji environment behind the rtplan API; subclasses say how to read its state.

    jumanji reports its time limit as a termination (discount 0). We give jumanji a limit it
    never reaches (one frame past our horizon) and truncate at the horizon ourselves, so a
    jumanji `LAST` timestep always means the game ended by its rules.
    """

    def __init__(self, env, *, horizon: int) -> None:
        if horizon < 1:
            raise ValueError(f"horizon must be >= 1, got {horizon}")
        self.horizon = int(horizon)
        self._env = env

    # Subclass hooks ---------------------------------------------------------------------------

    def _observe(self, env_state) -> jax.Array:
        """Network planes `[*observation_shape]` float32 for a jumanji state."""
        raise NotImplementedError

    def observe(self, state: State) -> jax.Array:
        return self._observe(state.inner.env)

    # Game API ---------------------------------------------------------------------------------

    def init(self, key: jax.Array) -> State:
        env_state, timestep = self._env.reset(key)
        return State(
            inner=JumanjiInner(env=env_state, last_action=jnp.full((), -1, jnp.int32)),
            legal_action_mask=legal_or_any(timestep.observation.action_mask.astype(bool)),
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), bool),
            truncated=jnp.zeros((), bool),
            frame=jnp.zeros((), jnp.int32),
            current_player=jnp.zeros((), jnp.int32),
        )

    def _step(self, state: State, action: jax.Array) -> State:
        env_state, timestep = self._env.step(state.inner.env, action)
        return state.replace(
            inner=JumanjiInner(env=env_state, last_action=action),
            legal_action_mask=legal_or_any(timestep.observation.action_mask.astype(bool)),
            reward=jnp.asarray(timestep.reward, jnp.float32),
            terminated=timestep.last(),
            frame=state.frame + 1,
        )

    def rekey(self, state: State, key: jax.Array) -> State:
        inner = state.inner.replace(env=state.inner.env.replace(key=key))
        return state.replace(inner=inner)
