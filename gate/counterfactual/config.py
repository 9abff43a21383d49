"""The settings of `rtplan train-gate-cf` (PPO with the counterfactual critic): no JAX, so the
command line builds its flags from them before JAX starts."""

from __future__ import annotations

import dataclasses

from rtplan.harness.config import knob

__all__ = ["CounterfactualPPOConfig"]


@dataclasses.dataclass(frozen=True)
class CounterfactualPPOConfig:
    """One run's settings (recorded in its checkpoints; a resume must not change them)."""

    continuation: int = knob(help="K: the best fixed budget, every branch's continuation")
    rounds: int = knob(12, "rounds of play, branching and update")
    states: int = knob(32, "games per round (one state each; games ended before it drop)")
    worlds: int = knob(4, "re-drawn futures per state")
    horizon: int = knob(32, "frames each branch is scored on")
    max_frame: int = knob(500, "each game's state is drawn from frames [0, max_frame)")
    epochs: int = knob(8, "passes over a round's states")
    minibatch: int = knob(16, "states per Adam step")
    lr: float = knob(3e-4, "Adam learning rate")
    clip: float = knob(0.2, "PPO ratio clip")
    entropy: float = knob(0.01, "entropy bonus")
    prior: float = knob(0.9, "the initial gate's probability of K at every state")
    minutes: float = knob(0.0, "stop after the round that passes this many minutes (0: none)")
    seed: int = knob(0, "round r plays train seeds seed + r * states, ...; the gate's init")

    def __post_init__(self) -> None:
        for name in ("rounds", "states", "epochs", "minibatch", "horizon", "max_frame"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, not {getattr(self, name)}")
        if self.worlds < 1:
            raise ValueError(f"worlds must be >= 1 (re-drawn futures), not {self.worlds}")
        if not 0.0 < self.prior < 1.0:
            raise ValueError(f"prior must be in (0, 1), not {self.prior}")
        if self.clip <= 0 or self.lr <= 0 or self.entropy < 0 or self.minutes < 0:
            raise ValueError("clip and lr must be > 0, entropy and minutes >= 0")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, not {self.seed}")
