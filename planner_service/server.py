"""The gRPC Planner service: thin `grpc.aio` handlers over the planner engine.

It runs past ~450 lines on purpose: each handler (Plan, Decide, ListGames, health) validates its
request and maps every refusal (busy, superseded, past its deadline or its frame clock, bad
input) to its own gRPC status in one place, beside the server's channel options; split apart,
the status mapping would be written once per file."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import numpy as np

import rtplan
from rtplan import games, wire
from rtplan.jax_setup import guard_map_count
from rtplan.planner_service import engine as eng
from rtplan.planner_service._admission import (
    Admission,
    AdmissionError,
    BusyError,
    DeadlineError,
    SupersededError,
)
from rtplan.planner_service._cache_fill import CacheFiller, cache_dir
from rtplan.planner_service._reports import ErrorReports
from rtplan.planner_service.settings import PlannerServiceSettings
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc

log = logging.getLogger("planner_service")

SERVICE_NAME = "rtplan.v1.Planner"
#: Trailing metadata key of a RESOURCE_EXHAUSTED answer: milliseconds to wait before retrying.
RETRY_AFTER_KEY = "retry-after-ms"
#: Searches one stream (a session's planner) may have on worker threads at once: a search that
#: outlasts its landing frame runs on beside the session's next one (`Admission`).
STREAM_SEARCHES = 2
#: Longest stream id accepted (ids are kept in a bounded table).
MAX_STREAM_ID = 128

_CODES: tuple[tuple[type[Exception], grpc.StatusCode], ...] = (
    (games.UnknownGameError, grpc.StatusCode.INVALID_ARGUMENT),
    (eng.InvalidRequestError, grpc.StatusCode.INVALID_ARGUMENT),
    (eng.NotLoadedError, grpc.StatusCode.FAILED_PRECONDITION),
    (eng.NotReadyError, grpc.StatusCode.UNAVAILABLE),
    (eng.NotStartedError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (SupersededError, grpc.StatusCode.ABORTED),
    (BusyError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (DeadlineError, grpc.StatusCode.DEADLINE_EXCEEDED),
)


class RequestError(eng.InvalidRequestError):
    """A request that breaks the protocol: does not parse, misses a field, bad field value."""


#: What a refusal (or a failure) of each call means for play, for the service's one-line reports.
_MEANS = {
    "Plan": "the session played its fallback for that frame",
    "Health": "the caller saw no health answer",
    "ListGames": "the lobby could not list this service's games this time",
    "Version": "the caller saw no version",
}
#: ... and what a Plan refused for these reasons means (the others: `_MEANS`).
_PLAN_MEANS = (
    (DeadlineError, "the search missed its deadline: the session played its fallback"),
    (eng.NotStartedError, "the search could not land in time: the session played its fallback"),
    (SupersededError, "the session's newer request replaced it: nothing was lost"),
)


def _means(name: str, error: BaseException | None) -> str:
    if name == "Plan" and error is not None:
        return next((m for cls, m in _PLAN_MEANS if isinstance(error, cls)), _MEANS[name])
    return _MEANS.get(name, "the caller got an error")


def _gone(servicer, name: str, sent: str, cause: BaseException | None, e: Exception) -> None:
    """Reports (once, `ErrorReports`) an answer that found its caller gone: its deadline passed,
    or it cancelled, as `sent` went out (gRPC raises `ExecuteBatchError`, an `InternalError`)."""
    why = f"{type(cause).__name__}: {cause}; " if cause is not None else ""
    servicer.reports.report(
        f"{name} answers whose caller had gone ({type(cause or e).__name__})",
        f"planner service: {name}: the caller had gone when its {sent} went out "
        f"({why}sending it: {type(e).__name__}); {_means(name, cause)}",
        e,
    )


def _statuses(handler):
    """Maps the engine's and admission's errors to gRPC statuses; anything else is INTERNAL.
    An answer (or a refusal) that can no longer be sent (the caller's deadline passed, or it
    cancelled) and an unexpected error are each reported in one line (`ErrorReports`)."""
    name = handler.__name__

    @functools.wraps(handler)
    async def wrapped(self, request, context: grpc.aio.ServicerContext):
        try:
            if isinstance(request, wire.Unparsed):
                raise RequestError(request.error)
            return await handler(self, request, context)
        except (eng.EngineError, games.UnknownGameError, AdmissionError) as e:
            code = next(c for cls, c in _CODES if isinstance(e, cls))
            meta = ((RETRY_AFTER_KEY, str(e.retry_after_ms)),) if isinstance(e, BusyError) else ()
            log.debug("%s %s: %s", name, code.name, e)
            try:
                await context.abort(code, str(e), trailing_metadata=meta)
            except grpc.aio.InternalError as sent:
                _gone(self, name, f"{code.name} answer", e, sent)
                raise asyncio.CancelledError from sent  # gRPC's word for a call its client left
        except (asyncio.CancelledError, grpc.aio.AbortError):
            raise
        except grpc.aio.InternalError as e:  # a message that could not go out: the caller left
            _gone(self, name, "answer", None, e)
            raise asyncio.CancelledError from e
        except Exception as e:
            self.reports.report(
                f"{name} failures ({type(e).__name__})",
                f"planner service: {name} failed ({type(e).__name__}: {e}); the caller got "
                f"INTERNAL: {_means(name, None)}; --log-level debug shows the traceback",
                e,
                level=logging.ERROR,
            )
            await context.abort(
                grpc.StatusCode.INTERNAL, f"planner error ({type(e).__name__}); see the server log"
            )

    return wrapped


def _unpack_plan(
    request: pb.PlanRequest,
) -> tuple[str, int | str, eng.ClockGateCarry | None, np.ndarray]:
    """(game id, budget, clock gate state or None, plan `[L]` int32) of a PlanRequest, with
    protocol errors named."""
    if not request.game_id:
        raise RequestError("game_id is empty")
    if not request.HasField("state"):
        raise RequestError("state is missing")
    which = request.budget.WhichOneof("budget")
    if which is None:
        raise RequestError("budget is missing: set budget.gate = true or a forced budget.k")
    if which == "gate" and not request.budget.gate:
        raise RequestError("budget.gate is false: set it true, or set budget.k instead")
    if len(request.stream_id) > MAX_STREAM_ID:
        raise RequestError(f"stream_id has {len(request.stream_id)} chars, at most {MAX_STREAM_ID}")
    if request.HasField("frame_clock") and not request.frame_clock.period_ms > 0:
        raise RequestError(
            f"frame_clock.period_ms must be > 0, got {request.frame_clock.period_ms}"
        )
    if request.HasField("extension"):
        raise RequestError(f"extension {request.extension.type_url!r} is not supported")
    gate_state = None
    if request.HasField("gate_state"):
        try:
            h = wire.from_tensor(request.gate_state.h, name="gate_state.h")
        except wire.WireError as e:
            raise RequestError(str(e)) from None
        gate_state = eng.ClockGateCarry(h=h, last=request.gate_state.last)
    budget = eng.GATE if which == "gate" else request.budget.k
    return request.game_id, budget, gate_state, np.asarray(request.plan, np.int32)


def _search_deadline(
    when: dict, clock: pb.FrameClock | None, arrived: float, lands_in: int
) -> dict:
    """`when` (the call's deadline, its `abandoned` flag) with the deadline of a search whose
    action lands `lands_in` frames after the decision frame: that landing frame's deadline by
    the session's frame clock, if it sent one and it comes first."""
    if clock is None:
        return when
    due = arrived + (clock.decision_deadline_ms + lands_in * clock.period_ms) / 1e3
    return {**when, "deadline": min(when.get("deadline", due), due)}


def _settle(future: asyncio.Future, result) -> None:
    if not future.done():
        future.set_result(result)


def _decision_msg(d: eng.Decision, request_id: int) -> pb.PlanResponse:
    state = None
    if d.gate_state is not None:
        state = pb.ClockGateState(h=wire.to_tensor(d.gate_state.h), last=int(d.gate_state.last))
    return pb.PlanResponse(
        decision=pb.Decision(
            k=d.k,
            gate_probabilities=d.gate_probabilities.tolist(),
            value=d.value,
            landing_frame=d.landing_frame,
            request_id=request_id,
            gate_state=state,
        )
    )


def _action_msg(p: eng.Plan, request_id: int) -> pb.PlanResponse:
    return pb.PlanResponse(
        action=pb.PlannedAction(
            action=p.action,
            frame_actions=p.frame_actions.tolist(),
            planned=p.planned.tolist(),
            visit_counts=p.visit_counts.tolist(),
            search_value=p.search_value,
            cost=p.cost,
            search_ms=p.search_ms,
            request_id=request_id,
            plan=p.plan.tolist(),
        )
    )


class PlannerServicer(planner_pb2_grpc.PlannerServicer):
    """Unpack, call the engine (searches on worker threads), pack."""

    def __init__(
        self, engine: eng.Engine, *, max_concurrent: int, stream_searches: int = STREAM_SEARCHES
    ) -> None:
        self.engine = engine
        # A batching engine runs `max_concurrent` batched searches at once, each of up to
        # `max_batch` requests: that many requests are in flight before one is refused.
        self.admission = Admission(
            max_concurrent * getattr(engine, "max_batch", 1), stream_searches=stream_searches
        )
        #: Plan calls answered with an action (Health reports it: a replica's load).
        self.plans_answered = 0
        #: The errors it met, each said once in one line (`_statuses`).
        self.reports = ErrorReports(log)

    @_statuses
    async def Plan(self, request: pb.PlanRequest, context: grpc.aio.ServicerContext) -> None:
        game_id, budget, gate_state, request_plan = _unpack_plan(request)
        self.engine.check(game_id, budget, gate_state, request_plan)
        state = self.engine.decode_state(game_id, request.state)
        rid = request.request_id
        loop = asyncio.get_running_loop()
        decided: asyncio.Future = loop.create_future()
        remaining = context.time_remaining()
        arrived = time.monotonic()
        clock = request.frame_clock if request.HasField("frame_clock") else None
        # A search not started by the time its answer could land is never started.
        when = {"abandoned": threading.Event()}
        if remaining is not None:
            when["deadline"] = arrived + remaining

        def work() -> tuple[eng.Decision, eng.Plan]:
            # One worker hop for both: the decision goes out while the search runs (it never
            # waits for a search: batch 1, on this thread), or (a forced k that lands at once)
            # with the action, valued by the option itself.
            if not self.engine.decides_first(game_id, budget):
                due = _search_deadline(when, clock, arrived, 0)
                plan = self.engine.plan(
                    game_id, state, budget, request.seed, plan=request_plan, **due
                )
                decision = self.engine.decision(game_id, state, budget, value=plan.root_value)
                loop.call_soon_threadsafe(_settle, decided, decision)
                return decision, plan
            decision = self.engine.decision(game_id, state, budget, gate_state)
            loop.call_soon_threadsafe(_settle, decided, decision)
            gated = budget == eng.GATE
            lands_in = decision.landing_frame - int(state.frame)
            due = _search_deadline(when, clock, arrived, lands_in)
            plan = self.engine.plan(
                game_id, state, decision.k, request.seed, gated=gated, plan=request_plan, **due
            )
            return decision, plan

        with self.admission.admit(request.stream_id, rid, remaining) as ticket:
            running = asyncio.ensure_future(ticket.run(work))
            try:
                await asyncio.wait((decided, running), return_when=asyncio.FIRST_COMPLETED)
                if decided.done():
                    ticket.check()  # superseded or past its deadline meanwhile: no decision
                    await context.write(_decision_msg(decided.result(), rid))
                decision, plan = await running
                if not decided.done():  # pragma: no cover (the decision is queued first)
                    await context.write(_decision_msg(decision, rid))
                await context.write(_action_msg(plan, rid))
                self.plans_answered += 1
            finally:
                when["abandoned"].set()  # a search still waiting for its batch never starts
                if not running.done():
                    running.cancel()  # drops the search's result
                elif not running.cancelled():
                    running.exception()  # retrieved: an error already answered is not logged

    @_statuses
    async def Health(self, request: pb.HealthRequest, context) -> pb.HealthResponse:
        done, total = self.engine.progress
        gates = len(self.engine.gate_ids)
        # Per game: its value, each budget's option, and its gate's decision and options.
        what = f"{total} executables" + (f" with {gates} gate(s)" if gates else "")
        if self.engine.ready:
            status, detail = pb.HealthResponse.SERVING, f"{what} compiled"
        else:
            ready = ", ".join(self.engine.ready_games) or "none yet"
            status = pb.HealthResponse.NOT_SERVING
            detail = f"compiling: {done}/{total} ({what}); games ready: {ready}"
        return pb.HealthResponse(
            status=status,
            detail=detail,
            device=str(self.engine.device),
            plans_answered=self.plans_answered,
        )

    @_statuses
    async def ListGames(self, request, context) -> pb.ListPlannerGamesResponse:
        games = [self.engine.loaded(g) for g in self.engine.game_ids]
        ready = set(self.engine.ready_games)
        gate_ready = set(self.engine.gate_ready_games)
        only = self.engine.serves_gated_only
        return pb.ListPlannerGamesResponse(
            games=[
                pb.PlannerGame(
                    game_id=g.game_id,
                    budgets=g.budgets,
                    simulations=g.simulations,
                    gate=g.gate is not None,
                    clock_gate=g.clock_gate,
                    checkpoint=g.checkpoint,
                    # A game served gated only is done once its gate plans.
                    compiling=g.game_id not in (gate_ready if only(g.game_id) else ready),
                    gate_ready=g.game_id in gate_ready,
                    gated_only=only(g.game_id),
                    committed=g.config.committed,
                    tree_k=g.config.tree_k,
                    plan_horizon=g.config.plan_horizon if g.config.committed == "plan" else 0,
                )
                for g in games
            ]
        )

    @_statuses
    async def Version(self, request, context) -> pb.VersionResponse:
        return pb.VersionResponse(
            protocol_version=wire.PROTOCOL_VERSION, server_version=rtplan.__version__
        )


def _handlers(servicer: PlannerServicer) -> grpc.GenericRpcHandler:
    """The service's method handlers, with lenient request parsing (see `wire.lenient`)."""
    methods: dict[str, Any] = {}
    for name, kind, req, resp in (
        ("Plan", grpc.unary_stream_rpc_method_handler, pb.PlanRequest, pb.PlanResponse),
        ("Health", grpc.unary_unary_rpc_method_handler, pb.HealthRequest, pb.HealthResponse),
        (
            "ListGames",
            grpc.unary_unary_rpc_method_handler,
            pb.ListPlannerGamesRequest,
            pb.ListPlannerGamesResponse,
        ),
        ("Version", grpc.unary_unary_rpc_method_handler, pb.VersionRequest, pb.VersionResponse),
    ):
        methods[name] = kind(
            getattr(servicer, name),
            request_deserializer=wire.lenient(req),
            response_serializer=resp.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)


#: Seconds a connection past its age keeps its open calls (the simulated clock's default plan
#: timeout): a reconnect never cuts a search short.
CONNECTION_AGE_GRACE_S = 30.0


def server_options(max_connection_age_s: float) -> list[tuple[str, int]]:
    """The planner service's gRPC server options (see `create_server`)."""
    return [
        ("grpc.max_receive_message_length", wire.MAX_MESSAGE_BYTES),
        ("grpc.max_send_message_length", wire.MAX_MESSAGE_BYTES),
        ("grpc.so_reuseport", 0),
        # Clients ping every connection every `wire.KEEPALIVE_TIME_MS` (server._planner_channel):
        # allow it, idle too. The server's floor is `min_ping_interval_without_data_ms` (gRPC's
        # default is 5 min: it answered the third 2 s ping with GOAWAY too_many_pings and the
        # client backed its pings off to 4 s, 8 s, ..., so a hung replica went unnoticed far
        # longer). `grpc.http2.max_ping_strikes` keeps its default (2): a client pinging faster
        # than the floor is still sent away.
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.min_ping_interval_without_data_ms", wire.KEEPALIVE_MIN_INTERVAL_MS),
        ("grpc.max_connection_age_ms", int(max_connection_age_s * 1000)),
        ("grpc.max_connection_age_grace_ms", int(CONNECTION_AGE_GRACE_S * 1000)),
    ]


def create_server(
    engine: eng.Engine,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    max_concurrent: int = 2,
    max_connection_age_s: float = 60.0,
    stream_searches: int = STREAM_SEARCHES,
) -> tuple[grpc.aio.Server, int]:
    """Builds the aio server around `engine` and binds it (not started).

    Args:
        engine: the planner engine; the server answers NOT_SERVING until its `compile()` ends.
        host: interface to bind.
        port: TCP port; 0 picks a free one.
        max_concurrent: searches that may run at once (batched searches with a batching
            engine, `max_batch` requests each); past it, RESOURCE_EXHAUSTED.
        max_connection_age_s: a connection's age at which the server sends GOAWAY (the client
            reconnects, resolving the address again), its open calls getting
            `CONNECTION_AGE_GRACE_S` more.
        stream_searches: searches one stream may run at once (a late one beside its next).

    Returns:
        (server, bound port). Start it with `await server.start()`.
    """
    server = grpc.aio.server(options=server_options(max_connection_age_s))
    servicer = PlannerServicer(
        engine, max_concurrent=max_concurrent, stream_searches=stream_searches
    )
    server.add_generic_rpc_handlers((_handlers(servicer),))
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"could not bind {host}:{port}")
    return server, bound


def load_engine(settings: PlannerServiceSettings) -> eng.Engine:
    """The engine of `settings`: its games' checkpoints on its device."""
    return eng.Engine.from_settings(settings)


async def serve(
    settings: PlannerServiceSettings,
    *,
    engine: eng.Engine | None = None,
    bound: Callable[[int], None] | None = None,
    on_ready: Callable[[str], None] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_gate_ready: Callable[[str], None] | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Starts the service and returns once it is SERVING.

    The server answers at once while the games compile on a thread, one after another: Health
    is NOT_SERVING until all are compiled, and Plan for a game not compiled yet is UNAVAILABLE.
    Stop it with `await server.stop(grace)`.

    Args:
        settings: host, port, device, checkpoints, games, max_concurrent.
        engine: an engine to serve instead of loading one from `settings`.
        bound: called with the bound port once the server answers, before compiling.
        on_ready: called with each game's id once it plans (`Engine.compile`), on the compile
            thread.
        on_start: called with each game's id and its number of executables as it starts
            compiling, on the compile thread.
        on_gate_ready: called with a gated game's id once its gated requests plan (its
            forced budgets compile after), on the compile thread.

    Returns:
        (started server, bound port).
    """
    guard_map_count()  # a load past vm.max_map_count raises, not SIGSEGV
    engine = engine if engine is not None else load_engine(settings)
    server, port = create_server(
        engine,
        host=settings.host,
        port=settings.port,
        max_concurrent=settings.max_concurrent,
        max_connection_age_s=settings.max_connection_age_s,
        stream_searches=settings.stream_searches,
    )
    await server.start()
    if bound is not None:
        bound(port)
    try:
        await _compile(engine, settings, on_ready, on_start, on_gate_ready)
    except BaseException:
        engine.close()
        await server.stop(None)
        raise
    return server, port


async def _compile(
    engine: eng.Engine,
    settings: PlannerServiceSettings | None = None,
    on_ready: Callable[[str], None] | None = None,
    on_start: Callable[[str, int], None] | None = None,
    on_gate_ready: Callable[[str], None] | None = None,
) -> None:
    """`engine.compile()` on a daemon thread, so a shutdown need not wait for it. With
    `settings.background_nice`, the games after the first compile behind it: a `CacheFiller`
    (over `settings`' checkpoints) compiles them first."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def work() -> None:
        error = None
        later = engine.game_ids[1:]
        filler = behind = None
        nice = None if settings is None else settings.background_nice
        if nice is not None and later:
            if cache_dir() is not None:
                filler = CacheFiller(settings, later, nice=nice)
                behind = filler.wait
            else:  # no cache to fill: the later games compile here, at low priority
                behind = _no_wait
        try:
            engine.compile(
                on_ready=on_ready,
                on_start=on_start,
                on_gate_ready=on_gate_ready,
                behind=behind,
                behind_nice=nice or 19,
            )
            # Compiling left a heap of ~265k long-lived objects (Tetris) that a full collection
            # walks in 100-200 ms: one inside a search is a missed frame. Out of the collector,
            # a collection walks only what the requests allocate.
            gc.freeze()
        except BaseException as e:
            error = e
        finally:
            if filler is not None:
                filler.stop()
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            loop.call_soon_threadsafe(settle, error)

    def _no_wait(game_id: str) -> None:
        pass

    threading.Thread(target=work, name="planner-compile", daemon=True).start()
    await done
