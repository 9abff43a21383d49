"""Real-time Pac-Man: jumanji `PacMan-v1`, one step per frame, ghosts move every frame."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jumanji.environments.routing.pac_man import PacMan as _JumanjiPacMan

from rtplan.games._core import State
from rtplan.games._jumanji import JumanjiGame

#: jumanji's frightened (power pellet) duration in frames; used to scale the frightened plane.
FRIGHTENED_FRAMES = 30


class PacMan(JumanjiGame):
    """Real-time Pac-Man (`pacman-rt-v0`) on jumanji's 31x28 maze, used as a pip dependency.

    - Observation `[31, 28, 6]` float32 planes: walkable cells, Pac-Man, number of ghosts per
      cell, remaining pellets, remaining power pellets, and the frightened time left / 30 on
      every cell. (jumanji parks eaten pellets at cell (0, 0), a wall; masking with the walkable
      plane keeps them off the board, unlike the reference encoding.)
    - Actions: 0 up, 1 right, 2 down, 3 left, 4 no-op (stand still). The legal mask is
      jumanji's: the four moves that do not hit a wall; the no-op is never legal for the agent.
    - Reward: pellet +10, power pellet +50, frightened ghost +200 (once per ghost).
    - Termination: Pac-Man dies or eats every pellet. Truncation: `horizon` frames (default
      1000; the reference's vendored jumanji 1.1.1 ignored `time_limit`, 1.1.2 honours it).
    - Fallback: keep going in the last direction (an arcade stick left alone); into a wall this
      is a no-op by jumanji's rules. Before the first move the last direction is "up".
    - Chance: the state's key breaks the ghosts' ties at intersections.
    """

    id = "pacman-rt-v0"
    fallback_description = "keep the last direction (into a wall: stand still)"
    num_actions = 5
    action_names = ("up", "right", "down", "left", "noop")

    def __init__(self, *, horizon: int = 1000) -> None:
        super().__init__(_JumanjiPacMan(time_limit=int(horizon) + 1), horizon=horizon)
        self._rows, self._cols = 31, 28
        self.observation_shape = (self._rows, self._cols, 6)

    def _observe(self, env_state) -> jax.Array:
        s = env_state
        walkable = s.grid.astype(jnp.float32)
        zeros = jnp.zeros((self._rows, self._cols), jnp.float32)
        # Player positions are (x=row, y=col); item and ghost lists hold [col, row] pairs.
        player = zeros.at[s.player_locations.x, s.player_locations.y].set(1.0)
        ghosts = zeros.at[s.ghost_locations[:, 1], s.ghost_locations[:, 0]].add(1.0)
        pellets = zeros.at[s.pellet_locations[:, 1], s.pellet_locations[:, 0]].set(1.0) * walkable
        power = zeros.at[s.power_up_locations[:, 1], s.power_up_locations[:, 0]].set(1.0)
        power = power * walkable
        frightened = jnp.full_like(zeros, jnp.maximum(s.frightened_state_time, 0))
        frightened = frightened / FRIGHTENED_FRAMES
        return jnp.stack([walkable, player, ghosts, pellets, power, frightened], axis=-1)

    def fallback_action(self, state: State) -> jax.Array:
        return jnp.asarray(state.inner.env.last_direction, jnp.int32)
