"""Default planner settings per game (budgets, simulations, discount, network size)."""

from __future__ import annotations

import dataclasses

from planner.network import NetworkConfig
from planner.options import PlannerConfig

# Sizes chosen for CPU: small convs are slow and single-threaded on XLA:CPU while matmuls are
# fast, so the default trunk is a residual MLP on the flattened planes (measured ~20x faster than
# a 32-channel conv trunk at batch 64). `torso="conv"` gives AlphaZero's conv trunk (GPU); its
# Pac-Man stem has stride 2 to halve the 31x28 board.
_TORSO = dict(torso="mlp", channels=256, blocks=2)
_COMMITTED = {
    "pacman-rt-v0": dict(gamma=0.99, value_max=3000.0, stem_stride=2),
    "tetris-rt-v0": dict(gamma=0.99, value_max=3000.0, stem_stride=1),
    "snake-rt-v0": dict(gamma=0.997, value_max=200.0, stem_stride=1, q_scale=1.0),
}
# Clock games: option sets calibrated in the paper (appendix F); 1 simulation = 1 clock tick.
_CLOCK = {
    "speed-hex-v0": (2, 8, 32, 128),
    "speed-go-v0": (16, 32, 64, 96),
}
# Per-game trunks where a race measured better strength per CPU minute than the mlp: on 9x9 Go a
# 32-channel, 3-block conv trunk, at 3x the cost per iteration, beat the mlp head to head 0.95
# after 60 CPU minutes each (docs/results.md, "Strength per CPU minute").
_CLOCK_TORSO = {
    "speed-go-v0": dict(torso="conv", channels=32, blocks=3),
}


def default_config(game_id: str, **overrides) -> PlannerConfig:
    """The default `PlannerConfig` of a game; keyword overrides replace top-level fields."""
    if game_id in _COMMITTED:
        spec = _COMMITTED[game_id]
        net = NetworkConfig(
            **_TORSO,
            stem_stride=spec["stem_stride"],
            value_bins=101,
            value_max=spec["value_max"],
            time_input=True,
        )
        cfg = PlannerConfig(
            game_id=game_id,
            network=net,
            budgets=(1, 2, 3, 4),
            simulations=(32, 64, 96, 128),
            gamma=spec["gamma"],
            q_scale=spec.get("q_scale", 0.0),
        )
    elif game_id in _CLOCK:
        sims = _CLOCK[game_id]
        net = NetworkConfig(**{**_TORSO, **_CLOCK_TORSO.get(game_id, {})})
        cfg = PlannerConfig(game_id=game_id, network=net, budgets=sims, simulations=sims, gamma=1.0)
    else:
        import games

        games.game_class(game_id)  # raises UnknownGameError naming the known ids
        raise ValueError(f"no planner defaults for {game_id!r}")
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
    return PlannerConfig(**d)
