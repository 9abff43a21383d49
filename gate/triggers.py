"""State features recorded at each gate decision, to see what makes the gate think longer."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

import games
from games.tetris import NUM_ROWS, PIECE_NAMES

__all__ = ["FEATURES", "PIECE_NAMES", "trigger_features"]

#: Feature names per game, as `trigger_features` returns them.
FEATURES = {
    "pacman-rt-v0": ("ghost_distance", "frightened", "pellets_left"),
    "tetris-rt-v0": ("board_fill", "stack_height", "piece"),
    "snake-rt-v0": ("reachable_cells", "body_density", "length"),
}


def _pacman(state: games.State) -> dict[str, jax.Array]:
    env = state.inner.env
    player = jnp.stack([env.player_locations.x, env.player_locations.y])
    # Manhattan distance in maze cells to the nearest ghost (walls ignored).
    dist = jnp.abs(env.ghost_locations - player[None]).sum(-1).min()
    return {
        "ghost_distance": dist.astype(jnp.float32),
        "frightened": (env.frightened_state_time > 0).astype(jnp.float32),
        "pellets_left": env.pellets.astype(jnp.float32),
    }


def _tetris(state: games.State) -> dict[str, jax.Array]:
    board = state.inner.board  # [rows, cols] bool, row 0 at the top
    filled_rows = board.any(-1)
    top = jnp.where(filled_rows.any(), jnp.argmax(filled_rows), NUM_ROWS)
    return {
        "board_fill": board.mean().astype(jnp.float32),
        "stack_height": (NUM_ROWS - top).astype(jnp.float32),
        # The falling piece's index into `PIECE_NAMES`.
        "piece": state.inner.piece.astype(jnp.float32),
    }


def _snake(state: games.State) -> dict[str, jax.Array]:
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


_BY_GAME: dict[str, Callable] = {
    "pacman-rt-v0": _pacman,
    "tetris-rt-v0": _tetris,
    "snake-rt-v0": _snake,
}


def trigger_features(game_id: str) -> Callable[[games.State], dict[str, jax.Array]]:
    """`states [B] -> {name: [B] float32}` for a committed-action game (vmap it yourself or use
    on a batch: the returned function is already vmapped)."""
    if game_id not in _BY_GAME:
        raise ValueError(f"no trigger features for {game_id}: choose from {sorted(_BY_GAME)}")
    return jax.vmap(_BY_GAME[game_id])
