"""The agents a session can have: an external gRPC agent, the env-side reflex, the planner agent,
and the clock games' built-in opponents (each an `Agent`; the manager builds them).

It runs past ~450 lines because the planner agent (most of it) keeps its whole real-time
protocol together: the option's frames, its call's deadline, cancellation and the late-decision
rule read one `_Option` and must change as one."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

import grpc
import numpy as np

from rtplan import games
from rtplan.planner import landing_frame
from rtplan.server._agent_api import Agent, AgentHost, Answer
from rtplan.server._config import SessionConfig
from rtplan.server._records import PlanDecision
from rtplan.server._rules import MAX_ACTIONS_PER_FRAME, Arrival, budget_at
from rtplan.v1 import planner_pb2

log = logging.getLogger("rtplan.server")

#: A chess clock's move: its Plan call may outlive the mover's deadline by this much (a late
#: answer is then counted and discarded). A committed game's forced option in real time gets no
#: grace: its call's deadline is its landing frame's, so the service never starts a search that
#: cannot land, and the session cancels the call when that frame is decided without it.
PLAN_GRACE_S = 1.0
#: Seconds to wait before asking a busy planner again when it names no time.
BUSY_RETRY_S = 0.005


def busy_retry_s(error: grpc.aio.AioRpcError) -> float | None:
    """Seconds until a planner that refused a Plan as busy (RESOURCE_EXHAUSTED) expects a free
    search slot: its trailing `retry-after-ms` (`planner_service.server.RETRY_AFTER_KEY`), else
    `BUSY_RETRY_S`; None for any other error."""
    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    for key, value in error.trailing_metadata() or ():
        if key == "retry-after-ms":
            try:
                return max(0.0, float(value)) / 1e3
            except ValueError:
                break
    return BUSY_RETRY_S


class _BuiltIn:
    """An agent inside the server: it needs no stream, starts at once and takes no actions."""

    kind = "built-in"

    def attached(self) -> None:
        pass

    async def ready(self) -> None:
        pass

    def receive(self, frame: int, arrival: Arrival) -> bool:
        return False

    def came_late(self, frame: int, arrival: Arrival) -> None:
        pass

    def begin(self, n: int, host: AgentHost) -> None:
        pass

    async def wait(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


class GrpcAgent:
    """An external agent on the Env API: a mailbox of the actions it sent, by frame."""

    kind = "grpc"

    def __init__(self) -> None:
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

    def came_late(self, frame: int, arrival: Arrival) -> None:
        pass  # the session makes the frame's report LATE; nothing is kept

    def begin(self, n: int, host: AgentHost) -> None:
        for old in [f for f in self._mail if f < n]:
            del self._mail[old]

    async def wait(self, n: int) -> None:
        while not self._mail.get(n):
            self._changed.clear()
            await self._changed.wait()

    def answer(self, n: int, host: AgentHost) -> Answer:
        return Answer(tuple(self._mail.pop(n, ())), "agent")

    def close(self) -> None:
        self._mail.clear()


class ReflexAgent(_BuiltIn):
    """The env-side reflex: the network's masked argmax at every frame, computed in the step."""

    kind = "reflex"

    def answer(self, n: int, host: AgentHost) -> Answer:
        reflex = host.info.reflex_for(host.config.served)
        return Answer((Arrival(reflex, host.published_at),), "reflex")


@dataclasses.dataclass(eq=False)
class _Option:
    """One decision of the planner agent: the request in flight and what came back."""

    request_id: int
    decision_frame: int
    k: int | None  # None until a gated decision arrives
    landing: int | None  # likewise
    sent_at: float
    gated: bool = False  # the service's gate picks k
    decision: PlanDecision | None = None
    planned: Arrival | None = None
    cost: int | None = None
    latency_ms: float | None = None
    error: str | None = None
    closed: bool = False  # its landing frame was decided: any later answer is discarded
    #: Committed "plan": the plan its frames before landing follow (sent with its request;
    #: plan[j] for frame decision_frame + j), whether the world still follows it, and the
    #: plan its answer leaves for the next option.
    plan: tuple[int, ...] = ()
    following: bool = True
    next_plan: tuple[int, ...] = ()
    task: asyncio.Task | None = None  # its Plan call, cancelled once the option is closed
    decided: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)  # k is known
    done: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)


class PlannerAgent(_BuiltIn):
    """The built-in planner agent: the paper's budgeted option o_k over the Planner service.

    At a decision frame t it sends `Plan(s_t, budget)` without waiting and plays the env-side
    reflex on frames t..t+k-2; frame t+k-1 applies the planned action if it arrived by that
    frame's deadline (else the fallback plays and a miss is counted); the next decision is at
    t+k. The budget is the session's forced k (or k-sequence), or, when the session forces
    none, the service's gate: k is then known when the decision message arrives. A gated
    decision not there by frame t's deadline keeps its option going on the reflex while the
    call is pending, up to the frame where the game's largest budget would land (`max_k`):
    when it comes, its landing frame plays the planned action if both are in time, and a
    landing frame already past ends the option at the next frame, missed. (Without `max_k`, or
    past it, an undecided option ends as a miss.) So a late decision costs at most its own
    landing, never the next decision's. A landing frame decided without its answer cancels the
    call: the service drops a search not yet started, and the next decision, sent on
    schedule, never waits for a late one (the service runs it beside). Answers are matched to
    their option by request id, so a late answer is never applied to a later frame. A planner
    that is down or slow costs planned actions, never a tick.

    Under the session's committed "plan" (a game the service plays under "plan"), every frame
    the reflex would play (the committed frames, and a late decision's frames) plays the last
    answer's plan instead while each of its actions is legal there, exactly as the service's
    search replays it (`Planner._commit`): the request carries that plan and its answer the
    next one. A landing frame that misses its planned action plays the fallback and drops the
    plan (the world left the search's tree), as in process (`Planner.option(miss=...)`).
    """

    kind = "planner"
    #: The answer source of its landing frames.
    source = "planned"
    #: Appended to the session id to make its Plan calls' stream id (the service supersedes
    #: requests of one stream by request id: two planners of a session need two streams).
    stream_suffix = ""
    #: Added to the search seed (two planners of a session search with different seeds).
    seed_offset = 0

    def __init__(
        self,
        stub,
        *,
        plan_timeout_s: float,
        ks: tuple[int, ...] | None = None,
        max_k: int | None = None,
    ) -> None:
        """
        Args:
            stub: what Plan is called on: a `PlannerStub`, or the env server's `PlannerRouter`
                (each game's calls to the planner service that serves it).
            plan_timeout_s: how long a Plan call may take with the simulated clock, and a
                gated one in real time.
            ks: the budgets it plays, cycled; None: the session's `ks` (empty: the gate's).
            max_k: the game's largest budget: a gated decision that is late keeps its option
                on the reflex until that budget's landing frame; None: it ends at once.
        """
        self._stub = stub
        self._plan_timeout_s = plan_timeout_s
        self._ks = ks
        self._max_k = max_k
        self._decisions = 0
        self._request_id = 0
        self._option: _Option | None = None
        self._tasks: set[asyncio.Task] = set()
        #: A clock gate's state for this side of this game (the service keeps none): sent with
        #: each gated request, replaced by the one its decision returns (None: the game's start).
        self._gate_state: planner_pb2.ClockGateState | None = None
        self._gate_state_request = 0
        #: Committed "plan": the plan the next option follows (the last landed answer's).
        self._held_plan: tuple[int, ...] = ()

    def begin(self, n: int, host: AgentHost) -> None:
        opt = self._option
        if opt is None or opt.closed:
            self._decide(n, host)

    def _decide(self, n: int, host: AgentHost) -> None:
        cfg = host.config
        ks = cfg.ks if self._ks is None else self._ks
        gated = not ks
        k = None if gated else budget_at(ks, self._decisions)
        self._decisions += 1
        self._request_id += 1
        opt = _Option(
            request_id=self._request_id,
            decision_frame=n,
            k=k,
            landing=None if gated else landing_frame(n, k, kind=host.kind),
            sent_at=time.monotonic(),
            gated=gated,
            plan=self._held_plan if cfg.committed == "plan" else (),
        )
        self._option = opt
        if not gated:
            opt.decided.set()
            host.plan_sent(k)  # a gated decision is booked when its k arrives
        request = planner_pb2.PlanRequest(
            game_id=cfg.game_id,
            state=host.state_proto(),
            budget=planner_pb2.Budget(gate=True) if gated else planner_pb2.Budget(k=k),
            stream_id=host.id + self.stream_suffix,
            request_id=opt.request_id,
            seed=(cfg.seed * 1_000_003 + self.seed_offset + opt.request_id) % 2**64,
            gate_state=self._gate_state if gated else None,
            plan=opt.plan,
        )
        if not cfg.simulated and host.kind is not games.Kind.CLOCK and host.deadline is not None:
            # The service then never starts a search (the gate's k too) that cannot land.
            request.frame_clock.decision_deadline_ms = (host.deadline - opt.sent_at) * 1e3
            request.frame_clock.period_ms = cfg.period * 1e3
        if cfg.simulated or gated:
            # A gated option's window is known only from its decision; in real time the next
            # decision supersedes the call anyway (the service ends it ABORTED).
            timeout = self._plan_timeout_s
        elif host.kind is games.Kind.CLOCK and host.deadline is not None:
            # A chess clock: the move's deadline is what is left on the mover's clock.
            timeout = max(0.0, host.deadline - opt.sent_at) + PLAN_GRACE_S
        elif host.deadline is not None:
            # The landing frame's deadline: an answer after it is worth nothing.
            timeout = host.deadline + (opt.landing - n) * cfg.period - opt.sent_at
        else:
            timeout = (opt.landing - n + 1) * cfg.period
        task = asyncio.get_running_loop().create_task(self._plan(opt, request, timeout, host))
        opt.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _plan(
        self, opt: _Option, request: planner_pb2.PlanRequest, timeout: float, host: AgentHost
    ) -> None:
        end = time.monotonic() + timeout
        try:
            while True:
                answered = False
                try:
                    left = max(0.0, end - time.monotonic())
                    async for resp in self._stub.Plan(request, timeout=left):
                        answered = True
                        kind = resp.WhichOneof("response")
                        if kind == "decision":
                            opt.error = self._decided(opt, resp.decision, host)
                            if opt.error is not None:
                                return
                        elif kind == "action":
                            self._planned(opt, resp.action, time.monotonic(), host)
                            return
                    opt.error = "the planner ended the Plan stream without an action"
                    return
                except grpc.aio.AioRpcError as e:
                    # Every search slot was taken: the service says when one frees up. Ask
                    # again then if the call's own deadline allows (the simulated clock waits
                    # for the plan; in real time the deadline decides), else it is an error.
                    wait = None if answered else busy_retry_s(e)
                    if wait is None or time.monotonic() + wait >= end or opt.closed:
                        raise
                    await asyncio.sleep(wait)
        except asyncio.CancelledError:
            raise
        except grpc.aio.AioRpcError as e:
            # In real time a call past its landing deadline (or a search the service did not
            # start, as it could not land) is a miss, not a failure of the planner.
            late = e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and not host.config.simulated
            if not late:
                opt.error = f"{e.code().name}: {e.details()}"
        except Exception as e:  # a bad answer costs this option, never the session
            opt.error = f"{type(e).__name__}: {e}"
        finally:
            if opt.error is not None and not opt.closed:
                host.plan_failed(opt.error)
            opt.decided.set()
            opt.done.set()

    def _decided(self, opt: _Option, d: planner_pb2.Decision, host: AgentHost) -> str | None:
        """Takes the decision message of `opt`; returns what is wrong with it, if anything."""
        if opt.gated:
            # A clock gate may play policy-only (k = 0: the reflex move, free).
            if d.k < (0 if host.kind is games.Kind.CLOCK else 1):
                return f"the gate decided k={d.k}, not a budget"
            want = landing_frame(opt.decision_frame, d.k, kind=host.kind)
            if d.landing_frame != want:
                return f"planner decided k={d.k} landing on frame {d.landing_frame}, not {want}"
            if len(d.gate_probabilities) == 0:
                return f"the gate decided k={d.k} without its probabilities"
            if not opt.closed:  # a decision after its option ended decides nothing
                opt.k, opt.landing = d.k, d.landing_frame
            if d.HasField("gate_state") and opt.request_id > self._gate_state_request:
                # The gate took this ply (even one whose move came too late to play): its
                # next ply starts from here. Only this side's decisions ever change it.
                self._gate_state, self._gate_state_request = d.gate_state, opt.request_id
            host.plan_sent(d.k)
        elif d.k != opt.k or d.landing_frame != opt.landing:
            return (
                f"planner decided k={d.k} landing on frame {d.landing_frame}; "
                f"asked k={opt.k} landing on {opt.landing}"
            )
        opt.decision = PlanDecision(
            frame=opt.decision_frame,
            k=d.k,
            gated=opt.gated,
            probabilities=tuple(float(p) for p in d.gate_probabilities),
            value=float(d.value),
        )
        opt.decided.set()
        return None

    def _planned(
        self, opt: _Option, action: planner_pb2.PlannedAction, now: float, host: AgentHost
    ) -> None:
        if action.request_id != opt.request_id:
            opt.error = f"answer for request {action.request_id}, expected {opt.request_id}"
            return
        latency = (now - opt.sent_at) * 1e3
        host.plan_replied(latency, action.search_ms, discarded=opt.closed)
        if opt.closed:  # its landing frame is past: discard, never apply later
            return
        opt.planned = Arrival(int(action.action), now)
        opt.next_plan = tuple(int(a) for a in action.plan)
        opt.cost = int(action.cost)
        opt.latency_ms = latency

    async def wait(self, n: int) -> None:
        opt = self._option
        if opt is None:
            return
        await opt.decided.wait()  # a gated option's landing frame is known from here on
        if opt.landing is None or n >= opt.landing:
            await opt.done.wait()

    def answer(self, n: int, host: AgentHost) -> Answer:
        opt = self._option
        if (opt.landing is not None and n < opt.landing) or self._undecided(opt, n, host):
            action = self._committed(opt, n, host)
            return Answer(
                (Arrival(action, host.published_at),),
                "plan" if opt.following else "reflex",
                k=opt.k,
                decision=opt.decision,
            )
        # The landing frame; one a late decision named that is past already (its planned
        # action, for an earlier frame, never plays here); or a gated option whose decision
        # did not come in time (it ends here).
        if opt.landing is not None and n > opt.landing:
            opt.planned = None
        opt.closed = True
        # The next option follows this one's plan only if its planned action plays.
        self._held_plan = opt.next_plan if opt.planned is not None else ()
        if opt.task is not None and not opt.task.done() and host.kind is not games.Kind.CLOCK:
            # Its answer can no longer land: stop waiting, so that the service drops a search
            # not yet started, and the next decision (next frame) never queues behind it. (A
            # clock gate's late decision still carries its state for the next ply: kept.)
            opt.task.cancel()
            host.plan_cancelled()
        arrivals = (opt.planned,) if opt.planned is not None else ()
        return Answer(
            arrivals,
            self.source,
            k=opt.k,
            cost=opt.cost,
            latency_ms=opt.latency_ms,
            error=opt.error,
            decision=opt.decision,
            landing=True,
        )

    def _committed(self, opt: _Option, n: int, host: AgentHost) -> int:
        """The action of frame n before `opt` lands: its plan's action for the frame while
        every plan action so far was legal where it played (`Planner._commit`'s rule), else
        the reflex."""
        j = n - opt.decision_frame
        opt.following = opt.following and j < len(opt.plan) and bool(host.info.legal[opt.plan[j]])
        return opt.plan[j] if opt.following else host.info.reflex_for(host.config.served)

    def _undecided(self, opt: _Option, n: int, host: AgentHost) -> bool:
        """A gated option whose decision is late but may still come in time for its option to
        land after frame n: its call is pending and the largest budget would land after n."""
        if opt.landing is not None or self._max_k is None or opt.done.is_set():
            return False
        return n < landing_frame(opt.decision_frame, self._max_k, kind=host.kind)

    def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class PlannerOpponent(PlannerAgent):
    """The clock games' searching opponent (player 1): the planner agent at one fixed budget k,
    or gated (k None: the service's clock gate picks each move's budget, with this side's own
    gate state), over the Planner service, on a Plan stream of its own. The session runs its
    clock as the agent's (`Session._run_chess_clock`): its thinking time is charged to its
    clock, and a move not there by the clock's deadline plays the fallback."""

    source = "opponent"
    stream_suffix = "/opponent"
    seed_offset = 2**32

    def __init__(self, stub, *, k: int | None, plan_timeout_s: float) -> None:
        super().__init__(stub, plan_timeout_s=plan_timeout_s, ks=() if k is None else (k,))


class Opponent(_BuiltIn):
    """The clock games' built-in opponent (player 1) that needs no search: the reflex, or a
    uniformly random legal move from a generator seeded by the session seed. Its moves cost
    no clock time (in real time each is paced to one frame period, for viewers)."""

    def __init__(self, kind: str, seed: int) -> None:
        self.kind = kind
        self._rng = np.random.default_rng(seed)

    def answer(self, n: int, host: AgentHost) -> Answer:
        info = host.info
        reflex = info.reflex_for(host.config.served)
        if self.kind == "reflex" and reflex >= 0:
            action = reflex
        else:
            action = int(self._rng.choice(np.flatnonzero(info.legal)))
        return Answer((Arrival(action, host.published_at),), "opponent")


def make_agent(
    cfg: SessionConfig,
    *,
    planner_stub=None,
    plan_timeout_s: float = 30.0,
    budgets: tuple[int, ...] = (),
) -> Agent:
    """The agent of a session's config (`budgets`: the game's, for the planner agent)."""
    if cfg.agent == "grpc":
        return GrpcAgent()
    if cfg.agent == "reflex":
        return ReflexAgent()
    if cfg.agent == "planner":
        max_k = max(budgets, default=None)
        return PlannerAgent(planner_stub, plan_timeout_s=plan_timeout_s, max_k=max_k)
    raise ValueError(f"unknown agent {cfg.agent!r}")


def make_opponent(cfg: SessionConfig, *, planner_stub=None, plan_timeout_s: float = 30.0) -> Agent:
    """The built-in opponent of a clock game's session."""
    if cfg.opponent_plans:
        k = None if cfg.opponent_gated else cfg.opponent_k
        return PlannerOpponent(planner_stub, k=k, plan_timeout_s=plan_timeout_s)
    return Opponent(cfg.opponent, cfg.seed)
