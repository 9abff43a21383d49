"""Snake: jumanji `Snake-v1` on a 12x12 board, one step per frame."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jumanji.environments.routing.snake import Snake as _JumanjiSnake

from rtplan.games._core import State
from rtplan.games._jumanji import JumanjiGame


class Snake(JumanjiGame):
    """Snake (`snake-rt-v0`): jumanji `Snake-v1`, used as a pip dependency.

    - Observation `[rows, cols, 5]` float32: jumanji's planes (body, head, tail, fruit,
      normalised body order).
    - Actions: 0 up, 1 right, 2 down, 3 left (no no-op: the snake always moves).
    - Legal mask: jumanji's, the moves that hit neither a wall nor the body. When the snake is
      trapped every move kills it; the mask is then all True so it is never empty while the
      game runs.
    - Reward: +1 per fruit. Termination: a move into a wall or the body, or a full board.
      Truncation: `horizon` frames (default 4000).
    - Fallback: keep the current direction (the last action applied). Before the first move
      there is no direction yet: the first legal move in the order up, right, down, left.
    - Chance: the state's key places each new fruit.
    """

    id = "snake-rt-v0"
    fallback_description = "keep the current direction"
    num_actions = 4
    action_names = ("up", "right", "down", "left")

    def __init__(self, *, horizon: int = 4000, num_rows: int = 12, num_cols: int = 12) -> None:
        env = _JumanjiSnake(num_rows=num_rows, num_cols=num_cols, time_limit=int(horizon) + 1)
        super().__init__(env, horizon=horizon)
        self.observation_shape = (num_rows, num_cols, 5)

    def _observe(self, env_state) -> jax.Array:
        # The same planes as jumanji's observation grid, built from the state.
        s = env_state
        rows = jnp.arange(s.body.shape[0])[:, None]
        cols = jnp.arange(s.body.shape[1])[None, :]
        head = (rows == s.head_position.row) & (cols == s.head_position.col)
        fruit = (rows == s.fruit_position.row) & (cols == s.fruit_position.col)
        order = s.body_state / jnp.maximum(1, s.body_state.max())
        planes = [s.body, head, s.tail, fruit, order]
        return jnp.stack([p.astype(jnp.float32) for p in planes], axis=-1)

    def fallback_action(self, state: State) -> jax.Array:
        first_legal = jnp.argmax(state.legal_action_mask).astype(jnp.int32)
        last = state.inner.last_action
        return jnp.where(last >= 0, last, first_legal)
