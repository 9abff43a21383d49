"""The clock gate as `rtplan gtp`'s time manager: its checkpoint and its compiled step."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np

import games
from gate.clock_gate import ClockGateCarry, load_clock_gate
from gate.clock_heuristics import ClockOptions
from gate.compiled import ClockChoice, CompiledClockGate
from gate.policy import gate_path
from harness.checkpoint import CheckpointError
from planner.options import Planner

#: `--time-manager` values: the proportional rule (`_time.move_allowance`) or the clock gate.
TIME_MANAGERS = ("proportional", "gate")


def clock_gate_file(game_id: str, planner_file: str | Path, explicit: str | Path | None) -> Path:
    """The clock gate `--time-manager gate` loads: `explicit` (`--clock-gate`), else the one
    shipped beside the planner (`gate.policy.gate_path` of the planner's checkpoint root)."""
    if explicit is not None:
        return Path(explicit)
    return gate_path(Path(planner_file).parent.parent, game_id)


class GateManager:
    """A clock gate over the engine's planner, stepped one own move at a time (host arrays).

    It holds no game state: the engine keeps one `ClockGateCarry` per colour and passes it in.
    """

    def __init__(self, path: Path, planner: Planner, params, *, planner_file: str) -> None:
        """Loads the clock gate at `path` over `planner` (`load_clock_gate`).

        Raises:
            CheckpointError: no file at `path` (the message says how to train one), or a file
                that is not a clock gate over this planner.
        """
        game_id = planner.config.game_id
        if not path.is_file():
            raise CheckpointError(
                f"--time-manager gate needs a {game_id} clock gate and there is none at {path}: "
                f"train one with `rtplan train-gate --game {game_id}` and ship it there, pass "
                "--clock-gate PATH, or use --time-manager proportional"
            )
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
