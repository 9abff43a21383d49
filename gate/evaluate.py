"""The gate's evaluation conditions: the deployed gate, its input ablations and the baselines.

Episodes, seeds and the player are `planner.episodes`' (one seed policy for every evaluation);
this module adds what only the gate needs. The player's names are re-exported for the gate's
callers.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

import games
from gate.policy import Gate
from planner.episodes import (
    EVAL_SEED_BASE,
    SPLITS,
    TUNING_SEED_BASE,
    Chooser,
    Episodes,
    always,
    cycle,
    play,
    play_policy_only,
    random_k,
    seeds_of,
)

__all__ = [
    "ABLATIONS",
    "EVAL_SEED_BASE",
    "POLICY_ONLY",
    "SPLITS",
    "TUNING_SEED_BASE",
    "Chooser",
    "Episodes",
    "always",
    "condition_names",
    "cycle",
    "gate_chooser",
    "play",
    "play_policy_only",
    "random_k",
    "seeds_of",
]

#: The reflex every frame, no search (k is recorded as 0).
POLICY_ONLY = "policy-only"
#: Gate input ablations at evaluation: condition name -> the `GateInputs` field zeroed.
ABLATIONS = {
    "gate-no-board": "obs",
    "gate-no-time": "time",
    "gate-no-features": "features",
    "gate-no-value": "value",
    "gate-no-stats": "stats",  # only for a gate that sees them (`GateConfig.stats`)
}


def condition_names(
    budgets: Sequence[int], *, gate: bool, ablations: bool = False, stats: bool = False
) -> list[str]:
    """Every condition of an evaluation: the gate (and its ablations), always-k, random k,
    policy-only."""
    names = ["gate"] if gate else []
    if gate and ablations:
        names += [a for a in ABLATIONS if a != "gate-no-stats" or stats]
    return [*names, *(f"k{k}" for k in budgets), "random", POLICY_ONLY]


@functools.partial(jax.jit, static_argnames=("gate", "zero"))
def _greedy_k(gate: Gate, params, planner_params, states: games.State, zero: str | None):
    x = gate.inputs(planner_params, states)
    if zero is not None:
        x = x.replace(**{zero: jnp.zeros_like(getattr(x, zero))})
    logits, _ = gate.apply(params, x)
    return jnp.asarray(gate.budgets)[jnp.argmax(logits, -1)]


def gate_chooser(gate: Gate, params, planner_params, *, zero: str | None = None) -> Chooser:
    """The deployed gate (argmax), optionally with one input field zeroed (an ablation)."""
    if zero is not None and zero not in ABLATIONS.values():
        raise ValueError(f"cannot zero {zero!r}: choose from {sorted(ABLATIONS.values())}")
    return lambda states, alive, t: np.asarray(
        _greedy_k(gate, params, planner_params, states, zero)
    )
