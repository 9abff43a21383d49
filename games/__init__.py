"""Real-time games as pure JAX functions: `make(id)` then `init`/`step` over a `State` pytree."""

from rtplan.games._core import (
    Board,
    Game,
    Kind,
    State,
    random_opening,
    random_opening_moves,
    tree_where,
)
from rtplan.games._registry import (
    ARROW_KEYS,
    GameRecord,
    PlannerDefaults,
    UnknownGameError,
    demo_games,
    game_class,
    game_record,
    key_map,
    kind_of,
    make,
    register,
    registered_games,
    resolve,
    unregister,
)
from rtplan.games.clock import UNLIMITED_CLOCK

__all__ = [
    "ARROW_KEYS",
    "Board",
    "Game",
    "GameRecord",
    "Kind",
    "PlannerDefaults",
    "State",
    "UNLIMITED_CLOCK",
    "UnknownGameError",
    "demo_games",
    "game_class",
    "game_record",
    "key_map",
    "kind_of",
    "make",
    "random_opening",
    "random_opening_moves",
    "register",
    "registered_games",
    "resolve",
    "tree_where",
    "unregister",
]
