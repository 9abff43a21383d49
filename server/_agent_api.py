"""The contract between a session and its agents: what an agent may read and report (`AgentHost`),
the calls the frame loops make (`Agent`), and what an agent gives for a frame (`Answer`)."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from rtplan import games
from rtplan.server._config import SessionConfig
from rtplan.server._frame_info import HostInfo
from rtplan.server._records import PlanDecision
from rtplan.server._rules import Arrival
from rtplan.v1 import tensor_pb2


@dataclasses.dataclass(frozen=True)
class Answer:
    """What an agent gave for one frame, before the frame rule judges it."""

    arrivals: tuple[Arrival, ...]
    source: str  # "agent" | "human" | "reflex" | "plan" | "planned" | "opponent"
    k: int | None = None
    cost: int | None = None  # clock ticks the answer declares (planner, simulated clock)
    latency_ms: float | None = None
    error: str | None = None  # why a planned answer is missing (its Plan call failed)
    decision: PlanDecision | None = None  # planner agent: its option's decision, once known
    landing: bool = False  # a planner option's landing frame (its planned action, or a miss)
    #: A person before their first key: a frame with no action plays the game's reflex (a safe
    #: move), not its fallback, so nobody loses before they could react (the game is unchanged).
    safe_fallback: bool = False


class AgentHost(Protocol):
    """What an agent may read of its session, and the planner events it may report (the session
    books them; agents never touch its statistics)."""

    @property
    def id(self) -> str: ...

    @property
    def config(self) -> SessionConfig: ...

    @property
    def kind(self) -> games.Kind: ...

    @property
    def info(self) -> HostInfo:
        """The current frame's info (legal mask, reflex, fallback, clocks)."""
        ...

    @property
    def published_at(self) -> float:
        """Monotonic time the current frame was published."""
        ...

    @property
    def deadline(self) -> float | None:
        """Monotonic deadline of the current frame (None with the simulated clock)."""
        ...

    def state_proto(self) -> tensor_pb2.GameState:
        """The current state on the wire."""
        ...

    def plan_sent(self, k: int) -> None:
        """A Plan request with budget k was sent."""
        ...

    def plan_replied(self, latency_ms: float, search_ms: float, *, discarded: bool) -> None:
        """A planned action came back (`discarded`: after its landing frame was decided)."""
        ...

    def plan_cancelled(self) -> None:
        """A Plan call was cancelled: its landing frame was decided without its answer."""
        ...

    def plan_failed(self, message: str) -> None:
        """A Plan call failed before its landing frame was decided."""
        ...


class Agent(Protocol):
    """Who answers the frames of a session; the frame loops call, in order, `begin(n)` when
    frame n is published, `wait(n)` (simulated clock: until it has answered) and `answer(n)`
    at the frame's deadline."""

    #: "grpc", "human", "reflex", "planner", or the clock games' opponent ("reflex",
    #: "random", "planner").
    kind: str

    def attached(self) -> None:
        """An agent stream joined the session."""
        ...

    async def ready(self) -> None:
        """Returns when the game may start."""
        ...

    def receive(self, frame: int, arrival: Arrival) -> bool:
        """An action from the agent stream for `frame`; False when it cannot take it."""
        ...

    def came_late(self, frame: int, arrival: Arrival) -> None:
        """An action from the agent stream for past `frame`, which played the fallback (its
        report turns LATE); the action itself is not played."""
        ...

    def begin(self, n: int, host: AgentHost) -> None: ...

    async def wait(self, n: int) -> None: ...

    def answer(self, n: int, host: AgentHost) -> Answer: ...

    def close(self) -> None:
        """The session ended: drop what is pending."""
        ...
