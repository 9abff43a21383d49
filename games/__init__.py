"""Real-time games as pure JAX functions: `make(id)` then `init`/`step` over a `State` pytree."""

from games._core import Game, State, random_opening
from games._registry import UnknownGameError, game_class, make, registered_games
from games.clock import UNLIMITED_CLOCK

__all__ = [
    "Game",
    "State",
    "UNLIMITED_CLOCK",
    "UnknownGameError",
    "game_class",
    "make",
    "random_opening",
    "registered_games",
]
