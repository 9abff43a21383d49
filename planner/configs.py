"""A game's default planner settings, built from the plain values of its registry record."""

from __future__ import annotations

import dataclasses

from rtplan import games
from rtplan.planner.network import NetworkConfig
from rtplan.planner.options import PlannerConfig

# Sizes chosen for CPU: small convs are slow and single-threaded on XLA:CPU while matmuls are
# fast, so the default trunk is a residual MLP on the flattened planes (measured ~20x faster than
# a 32-channel conv trunk at batch 64). `torso="conv"` gives AlphaZero's conv trunk (GPU); its
# Pac-Man stem has stride 2 to halve the 31x28 board.
_TORSO = dict(torso="mlp", channels=256, blocks=2)


def default_config(game_id: str, **overrides) -> PlannerConfig:
    """The default `PlannerConfig` of a game, from its registry record's `planner` defaults;
    keyword overrides replace top-level fields.

    Raises:
        UnknownGameError: `game_id` is not registered.
        ValueError: the game's record has no planner defaults.
    """
    spec = games.game_record(game_id).planner
    if spec is None:
        raise ValueError(f"no planner defaults for {game_id!r}: its registry record has none")
    cfg = PlannerConfig(
        game_id=game_id,
        network=NetworkConfig(**{**_TORSO, **spec.network}),
        budgets=tuple(spec.budgets),
        simulations=tuple(spec.simulations),
        gamma=spec.gamma,
        q_scale=spec.q_scale,
    )
    return dataclasses.replace(cfg, **overrides)


def config_to_dict(cfg: PlannerConfig) -> dict:
    """JSON-able form of a config (for checkpoint metadata)."""
    return dataclasses.asdict(cfg)


def config_from_dict(d: dict) -> PlannerConfig:
    """Inverse of `config_to_dict`."""
    d = dict(d)
    d["network"] = NetworkConfig(**d["network"])
    for key in ("budgets", "simulations"):
        d[key] = tuple(d[key])
    d["game_params"] = tuple(tuple(p) for p in d.get("game_params", ()))
    # A checkpoint from before `committed` existed played the reflex on its committed frames.
    d.setdefault("committed", "reflex")
    return PlannerConfig(**d)
