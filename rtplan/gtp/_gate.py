"""The clock gate as `rtplan gtp`'s time manager: its checkpoint and its compiled step."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

from rtplan import games
from rtplan.gate.clock.gate import ClockGateCarry, load_clock_gate
from rtplan.gate.clock.heuristics import ClockOptions
from rtplan.gate.compiled import ClockChoice, CompiledClockGate
from rtplan.harness.checkpoint import gate_file
from rtplan.planner.options import Planner

#: `--time-manager` values: the proportional rule (`_time.move_allowance`) or the clock gate.
TIME_MANAGERS = ("proportional", "gate")
#: What names another clock gate, or does without one, for a missing gate's message.
CLOCK_GATE_FLAG = "--clock-gate PATH, or use --time-manager proportional"


class GateManager:
    """A clock gate over the engine's planner, stepped one own move at a time (host arrays).

    It holds no game state: the engine keeps one `ClockGateCarry` per colour and passes it in.
    """

    def __init__(self, path: Path, planner: Planner, params, *, planner_file: str) -> None:
        """Loads the clock gate at `path` over `planner` (`load_clock_gate`).

        Raises:
            CheckpointError: no file at `path` (`harness.checkpoint.gate_file`'s message: how to
                train one), or a file that is not a clock gate over this planner.
        """
        path = gate_file(planner.config.game_id, path, flag=CLOCK_GATE_FLAG)
        gate, gate_params, _ = load_clock_gate(path, planner, planner_file=planner_file)
        self.path = path
        #: Option 0 is the policy-only move, option i the budget `options.budgets[i - 1]`.
        self.options: ClockOptions = gate.options
        self._compiled = CompiledClockGate(planner, params, gate, gate_params)

    def zero(self) -> ClockGateCarry:
        """One side's state at the start of a game (zero GRU state, no option yet)."""
        return self._compiled.zero_carry()

    def decide(self, carry: ClockGateCarry, state: games.State) -> ClockChoice:
        """The greedy gate's choice at one unbatched `state` (its clocks and T0 in ticks) from
        the mover's `carry`: option, probabilities, planner value and the next carry, unbatched
        (its `last` is the gate's option; the caller sets what was played)."""
        batched = jax.tree.map(lambda x: np.asarray(x)[None], (carry, state))
        out = self._compiled.decide(*batched)
        return jax.tree.map(lambda x: x[0], out)
