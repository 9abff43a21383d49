"""Registry of versioned game ids."""

from __future__ import annotations

import importlib
from typing import Any

from games._core import Game

# id -> (module, class). Modules are imported lazily so `import games` stays cheap.
_REGISTRY: dict[str, tuple[str, str]] = {
    "pacman-rt-v0": ("games.pacman", "PacMan"),
    "snake-rt-v0": ("games.snake", "Snake"),
    "tetris-rt-v0": ("games.tetris", "Tetris"),
    "speed-hex-v0": ("games.hex", "SpeedHex"),
    "speed-go-v0": ("games.go", "SpeedGo"),
}


class UnknownGameError(ValueError):
    """Raised for a game id that is not registered."""


def registered_games() -> tuple[str, ...]:
    """All registered game ids, sorted."""
    return tuple(sorted(_REGISTRY))


def game_class(game_id: str) -> type[Game]:
    """The class registered under `game_id`."""
    if game_id not in _REGISTRY:
        known = ", ".join(registered_games())
        raise UnknownGameError(f"unknown game {game_id!r}; registered games: {known}")
    module, name = _REGISTRY[game_id]
    return getattr(importlib.import_module(module), name)


def make(game_id: str, **params: Any) -> Game:
    """Builds a game.

    Args:
        game_id: a registered id such as ``"tetris-rt-v0"``.
        **params: the game's static settings (keyword-only arguments of its class), e.g.
            ``horizon=500`` or ``initial_time=300, timeout="strict"``.

    Returns:
        The game object.

    Raises:
        UnknownGameError: `game_id` is not registered.
        TypeError: a setting the game does not have.
    """
    return game_class(game_id)(**params)
