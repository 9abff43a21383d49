"""Settings of one planner training run (`rtplan train-planner`'s flags); imports no JAX."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from rtplan.harness.config import knob

if TYPE_CHECKING:
    from rtplan import games
    from rtplan.planner.options import PlannerConfig

# The game and planner modules load JAX, so the properties import them when called: the CLI
# builds its flags from this class before `--devices` sets XLA's flags.


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (planner shape overrides included)."""

    game_id: str = knob(help="Registered game id.")
    iterations: int = knob(1000, "Training iterations (collect + learn) of the whole run.")
    batch: int = knob(64, "Games played in parallel (split across devices).")
    unroll: int = knob(16, "Decisions per game per iteration.")
    train_k: int | None = knob(
        None,
        "Option budget of the collected decisions; None: 1 (committed), the budget nearest 32 "
        "simulations (clock).",
    )
    sims_per_frame: int | None = knob(
        None,
        "Committed games: simulations per frame (option k runs k * this); None: the planner's.",
    )
    gumbel_scale: float = knob(
        1.0, "mctx Gumbel scale during collection (1.0 samples the searched action)."
    )
    n_step: int = knob(10, "Option steps per value target before bootstrapping (<= unroll).")
    replay_capacity: int = knob(50_000, "Samples the replay buffer holds (split across devices).")
    learner_steps: int = knob(4, "Adam steps per iteration.")
    minibatch: int = knob(256, "Samples per Adam step (split across devices).")
    lr: float | None = knob(None, "Adam learning rate; None: 3e-4 (committed), 1e-3 (clock).")
    l2: float = knob(1e-4, "Weight of 0.5 * sum of squared kernel weights in the loss.")
    value_weight: float = knob(1.0, "Weight of the value loss against the policy loss.")
    max_grad_norm: float = knob(1.0, "Global gradient-norm clip.")
    eval_every: int = knob(
        10, "Evaluate every this many iterations (and after the last); 0: never."
    )
    eval_episodes: int = knob(32, "Evaluation episodes (committed) or games per opponent (clock).")
    eval_k: int | None = knob(
        None,
        "Budget of the evaluated option; None: train_k (committed), the largest budget (clock).",
    )
    eval_max_decisions: int | None = knob(
        None,
        "Cap on decisions (committed) or plies (clock) per evaluation; None: horizon / 400.",
    )
    checkpoint_every: int = knob(
        10, "Write the checkpoint every this many iterations (and after the last)."
    )
    seed: int = knob(0, "Seed of parameters, games and search.")
    devices: int | None = knob(
        None, "Devices of the mesh; None: the most visible devices that divide the batch sizes."
    )
    torso: str | None = knob(
        None, 'Network override: trunk kind, "conv" or "mlp"; None keeps the game\'s default.'
    )
    channels: int | None = knob(
        None, "Network override: trunk width; None keeps the game's default."
    )
    blocks: int | None = knob(
        None, "Network override: residual blocks; None keeps the game's default."
    )
    features: int | None = knob(
        None, "Network override: pooled feature size; None keeps the game's default."
    )
    value_hidden: int | None = knob(
        None, "Network override: value head width; None keeps the game's default."
    )
    game_params: tuple[tuple[str, Any], ...] = knob(
        (),
        "Game settings added to the planner config's (e.g. (('num_rows', 6), ('num_cols', 6))).",
    )
    init_from: str | None = knob(
        None,
        "A new run starts from these planner params (e.g. a shipped planner.msgpack) instead of "
        "a random init; the optimizer state starts fresh. None: random init.",
    )
    opening_plies: int = knob(
        0,
        "Two-player games: each self-play game starts from a uniform number in [0, this] of "
        "uniformly random moves, so self-play also sees positions its own policy avoids (a "
        "self-play-only net can misjudge a random opponent's moves).",
    )

    symmetries: bool = knob(
        True,
        "Learner batches see each sample under a uniformly random board symmetry of the game "
        "(Speed Go's 8, Speed Hex's half turn; a no-op for games without). Free per step.",
    )

    def __post_init__(self) -> None:
        positive = ("iterations", "batch", "unroll", "n_step", "replay_capacity", "minibatch")
        for name in positive:
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.opening_plies and not self._clock:
            raise ValueError(
                f"opening_plies is for two-player games; {self.game_id} has chance of its own"
            )
        for name in ("learner_steps", "eval_every", "checkpoint_every", "opening_plies"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.n_step > self.unroll:
            raise ValueError(
                f"n_step={self.n_step} must be <= unroll={self.unroll}: a decision's n-step "
                "window must be complete one iteration later"
            )
        # Unknown games, budgets and clock-game simulation overrides fail here, not mid-run.
        self.planner_config, self.k, self.eval_budget  # noqa: B018

    @property
    def planner_config(self) -> PlannerConfig:
        """The game's default planner config with this run's overrides."""
        from rtplan.planner.configs import default_config

        base = default_config(self.game_id)
        over = {
            f: getattr(self, f)
            for f in ("torso", "channels", "blocks", "features", "value_hidden")
            if getattr(self, f) is not None
        }
        net = dataclasses.replace(base.network, **over)
        params = tuple({**dict(base.game_params), **dict(self.game_params)}.items())
        cfg = dataclasses.replace(base, network=net, game_params=params)
        if self.sims_per_frame is not None:
            if self._clock:
                raise ValueError(
                    f"{self.game_id} is a clock game: its budgets are simulation counts "
                    f"{base.budgets}; choose one with train_k instead of sims_per_frame"
                )
            cfg = dataclasses.replace(
                cfg, simulations=tuple(self.sims_per_frame * k for k in cfg.budgets)
            )
        return cfg

    @property
    def kind(self) -> games.Kind:
        """The game's kind (`games.kind_of`)."""
        from rtplan import games

        return games.kind_of(self.game_id)

    @property
    def _clock(self) -> bool:
        from rtplan import games

        return self.kind is games.Kind.CLOCK

    @property
    def k(self) -> int:
        """The option budget of the collected decisions."""
        budgets = self._budgets()
        if self.train_k is not None:
            k = self.train_k
        elif self._clock:
            k = min(budgets, key=lambda b: abs(b - 32))
        else:
            k = 1
        if k not in budgets:
            raise ValueError(f"train_k={k} is not a budget of {self.game_id}: {budgets}")
        return k

    @property
    def eval_budget(self) -> int:
        """The budget of the evaluated option."""
        budgets = self._budgets()
        default = max(budgets) if self._clock else self.k
        k = self.eval_k if self.eval_k is not None else default
        if k not in budgets:
            raise ValueError(f"eval_k={k} is not a budget of {self.game_id}: {budgets}")
        return k

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return self.lr
        return 1e-3 if self._clock else 3e-4

    def _budgets(self) -> tuple[int, ...]:
        from rtplan.planner.configs import default_config

        return default_config(self.game_id).budgets
