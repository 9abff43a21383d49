"""A planner's compiled options with its gate: the budget decision and the gate's own options,
or a clock game's recurrent gate: its step from a carried state."""

from __future__ import annotations

import functools
from typing import Any

import jax
import numpy as np
from flax import struct

from rtplan import games
from rtplan.gate.clock.gate import ClockGate, ClockGateCarry
from rtplan.gate.clock.network import NO_OPTION
from rtplan.gate.committed.policy import Gate
from rtplan.planner.compiled import OPTION, VALUE, CompiledOptions, OptionPlan, plan_fields
from rtplan.planner.options import Planner

__all__ = ["ClockChoice", "CompiledClockGate", "CompiledGate", "GateChoice"]

#: `Executable.kind` of the gate's decision.
GATE = "gate"
#: `Executable.kind` of option k planned against the gate's own future (its tree).
GATED = "gated"
#: `Executable.kind` of the clock gate's step.
CLOCK_GATE = "clock-gate"


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

    def gated_kinds(self) -> tuple[str, ...]:
        # A gate tree's options are its own executables; the always-k tree plays the forced ones.
        return (GATE, GATED if self.gated_options else OPTION)

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

    def gated_option(self, k: int, keys, states: games.State, plan=None) -> OptionPlan:
        """Option k as the gate plays it (against its own future when it has a gate tree;
        following `plan` under committed="plan", as `option`)."""
        if k not in self.budgets:
            raise ValueError(f"k={k} is not one of the budgets {self.budgets}")
        return self.call(GATED if self.gated_options else OPTION, k, keys, states, plan)


def _decide(gate: Gate, gate_params, params, states) -> GateChoice:
    d = gate.decide(gate_params, params, states)
    return GateChoice(k=d.k, probabilities=d.probabilities, value=d.value)


def _gated_option(planner: Planner, gate: Gate, gate_params, params, keys, states, *, k: int):
    """Option k planned against `gate`'s own future (its tree)."""
    out = planner.option(params, keys, states, k, future=gate, future_params=gate_params)
    return plan_fields(out)


@struct.dataclass
class ClockChoice:
    """The clock gate's deployed choice at `[B]` states, with only the fields a decision sends."""

    option: jax.Array  # [B] int32 0 policy-only, i >= 1 the budget `budgets[i - 1]`
    probabilities: jax.Array  # [B, n] float32 over the options (policy-only first)
    value: jax.Array  # [B] the planner's value at the state (for the mover)
    carry: ClockGateCarry  # [B] the gate's state after this ply


class CompiledClockGate(CompiledOptions):
    """`CompiledOptions` plus a clock game's recurrent gate (`ClockGate`): its step (planner
    forward, GRU step, argmax) from a carried state, compiled ahead like the options. The
    options it picks are the always-k ones (the clock gate trains over them); policy-only is
    the value executable's reflex move."""

    def __init__(
        self, planner: Planner, params: Any, gate: ClockGate, gate_params: Any, **kwargs: Any
    ) -> None:
        """Args as `CompiledOptions`, plus the clock `gate` over `planner` and its variables."""
        super().__init__(planner, params, **kwargs)
        self.gate = gate
        self.gate_params = (
            gate_params if self.device is None else jax.device_put(gate_params, self.device)
        )

    def kinds(self) -> list[tuple[str, int]]:
        return [*super().kinds(), (CLOCK_GATE, 0)]

    def gated_kinds(self) -> tuple[str, ...]:
        # Its options are the always-k ones, and its policy-only choice plays the value's reflex.
        return (CLOCK_GATE, OPTION, VALUE)

    def _fn(self, kind: str, k: int):
        if kind == CLOCK_GATE:
            return functools.partial(_clock_decide, self.gate), (self.gate_params, self.params)
        return super()._fn(kind, k)

    def _warm_inputs(self, kind: str, size: int):
        if kind == CLOCK_GATE:
            return jax.device_get(self.gate.zero_carry(size))
        return super()._warm_inputs(kind, size)

    def zero_carry(self) -> ClockGateCarry:
        """One game's state at its start, unbatched host arrays (`h` [hidden], `last` [])."""
        return ClockGateCarry(
            h=np.zeros((self.gate.config.hidden,), np.float32), last=np.int32(NO_OPTION)
        )

    def decide(self, carry: ClockGateCarry, states: games.State) -> ClockChoice:
        """The gate's ply at `[B]` states from their carries `[B]` (host arrays)."""
        return self.call(CLOCK_GATE, 0, carry, states)


def _clock_decide(gate: ClockGate, gate_params, params, carry, states) -> ClockChoice:
    d = gate.decide(gate_params, params, carry, states)
    return ClockChoice(option=d.option, probabilities=d.probabilities, value=d.value, carry=d.carry)
