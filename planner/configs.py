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


#: The fields of a `PlannerConfig` that set the rules of play rather than the network or the
#: search budgets: what an option's committed frames play and the frames of every edge below the
#: search's root. A checkpoint records its own; evaluation, the counterfactual values and gate
#: training may play it under others (`with_rules`), and a gate plays under those it was
#: trained under.
RULES = ("committed", "tree_k")


def rules_of(cfg: PlannerConfig) -> dict:
    """`{"committed": ..., "tree_k": ...}`: the `RULES` a config plays under."""
    return {name: getattr(cfg, name) for name in RULES}


def with_rules(
    cfg: PlannerConfig,
    *,
    committed: str | None = None,
    tree_k: int | None = None,
    plan_needs_tree: bool = False,
) -> PlannerConfig:
    """`cfg` played under other rules (`rtplan eval`, `counterfactual` and `train-gate`'s
    `--committed` and `--tree-k`): each given one replaces the config's own (None keeps it).

    Args:
        cfg: a planner checkpoint's config.
        committed: "reflex" or "plan" (`planner.options.COMMITMENTS`), or None.
        tree_k: the frames of every edge below the root (>= 0), or None.
        plan_needs_tree: refuse "plan" under tree_k 0. Such a tree's edges below the root are
            the option's own k-1 reflex frames and then its action, so at a fixed k its plan
            commits the next option to exactly the reflex: measuring or training on it measures
            the reflex again (evaluation allows it, to show that).

    Raises:
        ValueError: an unknown commitment, a negative tree_k, or (with `plan_needs_tree`)
            "plan" under tree_k 0.
    """
    given = {"committed": committed, "tree_k": tree_k}
    cfg = dataclasses.replace(cfg, **{k: v for k, v in given.items() if v is not None})
    if plan_needs_tree and cfg.committed == "plan" and cfg.tree_k == 0:
        raise ValueError(
            'committed "plan" needs tree_k >= 1 (--tree-k 1): under tree_k 0 a plan is the '
            "tree's reflex frames, so at a fixed k it plays exactly the reflex"
        )
    return cfg


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
