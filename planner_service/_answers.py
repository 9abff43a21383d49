"""The engine's budgets and answers: `GATE`, `POLICY_ONLY`, a `Decision` and a `Plan`."""

from __future__ import annotations

import dataclasses

import numpy as np

from rtplan.gate.clock.gate import ClockGateCarry

#: The budget that lets the gate choose k.
GATE = "gate"
#: The k of a clock gate's policy-only choice (the reflex move, cost 0).
POLICY_ONLY = 0


@dataclasses.dataclass(frozen=True)
class Decision:
    """The budget decision for one request (sent before the search result)."""

    k: int
    gate_probabilities: np.ndarray  # [K] float32 ([K + 1] a clock gate's options); [0] forced
    value: float  # planner network value at s_t
    landing_frame: int  # frame index where the planned action applies
    #: A clock gate's state after this ply (`h` [hidden] float32, `last` int); None otherwise.
    gate_state: ClockGateCarry | None = None


@dataclasses.dataclass(frozen=True)
class Plan:
    """The planned action of option k and its search statistics."""

    action: int  # the planned action, played on the landing frame
    frame_actions: np.ndarray  # [K] int32 every frame action of the option, in play order
    planned: np.ndarray  # [K] bool: True where MCTS chose the action, False for reflex
    visit_counts: np.ndarray  # [A] int32 root visit counts
    search_value: float  # MCTS value of the root
    root_value: float  # the planner network's value at s_t (a decision's value)
    cost: int  # clock ticks charged (clock games; 0 in committed games)
    search_ms: float  # wall time of the option on the device, transfers included
    #: committed="plan" only: the plan the next option commits to, aligned on the frame after
    #: the landing frame (`OptionOutput.plan[:plan_len]`); empty under "reflex".
    plan: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int32))  # [L]
