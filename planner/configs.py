"""A game's default planner settings, built from the plain values of its registry record."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

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


def with_budgets(cfg: PlannerConfig, budgets: Sequence[int]) -> PlannerConfig:
    """`cfg` with more budgets (`--budgets` of `rtplan eval`, `counterfactual`, `train-gate`),
    for a committed game's fixed-k curve past the checkpoint's own and a gate that chooses
    among them: the network does not depend on the budgets, so a larger k is only another
    option. Each new k searches at the checkpoint's simulations per frame (32 per
    frame: k8 searches 256), and the checkpoint's own budgets keep their simulations exactly,
    so their always-k play is the same game under either config.

    The new budgets are a superset of the checkpoint's: "k3" stays the condition it names
    without the flag, and a file of it is the same with or without.

    Args:
        cfg: a committed game's planner checkpoint config, whose simulations are one whole
            number per frame of every budget.
        budgets: ascending, distinct, >= 1 frame, holding every budget of `cfg`.

    Raises:
        ValueError: a clock game, a budget below 1, budgets out of order or repeated, one of
            the checkpoint's budgets left out, or simulations that are not one whole number
            per frame.
    """
    budgets = tuple(int(k) for k in budgets)
    if games.kind_of(cfg.game_id) is games.Kind.CLOCK:
        raise ValueError(
            f"{cfg.game_id} is a clock game: its budgets are its planner's simulation counts, "
            "charged to a clock, not frames (--budgets is for committed-action games)"
        )
    if not budgets or min(budgets) < 1:
        raise ValueError(f"budgets must be >= 1 frame each, got {list(budgets)}")
    if list(budgets) != sorted(set(budgets)):
        raise ValueError(f"budgets must be ascending and distinct, got {list(budgets)}")
    left_out = sorted(set(cfg.budgets) - set(budgets))
    if left_out:
        raise ValueError(
            f"budgets {list(budgets)} leave out the checkpoint's {left_out}: give all of "
            f"{list(cfg.budgets)} and larger ones, so each always-k condition keeps its meaning"
        )
    per_frame = {s // k if s % k == 0 else None for k, s in zip(cfg.budgets, cfg.simulations)}
    if len(per_frame) != 1 or None in per_frame:
        raise ValueError(
            f"the checkpoint's simulations {list(cfg.simulations)} are not one whole number per "
            f"frame of its budgets {list(cfg.budgets)}: a new budget has none to search at"
        )
    (sims,) = per_frame  # so the checkpoint's own budgets keep theirs: sims * k
    return dataclasses.replace(cfg, budgets=budgets, simulations=tuple(sims * k for k in budgets))


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
