"""Per-game state features recorded at each gate decision (the records' `features`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from rtplan.games._core import State
from rtplan.games.tetris import NUM_ROWS


def pacman(state: State) -> dict[str, jax.Array]:
    """Pac-Man: nearest ghost (maze cells), frightened or not, pellets left."""
    env = state.inner.env
    player = jnp.stack([env.player_locations.x, env.player_locations.y])
    # Manhattan distance in maze cells to the nearest ghost (walls ignored).
    dist = jnp.abs(env.ghost_locations - player[None]).sum(-1).min()
    return {
        "ghost_distance": dist.astype(jnp.float32),
        "frightened": (env.frightened_state_time > 0).astype(jnp.float32),
        "pellets_left": env.pellets.astype(jnp.float32),
    }


def tetris(state: State) -> dict[str, jax.Array]:
    """Tetris: fraction of the board filled, stack height, the falling piece."""
    board = state.inner.board  # [rows, cols] bool, row 0 at the top
    filled_rows = board.any(-1)
    top = jnp.where(filled_rows.any(), jnp.argmax(filled_rows), NUM_ROWS)
    return {
        "board_fill": board.mean().astype(jnp.float32),
        "stack_height": (NUM_ROWS - top).astype(jnp.float32),
        # The falling piece's index into `PIECE_NAMES`.
        "piece": state.inner.piece.astype(jnp.float32),
    }


def snake(state: State) -> dict[str, jax.Array]:
    """Snake: cells reachable from the head, body density around the head, length."""
    env = state.inner.env
    body = env.body
    rows, cols = body.shape
    free = ~body
    head = jnp.zeros_like(body).at[env.head_position.row, env.head_position.col].set(True)

    def grow(reach):
        up = jnp.pad(reach[1:], ((0, 1), (0, 0)))
        down = jnp.pad(reach[:-1], ((1, 0), (0, 0)))
        left = jnp.pad(reach[:, 1:], ((0, 0), (0, 1)))
        right = jnp.pad(reach[:, :-1], ((0, 0), (1, 0)))
        return reach | ((up | down | left | right) & free)

    # Uncapped flood fill from the head through free cells, until it stops growing.
    reach = jax.lax.while_loop(
        lambda c: jnp.any(c[0] != c[1]),
        lambda c: (grow(c[0]), c[0]),
        (grow(head), head),
    )[0]
    r, c = env.head_position.row, env.head_position.col
    window = jax.lax.dynamic_slice(
        jnp.pad(body, 2, constant_values=True), (r, c), (5, 5)
    )  # 5x5 around the head; walls count as occupied
    return {
        "reachable_cells": ((reach & free).sum()).astype(jnp.float32),
        "body_density": ((window.sum() - 1) / 24.0).astype(jnp.float32),
        "length": env.length.astype(jnp.float32),
    }
