"""The agents a session can have: an external gRPC agent, the env-side reflex, the planner agent,
and the clock games' built-in opponent.

Each agent answers frames through the same four calls the frame loops make:
`begin(n)` when frame n is published, `wait(n)` (simulated clock: until it has answered),
`answer(n)` at the frame's deadline, and `settle(n, decision, answer)` once it was judged.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

import grpc
import numpy as np

from rtplan.v1 import planner_pb2
from server._rules import (
    MAX_ACTIONS_PER_FRAME,
    Arrival,
    FrameDecision,
    Provenance,
    budget_at,
    landing_frame,
)
from server.session import Answer, Session

log = logging.getLogger("rtplan.server")

#: Real time: a Plan call may outlive its landing deadline by this much (a late answer is then
#: counted and discarded; a newer request of the session supersedes it anyway).
PLAN_GRACE_S = 1.0


class GrpcAgent:
    """An external agent on the Env API: a mailbox of the actions it sent, by frame."""

    kind = "grpc"

    def __init__(self, session: Session) -> None:
        self._session = session
        self._mail: dict[int, list[Arrival]] = {}
        self._changed = asyncio.Event()
        self._joined = asyncio.Event()

    def attached(self) -> None:
        self._joined.set()

    async def ready(self) -> None:
        """The game starts when the agent has joined."""
        await self._joined.wait()

    def receive(self, frame: int, arrival: Arrival) -> bool:
        """Stores an action for `frame`; False when that frame already has too many."""
        box = self._mail.setdefault(frame, [])
        if len(box) >= MAX_ACTIONS_PER_FRAME:
            return False
        box.append(arrival)
        self._changed.set()
        return True

    def begin(self, n: int) -> None:
        for old in [f for f in self._mail if f < n]:
            del self._mail[old]

    async def wait(self, n: int) -> None:
        while not self._mail.get(n):
            self._changed.clear()
            await self._changed.wait()

    def answer(self, n: int) -> Answer:
        return Answer(tuple(self._mail.pop(n, ())), "agent")

    def settle(self, n: int, decision: FrameDecision, answer: Answer) -> None:
        pass

    def close(self) -> None:
        self._mail.clear()


class ReflexAgent:
    """The env-side reflex: the network's masked argmax at every frame, computed in the step."""

    kind = "reflex"

    def __init__(self, session: Session) -> None:
        self._session = session

    def attached(self) -> None:
        pass

    async def ready(self) -> None:
        pass

    def receive(self, frame: int, arrival: Arrival) -> bool:
        return False

    def begin(self, n: int) -> None:
        pass

    async def wait(self, n: int) -> None:
        pass

    def answer(self, n: int) -> Answer:
        s = self._session
        return Answer((Arrival(s.info.reflex, s.published_at),), "reflex")

    def settle(self, n: int, decision: FrameDecision, answer: Answer) -> None:
        pass

    def close(self) -> None:
        pass


@dataclasses.dataclass(eq=False)
class _Option:
    """One decision of the planner agent: the request in flight and what came back."""

    request_id: int
    decision_frame: int
    k: int
    landing: int
    sent_at: float
    planned: Arrival | None = None
    cost: int | None = None
    latency_ms: float | None = None
    error: str | None = None
    closed: bool = False  # its landing frame was decided: any later answer is discarded
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class PlannerAgent:
    """The built-in planner agent: the paper's budgeted option o_k over the Planner service.

    At a decision frame t it sends `Plan(s_t, k)` without waiting and plays the env-side reflex
    on frames t..t+k-2; frame t+k-1 applies the planned action if it arrived by that frame's
    deadline (else the fallback plays and a miss is counted); the next decision is at t+k.
    Answers are matched to their option by request id, so a late answer is never applied to a
    later frame. A planner that is down or slow costs planned actions, never a tick.
    """

    kind = "planner"

    def __init__(self, session: Session, stub) -> None:
        self._session = session
        self._stub = stub
        self._decisions = 0
        self._request_id = 0
        self._option: _Option | None = None
        self._tasks: set[asyncio.Task] = set()

    def attached(self) -> None:
        pass

    async def ready(self) -> None:
        pass

    def receive(self, frame: int, arrival: Arrival) -> bool:
        return False

    def begin(self, n: int) -> None:
        opt = self._option
        if opt is None or n > opt.landing:
            self._decide(n)

    def _decide(self, n: int) -> None:
        s = self._session
        k = budget_at(s.config.ks, self._decisions)
        self._decisions += 1
        self._request_id += 1
        opt = _Option(
            request_id=self._request_id,
            decision_frame=n,
            k=k,
            landing=landing_frame(n, k, committed=not s.clock_game),
            sent_at=time.monotonic(),
        )
        self._option = opt
        s.stats.decisions += 1
        s.stats.k_histogram[k] += 1
        request = planner_pb2.PlanRequest(
            game_id=s.config.game_id,
            state=s.state_proto(),
            budget=planner_pb2.Budget(k=k),
            stream_id=s.id,
            request_id=opt.request_id,
            seed=(s.config.seed * 1_000_003 + opt.request_id) % 2**64,
        )
        if s.config.simulated:
            timeout = s.plan_timeout_s
        else:
            timeout = (opt.landing - n + 1) * s.config.period + PLAN_GRACE_S
        task = asyncio.get_running_loop().create_task(self._plan(opt, request, timeout))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _plan(self, opt: _Option, request: planner_pb2.PlanRequest, timeout: float) -> None:
        s = self._session
        try:
            async for resp in self._stub.Plan(request, timeout=timeout):
                kind = resp.WhichOneof("response")
                if kind == "decision":
                    d = resp.decision
                    if d.k != opt.k or d.landing_frame != opt.landing:
                        opt.error = (
                            f"planner decided k={d.k} landing on frame {d.landing_frame}; "
                            f"asked k={opt.k} landing on {opt.landing}"
                        )
                        return
                elif kind == "action":
                    self._planned(opt, resp.action, time.monotonic())
                    return
            opt.error = "the planner ended the Plan stream without an action"
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as e:
            opt.error = f"{e.code().name}: {e.details()}"
        except Exception as e:  # a bad answer costs this option, never the session
            opt.error = f"{type(e).__name__}: {e}"
        finally:
            if opt.error is not None and not opt.closed:
                s.stats.planner_errors += 1
                s.stats.last_planner_error = opt.error
            opt.done.set()

    def _planned(self, opt: _Option, action: planner_pb2.PlannedAction, now: float) -> None:
        s = self._session
        if action.request_id != opt.request_id:
            opt.error = f"answer for request {action.request_id}, expected {opt.request_id}"
            return
        latency = (now - opt.sent_at) * 1e3
        s.stats.latency_ms.append(latency)
        s.stats.search_ms.append(action.search_ms)
        if opt.closed:  # its landing frame is past: discard, never apply later
            s.stats.planner_late_answers += 1
            return
        opt.planned = Arrival(int(action.action), now)
        opt.cost = int(action.cost)
        opt.latency_ms = latency

    async def wait(self, n: int) -> None:
        opt = self._option
        if opt is not None and n >= opt.landing:
            await opt.done.wait()

    def answer(self, n: int) -> Answer:
        s = self._session
        opt = self._option
        if n < opt.landing:
            return Answer((Arrival(s.info.reflex, s.published_at),), "reflex", k=opt.k)
        opt.closed = True
        arrivals = (opt.planned,) if opt.planned is not None else ()
        return Answer(
            arrivals, "planned", k=opt.k, cost=opt.cost, latency_ms=opt.latency_ms, error=opt.error
        )

    def settle(self, n: int, decision: FrameDecision, answer: Answer) -> None:
        if answer.source != "planned":
            return
        stats = self._session.stats
        if decision.provenance is Provenance.ON_TIME:
            stats.planned += 1
        elif decision.provenance is not Provenance.INVALID and answer.error is None:
            stats.planner_misses += 1

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class Opponent:
    """The clock games' built-in opponent (player 1): the reflex, or a uniformly random legal
    move from a generator seeded by the session seed. Its moves cost no clock time."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.kind = session.config.opponent
        self._rng = np.random.default_rng(session.config.seed)

    def begin(self, n: int) -> None:
        pass

    async def wait(self, n: int) -> None:
        pass

    def answer(self, n: int) -> Answer:
        s = self._session
        if self.kind == "reflex" and s.info.reflex >= 0:
            action = s.info.reflex
        else:
            action = int(self._rng.choice(np.flatnonzero(s.info.legal)))
        return Answer((Arrival(action, s.published_at),), "opponent")

    def settle(self, n: int, decision: FrameDecision, answer: Answer) -> None:
        pass

    def close(self) -> None:
        pass


def make_agent(session: Session, planner_stub):
    """The agent of a session's config."""
    kind = session.config.agent
    if kind == "grpc":
        return GrpcAgent(session)
    if kind == "reflex":
        return ReflexAgent(session)
    if kind == "planner":
        return PlannerAgent(session, planner_stub)
    raise ValueError(f"unknown agent {kind!r}")
