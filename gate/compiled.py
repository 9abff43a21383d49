"""A planner's compiled options with its gate: the budget decision and the gate's own options."""

from __future__ import annotations

import functools
from typing import Any

import jax
from flax import struct

import games
from gate.policy import Gate
from planner.compiled import OPTION, CompiledOptions, OptionPlan, plan_fields
from planner.options import Planner

__all__ = ["CompiledGate", "GateChoice"]

#: `Executable.kind` of the gate's decision.
GATE = "gate"
#: `Executable.kind` of option k planned against the gate's own future (its tree).
GATED = "gated"


@struct.dataclass
class GateChoice:
    """The deployed (argmax) decision at `[B]` states, with only the fields a decision sends."""

    k: jax.Array  # [B] int32 the chosen budget
    probabilities: jax.Array  # [B, K] float32 the gate's distribution over the budgets
    value: jax.Array  # [B] the planner's value at the state (return units)


class CompiledGate(CompiledOptions):
    """`CompiledOptions` plus a gate: its decision and, for a gate-tree gate, its options.

    A gate trained with the "gate" tree (`Gate.future` not None) plays options whose search
    expects its own later budgets: `gated_option(k)` is that option, compiled apart from the
    forced-k one. With the always-k tree the two are the same executable.
    """

    def __init__(
        self, planner: Planner, params: Any, gate: Gate, gate_params: Any, **kwargs: Any
    ) -> None:
        """Args as `CompiledOptions`, plus the `gate` over `planner` and its variables."""
        super().__init__(planner, params, **kwargs)
        self.gate = gate
        self.gate_params = (
            gate_params if self.device is None else jax.device_put(gate_params, self.device)
        )

    @property
    def gated_options(self) -> bool:
        """True when the gate's options are executables of their own (its tree)."""
        return self.gate.future is not None

    def kinds(self) -> list[tuple[str, int]]:
        gated = [(GATED, k) for k in self.budgets] if self.gated_options else []
        return [*super().kinds(), (GATE, 0), *gated]

    def _fn(self, kind: str, k: int):
        if kind == GATE:
            return functools.partial(_decide, self.gate), (self.gate_params, self.params)
        if kind == GATED:
            fn = functools.partial(_gated_option, self.planner, self.gate, k=k)
            return fn, (self.gate_params, self.params)
        return super()._fn(kind, k)

    def _takes_keys(self, kind: str) -> bool:
        return kind != GATE and super()._takes_keys(kind)

    def decide(self, states: games.State) -> GateChoice:
        """The gate's deployed decision at `[B]` states (host arrays)."""
        return self.call(GATE, 0, None, states)

    def gated_option(self, k: int, keys, states: games.State) -> OptionPlan:
        """Option k as the gate plays it (against its own future when it has a gate tree)."""
        if k not in self.budgets:
            raise ValueError(f"k={k} is not one of the budgets {self.budgets}")
        return self.call(GATED if self.gated_options else OPTION, k, keys, states)


def _decide(gate: Gate, gate_params, params, states) -> GateChoice:
    d = gate.decide(gate_params, params, states)
    return GateChoice(k=d.k, probabilities=d.probabilities, value=d.value)


def _gated_option(planner: Planner, gate: Gate, gate_params, params, keys, states, *, k: int):
    """Option k planned against `gate`'s own future (its tree)."""
    out = planner.option(params, keys, states, k, future=gate, future_params=gate_params)
    return plan_fields(out)
