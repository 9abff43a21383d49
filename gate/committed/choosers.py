"""The gate's evaluation conditions: the deployed gate, its input ablations and the baselines.

Episodes, seeds and the player are `planner.episodes`' (one seed policy for every evaluation);
this module adds what only the gate needs. The player's names are re-exported for the gate's
callers.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from rtplan import games
from rtplan.gate.committed.policy import Gate, GateMemory
from rtplan.planner.episodes import (
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
    "check_gate_name",
    "condition_names",
    "cycle",
    "gate_chooser",
    "is_gate",
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
    "gate-no-memory": "memory",  # only for a gate with memory (`GateConfig.memory`)
}
#: The ablations that exist only for a gate with that input: condition -> `GateConfig` field.
OPTIONAL_INPUTS = {"gate-no-stats": "stats", "gate-no-memory": "memory"}
#: A learned gate's condition (player) name, in every game: `gate` (the shipped gate), or a
#: second gate's `gate-<name>` (`rtplan eval --gate-name`) that is not an ablation's.
GATE_NAME = re.compile(r"gate(-[a-z0-9][a-z0-9_.-]*)?")


def is_gate(name: str) -> bool:
    """Whether `name` names a learned gate (`GATE_NAME`), not an ablation or a baseline."""
    return GATE_NAME.fullmatch(name) is not None and name not in ABLATIONS


def check_gate_name(name: str) -> str:
    """`name` if it names a gate (`is_gate`).

    Raises:
        ValueError: it does not, with the rule.
    """
    if not is_gate(name):
        raise ValueError(
            f"gate name {name!r}: a gate is named 'gate' or 'gate-<name>' (lower case, digits, "
            "'.', '_', '-'), and not an ablation's name"
        )
    return name


def condition_names(
    budgets: Sequence[int],
    *,
    gate: bool,
    ablations: bool = False,
    stats: bool = False,
    memory: bool = False,
) -> list[str]:
    """Every condition of an evaluation: the gate (and its ablations: of its stats and memory
    only when it has them), always-k, random k, policy-only."""
    names = ["gate"] if gate else []
    if gate and ablations:
        has = {"stats": stats, "memory": memory}
        names += [a for a in ABLATIONS if a not in OPTIONAL_INPUTS or has[OPTIONAL_INPUTS[a]]]
    return [*names, *(f"k{k}" for k in budgets), "random", POLICY_ONLY]


@functools.partial(jax.jit, static_argnames=("gate", "zero"))
def _greedy_k(gate: Gate, params, planner_params, states: games.State, memory, zero: str | None):
    x = gate.inputs(planner_params, states, memory=memory)
    if zero is not None:
        x = x.replace(**{zero: jnp.zeros_like(getattr(x, zero))})
    logits, _ = gate.apply(params, x)
    index = jnp.argmax(logits, -1)
    k = jnp.asarray(gate.budgets)[index]
    after = None if memory is None else memory.after(index, x.value, k)
    return k, after


def gate_chooser(gate: Gate, params, planner_params, *, zero: str | None = None) -> Chooser:
    """The deployed gate (argmax), optionally with one input field zeroed (an ablation).

    A gate with memory starts each play with an empty one (decision t = 0) and updates it at
    the games' own decisions only (`alive`), so a finished game's memory stays as it ended.
    """
    if zero is not None and zero not in ABLATIONS.values():
        raise ValueError(f"cannot zero {zero!r}: choose from {sorted(ABLATIONS.values())}")
    memory = None

    def choose(states: games.State, alive: np.ndarray, t: int) -> np.ndarray:
        nonlocal memory
        if gate.config.memory and t == 0:
            memory = GateMemory.empty(len(alive))
        k, after = _greedy_k(gate, params, planner_params, states, memory, zero)
        if after is not None:
            keep = jnp.asarray(alive)
            memory = games.tree_where(keep, after, memory)
        return np.asarray(k)

    return choose
