"""The PPO settings both kinds of gate share (`rtplan train-gate`'s flags); imports no JAX."""

from __future__ import annotations

import dataclasses
from typing import Any

from rtplan.harness.config import knob

__all__ = ["PPOConfig", "kind_knob"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class PPOConfig:
    """Settings of one PPO run of a gate over a frozen planner, shared by both kinds.

    Each kind's config extends it (`gate.committed.config.GateTrainConfig`,
    `gate.clock.config.ClockGateTrainConfig`). The knobs without a default here are the ones
    whose default (and for some, meaning) is the kind's: each kind declares them again with
    `kind_knob`, so a flag's help always names its own kind's default.
    """

    game_id: str = knob(help="Registered game id.")
    planner: str | None = knob(
        None, "Frozen planner checkpoint; None: checkpoints/<game>/planner.msgpack."
    )
    iterations: int = knob(help="PPO updates (rollout + epochs) of the whole run.")
    num_envs: int = knob(help="Games played in parallel.")
    epochs: int = knob(4, "Passes over each rollout.")
    minibatches: int = knob(help="Minibatches per pass.")
    gamma: float | None = knob(help="Discount.")
    lam: float = knob(0.95, "GAE lambda.")
    clip: float = knob(0.2, "PPO ratio clip epsilon.")
    lr: float = knob(3e-4, "Adam learning rate (constant).")
    ent_coef: float | None = knob(help="Entropy bonus coefficient.")
    vf_coef: float = knob(0.5, "Weight of the value loss 0.5 * MSE.")
    max_grad_norm: float = knob(
        1.0, "Global gradient-norm clip (the reference's committed PPO had none; its clock PPO 1)."
    )
    eval_every: int = knob(
        help="Evaluate every this many iterations (and after the last); 0: never."
    )
    checkpoint_every: int = knob(
        help="Write the checkpoint every this many iterations (and after the last)."
    )
    seed: int = knob(0, "Seed of the gate parameters, the training games and the sampled budgets.")
    devices: int = knob(help="Devices the run uses.")

    def __post_init__(self) -> None:
        for name in ("iterations", "num_envs", "epochs", "minibatches", "devices"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("eval_every", "checkpoint_every"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


def kind_knob(name: str, default: Any, help: str | None = None) -> Any:  # noqa: A002
    """`PPOConfig`'s knob `name` as a kind declares it: the kind's `default`, and its own `help`
    where the meaning differs (None: the shared help)."""
    (field,) = (f for f in dataclasses.fields(PPOConfig) if f.name == name)
    return knob(default, field.metadata["help"] if help is None else help)
