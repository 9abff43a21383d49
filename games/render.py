"""JSON-able frame summaries of game states, for the viewer, replays and logs (never jitted)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from games._core import Game, State

# Cell characters shared by every board: the viewer draws them.
EMPTY, WALL, PELLET, POWER, LOCKED = " ", "#", ".", "o", "#"
BODY, HEAD, FRUIT = "s", "S", "*"
STONE = ("x", "o")  # colour 0 (pgx black / first colour), colour 1


def render(game: Game, state: State) -> dict[str, Any]:
    """Summarises one unbatched state as a small JSON-able dict.

    Args:
        game: the game that produced `state`.
        state: an unbatched state (no leading batch axis).

    Returns:
        A dict with the common keys ``game, frame, reward, terminated, truncated, to_play``,
        ``board`` (a list of equal-length strings, one per row) and game-specific keys.
    """
    state = jax.device_get(state)
    if np.ndim(state.frame) != 0:
        raise ValueError(f"render takes one state, got a batch of shape {np.shape(state.frame)}")
    frame = {
        "game": game.id,
        "frame": int(state.frame),
        "reward": float(state.reward),
        "terminated": bool(state.terminated),
        "truncated": bool(state.truncated),
        "to_play": int(state.current_player),
    }
    renderer = _RENDERERS.get(game.id)
    if renderer is None:
        raise ValueError(f"no renderer for game {game.id!r}")
    frame.update(renderer(game, state))
    return frame


def _rows(cells: np.ndarray) -> list[str]:
    return ["".join(row) for row in cells]


def _pacman(game: Game, state: State) -> dict[str, Any]:
    s = state.inner.env
    cells = np.where(np.asarray(s.grid) == 1, EMPTY, WALL).astype("<U1")
    obs = np.asarray(game.observe(state))
    cells[obs[..., 3] > 0] = PELLET
    cells[obs[..., 4] > 0] = POWER
    ghosts = np.asarray(s.ghost_locations)
    return {
        "board": _rows(cells),
        "player": [int(s.player_locations.x), int(s.player_locations.y)],
        "ghosts": [[int(c[1]), int(c[0])] for c in ghosts],
        "frightened": int(max(int(s.frightened_state_time), 0)),
        "score": int(s.score),
        "pellets": int(s.pellets),
    }


def _snake(game: Game, state: State) -> dict[str, Any]:
    s = state.inner.env
    body = np.asarray(s.body)
    cells = np.where(body, BODY, EMPTY).astype("<U1")
    head = (int(s.head_position.row), int(s.head_position.col))
    fruit = (int(s.fruit_position.row), int(s.fruit_position.col))
    cells[fruit] = FRUIT
    if 0 <= head[0] < body.shape[0] and 0 <= head[1] < body.shape[1]:
        cells[head] = HEAD
    return {
        "board": _rows(cells),
        "head": list(head),
        "fruit": list(fruit),
        "length": int(s.length),
        "score": int(s.length) - 1,
    }


def _tetris(game: Game, state: State) -> dict[str, Any]:
    from games.tetris import PIECE_NAMES, piece_cells

    s = state.inner
    cells = np.where(np.asarray(s.board), LOCKED, EMPTY).astype("<U1")
    piece = [[int(r), int(c)] for r, c in piece_cells(s)]
    return {
        "board": _rows(cells),
        "piece": PIECE_NAMES[int(s.piece)],
        "piece_cells": piece,
        "score": int(s.score),
        "lines": int(s.lines),
    }


def _clock(game: Game, state: State) -> dict[str, Any]:
    s = state.inner
    obs = np.asarray(s.board.observation)
    colour_plane = 2 if game.id == "speed-hex-v0" else obs.shape[-1] - 1
    me = int(obs[0, 0, colour_plane])  # colour of the player to move
    cells = np.full(obs.shape[:2], ".", "<U1")
    cells[obs[..., 0] > 0] = STONE[me]
    cells[obs[..., 1] > 0] = STONE[1 - me]
    return {
        "board": _rows(cells),
        "to_play_colour": me,
        "clocks": [int(c) for c in np.asarray(s.clocks)],
        "initial_time": int(s.initial_time),
        "rewards": [float(r) for r in np.asarray(s.rewards)],
        "timed_out": bool(s.timed_out),
    }


_RENDERERS = {
    "pacman-rt-v0": _pacman,
    "snake-rt-v0": _snake,
    "tetris-rt-v0": _tetris,
    "speed-hex-v0": _clock,
    "speed-go-v0": _clock,
}
