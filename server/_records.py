"""The frame records under the rules: a frame's `Report`, a planner option's `PlanDecision`, and
the `PlayedLog` of a session so far."""

from __future__ import annotations

import collections
import dataclasses

from rtplan.server._rules import Provenance
from rtplan.v1 import env_pb2


@dataclasses.dataclass(frozen=True)
class PlanDecision:
    """The planner service's budget decision of one option (what the viewer draws)."""

    frame: int  # the decision frame t, where the option started
    k: int  # the option's budget: the gate's choice, or the forced k
    gated: bool  # the gate chose k (else it was forced)
    probabilities: tuple[float, ...]  # [K] the gate's distribution over the budgets; () forced
    value: float  # the planner network's value at s_t (return units)


@dataclasses.dataclass(frozen=True)
class Report:
    """How a frame's action was chosen (the `ActionReport`, plus the built-in agents' detail)."""

    frame: int
    action: int
    provenance: Provenance
    slack_ms: float
    received_action: int  # the judged answer's action, -1 when nothing arrived
    source: str  # who answered: "agent", "human", "reflex", "plan", "planned", "opponent"
    k: int | None
    cost: int
    latency_ms: float | None
    decision: PlanDecision | None = None  # planner agent: the decision of this frame's option
    credit: int = 0  # clock ticks given back after the move (the session's increment)

    @property
    def shown_source(self) -> str:
        """Where the applied action came from: the answer's source when it was on time, the
        reflex of a person's fair start (nothing asked of them yet), else the fallback (a late,
        invalid or missing answer played the fallback)."""
        if self.provenance is Provenance.ON_TIME:
            return self.source
        return "reflex" if self.fair_start else "fallback"

    @property
    def fair_start(self) -> bool:
        """A frame before a person's first action, which the reflex plays (`HumanAgent`)."""
        return self.source == "reflex" and self.provenance is Provenance.FALLBACK

    def proto(self) -> env_pb2.ActionReport:
        return env_pb2.ActionReport(
            frame=self.frame,
            action=self.action,
            provenance=int(self.provenance),
            slack_ms=self.slack_ms,
            received_action=self.received_action,
        )


class PlayedLog:
    """What a session has played so far, for a viewer that joins late: the reports of the last
    `recent` frames (the charts' history), every planner decision (once per option) and, in a
    clock game, every move's report (the move list); the last two keep the newest `limit`."""

    def __init__(self, *, moves: bool, recent: int = 128, limit: int = 8192) -> None:
        self.recent: collections.deque[Report] = collections.deque(maxlen=recent)
        self.decisions: collections.deque[PlanDecision] = collections.deque(maxlen=limit)
        self.moves: collections.deque[Report] | None = (
            collections.deque(maxlen=limit) if moves else None
        )

    def add(self, report: Report) -> None:
        self.recent.append(report)
        d = report.decision
        if d is not None and (not self.decisions or self.decisions[-1].frame != d.frame):
            self.decisions.append(d)
        if self.moves is not None:
            self.moves.append(report)
