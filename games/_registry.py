"""Registry of versioned game ids: one record per game, holding what every layer needs of it."""

from __future__ import annotations

import dataclasses
import importlib
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from rtplan.games._core import Game, Kind


@dataclasses.dataclass(frozen=True)
class PlannerDefaults:
    """A game's default planner settings, as plain values (games may not import the planner:
    `planner.configs.default_config` builds the `PlannerConfig` from these)."""

    #: Option budgets K, in the planner's units (frames per option, or clock ticks).
    budgets: tuple[int, ...]
    #: MCTS simulations of each budget.
    simulations: tuple[int, ...]
    #: Discount per frame (1.0 in the two-player games, which pay only at the end).
    gamma: float
    #: Scale of the completed-Q transform's value normalisation (0: mctx's min-max).
    q_scale: float = 0.0
    #: `planner.network.NetworkConfig` fields over the planner's default trunk.
    network: Mapping[str, Any] = dataclasses.field(default_factory=dict)


#: Arrow keys and WASD by the action names of the maze games.
ARROW_KEYS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "up": ("ArrowUp", "w"),
        "right": ("ArrowRight", "d"),
        "down": ("ArrowDown", "s"),
        "left": ("ArrowLeft", "a"),
        "noop": ("n",),
    }
)


@dataclasses.dataclass(frozen=True)
class GameRecord:
    """Everything the layers above need of one game; adding a game is adding one record.

    References to code are ``"module:name"`` strings, imported on first use so that
    `import games` stays cheap, or the object itself (a game defined in a test).
    """

    #: The `Game` subclass.
    game: str | type[Game]
    #: `(game, state) -> dict` of the game-specific keys of a rendered frame (`games.render`);
    #: it must hold ``"board"``, a list of equal-length strings, one per row.
    render: str | Callable[..., dict[str, Any]]
    #: The page's drawing module, ``web/games/<view>.js``; None: the generic grid renderer,
    #: which draws each character of ``"board"`` as a cell.
    view: str | None = None
    #: Keyboard keys (`KeyboardEvent.key`) by action name for a person playing on the watch
    #: page; the first action a key names wins. None: the person clicks cells of `Game.board`.
    keys: Mapping[str, tuple[str, ...]] | None = None
    #: A person's key that is illegal when its frame is decided waits and applies at the first
    #: frame where it is legal (Pac-Man's turn at the next junction), instead of being refused.
    buffer_turns: bool = False
    #: Frame keys the headless demo prints after each move (`rtplan.demo.frame_line`).
    summary: tuple[str, ...] = ("score",)
    #: Default planner settings; None: the game has no planner defaults.
    planner: PlannerDefaults | None = None
    #: `state -> {name: [] float32}` recorded at each gate decision (`gate.committed.triggers`);
    #: None: no trigger features.
    features: str | Callable[..., dict[str, Any]] | None = None
    #: The names `features` returns, in report order.
    feature_names: tuple[str, ...] = ()
    #: Entropy coefficient of gate training (the paper's per-game value).
    gate_entropy: float = 0.01
    #: Rank among the web demo's games (0 is tried first, and a game is chosen only if it
    #: ships a gate); None: not a demo game.
    demo: int | None = None
    #: The web demo's game when no demo game ships a gate (exactly one record says so).
    demo_without_gate: bool = False

    @property
    def kind(self) -> Kind:
        """The game's kind, as its class says (`Game.kind`); imports the class."""
        return resolve(self.game).kind


def _keys(**keys: tuple[str, ...]) -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType(keys)


# Modules are imported lazily so `import games` stays cheap.
_REGISTRY: dict[str, GameRecord] = {
    "pacman-rt-v0": GameRecord(
        game="rtplan.games.pacman:PacMan",
        render="rtplan.games.render:pacman_frame",
        view="pacman",
        keys=ARROW_KEYS,
        buffer_turns=True,
        planner=PlannerDefaults(
            budgets=(1, 2, 3, 4),
            simulations=(32, 64, 96, 128),
            gamma=0.99,
            network={"stem_stride": 2, "value_bins": 101, "value_max": 3000.0, "time_input": True},
        ),
        features="rtplan.games._features:pacman",
        feature_names=("ghost_distance", "frightened", "pellets_left"),
        demo=2,
    ),
    "snake-rt-v0": GameRecord(
        game="rtplan.games.snake:Snake",
        render="rtplan.games.render:snake_frame",
        view="snake",
        keys=ARROW_KEYS,
        planner=PlannerDefaults(
            budgets=(1, 2, 3, 4),
            simulations=(32, 64, 96, 128),
            gamma=0.997,
            q_scale=1.0,
            network={"stem_stride": 1, "value_bins": 101, "value_max": 200.0, "time_input": True},
        ),
        features="rtplan.games._features:snake",
        feature_names=("reachable_cells", "body_density", "length"),
        gate_entropy=0.05,
        demo=1,
        demo_without_gate=True,
    ),
    "tetris-rt-v0": GameRecord(
        # Tetris first among the demo games: its shipped gate switches budgets; Snake's and
        # Pac-Man's keep their best fixed k.
        game="rtplan.games.tetris:Tetris",
        render="rtplan.games.render:tetris_frame",
        view="tetris",
        # ArrowUp rotates and ArrowDown drops (the first action a key names wins).
        keys=_keys(
            left=("ArrowLeft", "a"),
            right=("ArrowRight", "d"),
            rotate_cw=("ArrowUp", "x", "w"),
            rotate_ccw=("z", "q"),
            hard_drop=(" ", "ArrowDown", "s"),
            noop=("n",),
        ),
        summary=("score", "lines", "piece"),
        planner=PlannerDefaults(
            budgets=(1, 2, 3, 4),
            simulations=(32, 64, 96, 128),
            gamma=0.99,
            network={"stem_stride": 1, "value_bins": 101, "value_max": 3000.0, "time_input": True},
        ),
        features="rtplan.games._features:tetris",
        feature_names=("board_fill", "stack_height", "piece"),
        demo=0,
    ),
    # Clock games: option sets calibrated in the paper (appendix F); 1 simulation = 1 tick.
    "speed-hex-v0": GameRecord(
        game="rtplan.games.hex:SpeedHex",
        render="rtplan.games.render:board_frame",
        view="speed-hex",
        summary=("to_play", "clocks"),
        planner=PlannerDefaults(budgets=(2, 8, 32, 128), simulations=(2, 8, 32, 128), gamma=1.0),
    ),
    "speed-go-v0": GameRecord(
        game="rtplan.games.go:SpeedGo",
        render="rtplan.games.render:board_frame",
        view="speed-go",
        summary=("to_play", "clocks"),
        planner=PlannerDefaults(
            budgets=(16, 32, 64, 96),
            simulations=(16, 32, 64, 96),
            gamma=1.0,
            # On 9x9 Go a 32-channel, 3-block conv trunk, at 3x the cost per iteration, beat
            # the mlp head to head 0.95 after 60 CPU minutes each (docs/results.md, "Strength
            # per CPU minute").
            network={"torso": "conv", "channels": 32, "blocks": 3},
        ),
    ),
}


class UnknownGameError(ValueError):
    """Raised for a game id that is not registered."""


def registered_games() -> tuple[str, ...]:
    """All registered game ids, sorted."""
    return tuple(sorted(_REGISTRY))


def register(game_id: str, record: GameRecord) -> None:
    """Adds a game (its class's `id` must be `game_id`); a second record for an id is refused.

    The shipped games are listed in this module; `register` is for games defined elsewhere
    (tests). Undo it with `unregister`.
    """
    if game_id in _REGISTRY:
        raise ValueError(f"game {game_id!r} is already registered")
    _REGISTRY[game_id] = record


def unregister(game_id: str) -> None:
    """Removes a game added by `register`."""
    game_record(game_id)
    del _REGISTRY[game_id]


def game_record(game_id: str) -> GameRecord:
    """The record registered under `game_id`.

    Raises:
        UnknownGameError: `game_id` is not registered.
    """
    if game_id not in _REGISTRY:
        known = ", ".join(registered_games())
        raise UnknownGameError(f"unknown game {game_id!r}; registered games: {known}")
    return _REGISTRY[game_id]


#: Held while a record's module is imported: a server builds games on worker threads, and two
#: threads importing game modules that share imports (jumanji's) at once could meet in
#: Python's per-module import locks (a `_DeadlockError` in one of them).
_IMPORTING = threading.RLock()


def resolve(ref: str | Any) -> Any:
    """The object a record field refers to: ``"module:name"`` imported (one thread at a time),
    anything else as is."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    with _IMPORTING:
        return getattr(importlib.import_module(module), name)


def game_class(game_id: str) -> type[Game]:
    """The class registered under `game_id`."""
    return resolve(game_record(game_id).game)


def kind_of(game: str | Game | type[Game]) -> Kind:
    """The kind of a game, the one answer to "is this a clock game?".

    Args:
        game: a registered id, a game, or a game class.

    Raises:
        UnknownGameError: an id that is not registered.
    """
    if isinstance(game, str):
        return game_record(game).kind
    return game.kind


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


def key_map(game_id: str) -> dict[str, int]:
    """Keyboard key -> action index for a person playing `game_id` (empty: a click game)."""
    keys = game_record(game_id).keys or {}
    out: dict[str, int] = {}
    for action, name in enumerate(game_class(game_id).action_names):
        for key in keys.get(name, ()):
            out.setdefault(key, action)
    return out


def demo_games() -> tuple[str, ...]:
    """The web demo's candidate games, best first (their records' `demo` rank)."""
    ranked = [(r.demo, gid) for gid, r in _REGISTRY.items() if r.demo is not None]
    return tuple(gid for _, gid in sorted(ranked))
