"""JSON-able frame summaries of game states, for the viewer, replays and logs (never jitted)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from rtplan.games._core import Game, State
from rtplan.games._registry import game_record, key_map, resolve

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
    frame.update(resolve(game_record(game.id).render)(game, state))
    return frame


def _rows(cells: np.ndarray) -> list[str]:
    return ["".join(row) for row in cells]


def pacman_frame(game: Game, state: State) -> dict[str, Any]:
    """Pac-Man: maze, pellets, player and ghost cells, fright ticks, score."""
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


def snake_frame(game: Game, state: State) -> dict[str, Any]:
    """Snake: body, head and fruit cells, length, score."""
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


def tetris_frame(game: Game, state: State) -> dict[str, Any]:
    """Tetris: locked cells, the falling piece and its cells, score, lines."""
    from rtplan.games.tetris import PIECE_NAMES, piece_cells

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


def board_frame(game: Game, state: State) -> dict[str, Any]:
    """Clock games: stones by colour, clocks, the last move's rewards, loss on time."""
    s = state.inner
    obs = np.asarray(s.board.observation)
    me = int(obs[0, 0, game.colour_plane])  # colour of the player to move
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


def describe_view(game: Game) -> dict[str, Any]:
    """How a page shows and takes input for `game`: part of the session's game description.

    Returns:
        A JSON-able dict: ``module`` (the page's ``web/games/<module>.js``, or None for the
        generic grid renderer), ``input`` ("keys" or "click"), ``keys`` (keyboard key ->
        action), ``buffer`` (a person's illegal key waits for the first frame where it is
        legal), ``board`` (None, or ``columns`` and ``rows`` labels and the ``actions`` of
        each cell, row 0 at the top), ``colour_names`` (by colour; empty in one-player
        games) and ``goal_edges`` (by colour, "rows" or "columns": the edges that colour's
        chain joins to win; empty but in connection games).
    """
    record = game_record(game.id)
    board = game.board
    return {
        "module": record.view,
        "input": "keys" if record.keys is not None else "click",
        "keys": key_map(game.id),
        "buffer": record.buffer_turns,
        "board": None
        if board is None
        else {
            "columns": list(board.columns),
            "rows": list(board.rows),
            "actions": [list(row) for row in board.actions],
        },
        "colour_names": list(game.colour_names),
        "goal_edges": list(game.goal_edges),
    }
