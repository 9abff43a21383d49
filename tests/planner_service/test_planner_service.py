"""The gRPC Planner service on port 0: plans equal in-process options, bad requests are named."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import gc
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from google.protobuf import any_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proto_statuses import declared
from rtplan import games, wire
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner, default_config
from rtplan.planner.compiled import OPTION, Executable
from rtplan.planner.compiled import _option as engine_option
from rtplan.planner.store import load_planner, save_planner
from rtplan.planner_service import BackgroundService, Engine, PlannerServiceSettings, _reports
from rtplan.planner_service.__main__ import main
from rtplan.planner_service.engine import resolve_device
from rtplan.planner_service.server import serve
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc, tensor_pb2
from support import TINY_NET as TINY

ROOT = Path(__file__).resolve().parents[2]
SNAKE, HEX = "snake-rt-v0", "speed-hex-v0"
# One budget per game keeps the compiles few (each costs seconds on CPU).
CONFIGS = {
    SNAKE: dataclasses.replace(
        default_config(SNAKE),
        network=dataclasses.replace(TINY, value_bins=11, value_max=20.0, time_input=True),
        budgets=(2,),
        simulations=(2,),
        game_params=(("num_rows", 5), ("num_cols", 5)),
    ),
    HEX: dataclasses.replace(default_config(HEX), network=TINY, budgets=(2,), simulations=(2,)),
}
#: The event JAX reports to its monitoring listeners for every top-level trace.
JAXPR_TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
# Compiles ~40% faster on CPU; the in-process reference is compiled with the same options.
FAST_COMPILE = {"xla_backend_optimization_level": 0}
PROPER = {  # statuses a malformed request may get; never UNKNOWN, INTERNAL, UNAVAILABLE, timeouts
    grpc.StatusCode.OK,
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ABORTED,
}


# Fixtures: one real server per module, in-process on its own event-loop thread --------------


class _HeldEngine:
    """The real engine, except that `plan` waits while the test holds it (slow searches on cue)."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.free = threading.Event()
        self.free.set()
        self.entered = threading.Semaphore(0)

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def plan(self, *args, **kwargs):
        self.entered.release()
        assert self.free.wait(30), "test never released the search"
        return self._engine.plan(*args, **kwargs)


@dataclasses.dataclass
class Service:
    engine: Engine
    stub: planner_pb2_grpc.PlannerStub
    channel: grpc.Channel
    held: _HeldEngine
    held_stub: planner_pb2_grpc.PlannerStub
    before: tuple  # (Health, Plan status) before compile() ended
    reference: dict  # game id -> Future of the in-process option's output
    midway: dict  # what the service said once Snake was compiled and Hex was not yet


def _reference(path, game_id: str, k: int, seed: int):
    """Option k at `_state(game_id)`, in-process: the checkpoint's planner, deterministic."""
    cfg, params, _ = load_planner(game_id, str(path))
    planner = Planner(dataclasses.replace(cfg, gumbel_scale=0.0))
    batch = jax.tree.map(lambda x: x[None], _state(game_id))
    keys = jax.random.PRNGKey(seed)[None]
    option = jax.jit(planner.option, static_argnums=3).lower(params, keys, batch, k)
    return jax.device_get(option.compile(FAST_COMPILE)(params, keys, batch))


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    for cfg in CONFIGS.values():
        params = Planner(cfg).init_params(jax.random.PRNGKey(0))
        save_planner(planner_path(root, cfg.game_id), cfg, params, note="tiny test net")
    engine = Engine.from_dir(root, compiler_options=FAST_COMPILE)
    service = BackgroundService(engine, max_concurrent=4).start(compile=False)
    channel = grpc.insecure_channel(service.address)
    stub = planner_pb2_grpc.PlannerStub(channel)
    health = stub.Health(pb.HealthRequest(), timeout=10)
    early = _call(stub, _request(SNAKE, k=2))
    # The in-process references compile alongside the engine (XLA compiles off the GIL).
    pool = concurrent.futures.ThreadPoolExecutor(2)
    reference = {g: pool.submit(_reference, planner_path(root, g), g, 2, 7) for g in CONFIGS}
    midway = {}

    def ready(game_id: str) -> None:  # on the compile thread, before the next game compiles
        if game_id == SNAKE:
            midway["health"] = stub.Health(pb.HealthRequest(), timeout=10)
            listed = stub.ListGames(pb.ListPlannerGamesRequest(), timeout=10).games
            midway["ready"] = {g.game_id: not g.compiling for g in listed}
            midway[SNAKE] = _call(stub, _request(SNAKE, k=2))
            midway[HEX] = _call(stub, _request(HEX, k=2))

    engine.compile(on_ready=ready)
    held = _HeldEngine(engine)
    # One search per stream at a time: the tests below hold a stream's queue on cue.
    held_service = BackgroundService(held, max_concurrent=2, stream_searches=1).start()
    held_channel = grpc.insecure_channel(held_service.address)
    yield Service(
        engine,
        stub,
        channel,
        held,
        planner_pb2_grpc.PlannerStub(held_channel),
        (health, early),
        reference,
        midway,
    )
    pool.shutdown()
    held.free.set()
    channel.close()
    held_channel.close()
    service.stop()
    held_service.stop()


# Helpers ----------------------------------------------------------------------------------------


@functools.cache
def _game(game_id: str) -> games.Game:
    return games.make(game_id, **dict(CONFIGS[game_id].game_params))


@functools.cache
def _state(game_id: str) -> games.State:
    """A mid-game state: snake two frames in, hex three moves in."""
    game = _game(game_id)

    def play(key):
        state = game.init(key)
        for _ in range(2 if game_id == SNAKE else 3):
            state = game.step(state, jnp.argmax(state.legal_action_mask))
        return state

    return jax.device_get(jax.jit(play)(jax.random.PRNGKey(3)))


@functools.cache
def _state_msg(game_id: str) -> bytes:
    return wire.state_to_proto(_game(game_id), _state(game_id)).SerializeToString()


def _request(game_id, *, k=None, gate=False, stream="", rid=0, seed=0, state_game=None):
    """A Plan request for a mid-game state of `state_game` (default: the requested game)."""
    budget = pb.Budget(gate=True) if gate else pb.Budget(k=k)
    return pb.PlanRequest(
        game_id=game_id,
        state=tensor_pb2.GameState.FromString(_state_msg(state_game or game_id)),
        budget=budget,
        stream_id=stream,
        request_id=rid,
        seed=seed,
    )


def _call(stub, request, timeout: float = 20.0):
    """(status code, details, trailing metadata dict, responses) of one Plan call."""
    responses = []
    call = stub.Plan(request, timeout=timeout)
    try:
        for r in call:
            responses.append(r)
    except grpc.RpcError as e:
        assert e.code() in declared("Planner", "Plan"), e  # every test's statuses: planner.proto
        return e.code(), e.details(), dict(e.trailing_metadata() or ()), responses
    return grpc.StatusCode.OK, "", dict(call.trailing_metadata() or ()), responses


def _error(stub, request) -> tuple[grpc.StatusCode, str]:
    code, details, _, responses = _call(stub, request)
    assert not any(r.HasField("action") for r in responses)
    return code, details


# The plan itself --------------------------------------------------------------------------------


@pytest.mark.parametrize("game_id", [SNAKE, HEX])
def test_forced_k_plan_equals_the_in_process_option(service, game_id):
    k, seed = 2, 7
    code, _, _, responses = _call(service.stub, _request(game_id, k=k, rid=5, seed=seed))
    assert code == grpc.StatusCode.OK
    assert [r.WhichOneof("response") for r in responses] == ["decision", "action"]
    decision, action = responses[0].decision, responses[1].action
    out = service.reference[game_id].result(timeout=300)

    assert decision.k == k and decision.request_id == 5 and not decision.gate_probabilities
    np.testing.assert_allclose(decision.value, out.root_value[0], rtol=1e-5, atol=1e-6)
    frame = int(_state(game_id).frame)
    assert frame > 0
    assert decision.landing_frame == (frame if game_id == HEX else frame + k - 1)

    assert action.action == out.actions[0, -1]
    assert list(action.frame_actions) == out.actions[0].tolist()
    assert list(action.planned) == out.planned[0].tolist()
    assert list(action.visit_counts) == out.visit_counts[0].tolist()
    np.testing.assert_allclose(action.search_value, out.search_value[0], rtol=1e-5, atol=1e-6)
    assert action.cost == out.cost[0] == (k if game_id == HEX else 0)
    assert action.search_ms > 0 and action.request_id == 5


def test_health_is_not_serving_until_every_budget_is_compiled(service):
    health, (code, details, _, _) = service.before
    assert health.status == pb.HealthResponse.NOT_SERVING and "compiling: 0/4" in health.detail
    assert code == grpc.StatusCode.UNAVAILABLE and "still compiling" in details
    now = service.stub.Health(pb.HealthRequest(), timeout=5)
    assert now.status == pb.HealthResponse.SERVING and now.device == "cpu:0"


def test_each_game_plans_once_its_own_budgets_are_compiled(service):
    """Games compile in load order; Snake plans while Hex still compiles, which is refused by
    name, and Health stays NOT_SERVING until every game is compiled."""
    midway = service.midway
    assert midway["ready"] == {SNAKE: True, HEX: False}
    assert midway["health"].status == pb.HealthResponse.NOT_SERVING
    assert f"games ready: {SNAKE}" in midway["health"].detail
    code, _, _, responses = midway[SNAKE]
    assert code == grpc.StatusCode.OK and any(r.HasField("action") for r in responses)
    code, details, _, _ = midway[HEX]
    assert code == grpc.StatusCode.UNAVAILABLE
    assert f"the planner for {HEX} is still compiling" in details and SNAKE in details
    listed = service.stub.ListGames(pb.ListPlannerGamesRequest(), timeout=5).games
    assert not any(g.compiling for g in listed)


def test_list_games_and_version(service):
    listed = service.stub.ListGames(pb.ListPlannerGamesRequest(), timeout=5).games
    assert [g.game_id for g in listed] == [SNAKE, HEX]
    for g in listed:
        assert list(g.budgets) == [2] and list(g.simulations) == [2] and not g.gate
        assert g.checkpoint.endswith(f"{g.game_id}/planner.msgpack")
    version = service.stub.Version(pb.VersionRequest(), timeout=5)
    assert version.protocol_version == wire.PROTOCOL_VERSION == "rtplan.v1"
    assert version.server_version


# Errors name their cause ------------------------------------------------------------------------


def test_gate_without_a_gate_checkpoint_is_failed_precondition(service):
    code, details = _error(service.stub, _request(SNAKE, gate=True))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert details == "no gate checkpoint loaded for snake-rt-v0"


def test_unknown_game_names_the_known_games(service):
    code, details = _error(service.stub, _request("chess-v9", k=2, state_game=SNAKE))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown game 'chess-v9'" in details
    assert all(g in details for g in games.registered_games())


def test_game_without_a_checkpoint_is_failed_precondition(service):
    code, details = _error(service.stub, _request("pacman-rt-v0", k=1, state_game=SNAKE))
    assert code == grpc.StatusCode.FAILED_PRECONDITION
    assert "no planner checkpoint loaded for pacman-rt-v0" in details and SNAKE in details


def test_budget_not_offered_lists_the_budgets(service):
    code, details = _error(service.stub, _request(SNAKE, k=3))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "k=3 is not a budget of snake-rt-v0; budgets: 2"


def _leaf(msg, path: str):
    return msg.leaves[list(msg.paths).index(path)]


def _wrong_dtype(m):
    _leaf(m, ".frame").dtype = tensor_pb2.DTYPE_FLOAT32


def _wrong_shape(m):
    leaf = _leaf(m, ".legal_action_mask")
    leaf.shape[:] = [5]
    leaf.data = bytes(5)


def _short_payload(m):
    leaf = _leaf(m, ".inner.env.body")
    leaf.data = leaf.data[:-3]


def _missing_leaf(m):
    del m.leaves[-1]


def _renamed_leaf(m):
    m.paths[2] = ".inner.env.bodystate"


def _finished(m):
    _leaf(m, ".terminated").data = b"\x01"


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (_wrong_dtype, "state.frame: dtype DTYPE_FLOAT32, expected DTYPE_INT32"),
        (_wrong_shape, "state.legal_action_mask: shape (5,), expected (4,)"),
        (_short_payload, "state.inner.env.body: payload has 22 bytes, shape (5, 5) of DTYPE_BOOL"),
        (_missing_leaf, "state of snake-rt-v0 needs 18 leaves, got 17"),
        (_renamed_leaf, "state leaf 2 is '.inner.env.bodystate', expected '.inner.env.body_state'"),
        (_finished, "state of snake-rt-v0 is finished"),
    ],
)
def test_malformed_states_get_specific_invalid_argument(service, mutate, expected):
    request = _request(SNAKE, k=2)
    mutate(request.state)
    code, details = _error(service.stub, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and expected in details, details


def test_state_of_another_game(service):
    code, details = _error(service.stub, _request(SNAKE, k=2, state_game=HEX))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == "state is of game 'speed-hex-v0', expected 'snake-rt-v0'"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda r: r.ClearField("game_id"), "game_id is empty"),
        (lambda r: r.ClearField("state"), "state is missing"),
        (lambda r: r.ClearField("budget"), "budget is missing"),
        (lambda r: r.budget.__setattr__("gate", False), "budget.gate is false"),
        (lambda r: r.__setattr__("stream_id", "s" * 200), "stream_id has 200 chars"),
        (
            lambda r: r.extension.CopyFrom(any_pb2.Any(type_url="x/y.Z")),
            "extension 'x/y.Z' is not supported",
        ),
    ],
)
def test_protocol_errors_are_named(service, edit, expected):
    request = _request(SNAKE, k=2)
    edit(request)
    code, details = _error(service.stub, request)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and expected in details, details


def test_bytes_that_are_no_request_get_invalid_argument(service):
    raw = service.channel.unary_stream("/rtplan.v1.Planner/Plan")
    with pytest.raises(grpc.RpcError) as e:
        list(raw(b"\xff\xff\xff\xff", timeout=5))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "not a valid rtplan.v1.PlanRequest" in e.value.details()


# Concurrency: superseded requests, the slot limit, deadlines, cancellation ----------------------


class _Stream:
    """A Plan call consumed message by message (the sync iterator blocks until each arrives)."""

    def __init__(self, stub, request, timeout: float = 20.0) -> None:
        self.call = stub.Plan(request, timeout=timeout)

    def next(self):
        try:
            return next(self.call)
        except grpc.RpcError as e:
            return e


def _hold(held: _HeldEngine) -> None:
    """Makes searches wait; the previous test left no search running (see `_wait_idle`)."""
    held.free.clear()
    held.entered = threading.Semaphore(0)


def _wait_entered(held: _HeldEngine, n: int = 1) -> None:
    for _ in range(n):
        assert held.entered.acquire(timeout=20)


def _wait_idle(stub) -> None:
    """Waits until a probe request gets a slot (abandoned searches have returned)."""
    for _ in range(200):
        code, *_ = _call(stub, _request(SNAKE, k=2))
        if code != grpc.StatusCode.RESOURCE_EXHAUSTED:
            assert code == grpc.StatusCode.OK
            return
        time.sleep(0.02)
    raise AssertionError("slots never freed")


def test_superseded_request_ends_aborted_and_never_gets_its_action(service):
    held, stub = service.held, service.held_stub
    _hold(held)
    old = _Stream(stub, _request(SNAKE, k=2, stream="s1", rid=1))
    assert old.next().decision.request_id == 1  # its decision; its search now waits
    _wait_entered(held)
    new = _Stream(stub, _request(SNAKE, k=2, stream="s1", rid=2))
    ended = old.next()  # ends at once, while its search is still held
    assert isinstance(ended, grpc.RpcError) and ended.code() == grpc.StatusCode.ABORTED
    assert "superseded by request 2" in ended.details()
    # An older id on the stream is refused at once, before any work.
    code, details = _error(stub, _request(SNAKE, k=2, stream="s1", rid=1))
    assert code == grpc.StatusCode.ABORTED and "superseded by request 2" in details
    held.free.set()  # the new request searches once the stream's old search has returned
    assert new.next().decision.request_id == 2
    assert new.next().action.request_id == 2
    _wait_idle(stub)


def test_a_burst_of_one_streams_requests_never_exhausts_the_slots(service):
    """What a paused planner sees when it resumes under a live agent: its search of an old
    request still running, and the requests the agent sent meanwhile, all at once. Each one
    supersedes the one before before it searches, so the superseded give up their slots and
    the newest runs once the old search returns (as the agent's next request would)."""
    held, stub = service.held, service.held_stub
    _hold(held)
    old = _Stream(stub, _request(SNAKE, k=2, stream="burst", rid=1))
    assert old.next().HasField("decision")
    _wait_entered(held)  # its search holds a worker thread until released
    burst = [_Stream(stub, _request(SNAKE, k=2, stream="burst", rid=i)) for i in range(2, 8)]
    for call in burst[:-1]:  # superseded while the old search still runs
        ended = call.next()
        assert isinstance(ended, grpc.RpcError), ended
        assert ended.code() == grpc.StatusCode.ABORTED and "superseded" in ended.details()
    held.free.set()
    newest = burst[-1]
    assert newest.next().decision.request_id == 7
    assert newest.next().action.request_id == 7
    ended = old.next()
    assert isinstance(ended, grpc.RpcError) and ended.code() == grpc.StatusCode.ABORTED
    _wait_idle(stub)


def _outcome(call) -> grpc.StatusCode:
    """The final status of a Plan call, read to its end."""
    try:
        list(call)
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


def test_a_paused_service_process_serves_the_newest_request_when_it_resumes(tmp_path):
    """`python -m planner_service` paused for 2 s (SIGSTOP) while a client sends one stream's
    requests every 50 ms, then resumed (SIGCONT): the superseded end ABORTED, the newest and the
    next request get their plans, none is refused for lack of a slot."""
    # 512 simulations: ~0.1 s searches, so the first search of the burst still runs while the
    # rest of the burst arrives.
    cfg = dataclasses.replace(CONFIGS[SNAKE], simulations=(512,))
    params = Planner(cfg).init_params(jax.random.PRNGKey(0))
    save_planner(planner_path(tmp_path, SNAKE), cfg, params)
    cmd = [sys.executable, "-m", "rtplan.planner_service", "--checkpoint-dir", str(tmp_path)]
    cmd += ["--port", "0", "--max-concurrent", "2", "--log-level", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        # "bound to" as it binds, then "listening on" once compiled and serving.
        line = next(x for x in proc.stdout if "planner service listening on" in x)
        port = line.split(" listening on ")[1].split()[0].rsplit(":", 1)[1]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)
            assert _call(stub, _request(SNAKE, k=2, stream="agent", rid=1), 60)[0].name == "OK"
            os.kill(proc.pid, signal.SIGSTOP)
            try:
                calls = []
                for rid in range(2, 42):
                    calls.append(stub.Plan(_request(SNAKE, k=2, stream="agent", rid=rid), 60))
                    time.sleep(0.05)
            finally:
                os.kill(proc.pid, signal.SIGCONT)
            codes = [_outcome(c).name for c in calls]
            assert set(codes[:-1]) == {"ABORTED"} and codes[-1] == "OK", codes
            assert _call(stub, _request(SNAKE, k=2, stream="agent", rid=42), 60)[0].name == "OK"
    finally:
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0


def test_past_the_limit_resource_exhausted_with_a_retry_hint(service):
    held, stub = service.held, service.held_stub
    _hold(held)
    running = [_Stream(stub, _request(SNAKE, k=2, stream=s, rid=1)) for s in "ab"]
    for r in running:
        assert r.next().HasField("decision")
    _wait_entered(held, 2)
    code, details, trailing, responses = _call(stub, _request(HEX, k=2))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED and not responses
    assert "2 searches running, the limit is 2" in details and "retry" in details
    assert int(trailing["retry-after-ms"]) >= 1
    held.free.set()
    assert all(r.next().HasField("action") for r in running)
    _wait_idle(stub)


def test_deadline_exceeded_sends_no_action_and_the_server_stays_healthy(service):
    held, stub = service.held, service.held_stub
    _hold(held)
    code, _, _, responses = _call(stub, _request(SNAKE, k=2), timeout=0.5)
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert [r.WhichOneof("response") for r in responses] == ["decision"]
    held.free.set()
    assert stub.Health(pb.HealthRequest(), timeout=5).status == pb.HealthResponse.SERVING
    _wait_idle(stub)


def _admitted(stub, request) -> _Stream:
    """The first call of `request` to get a slot (its decision), retried while RESOURCE_EXHAUSTED
    for at most ~10 s: a slot that never frees fails the test."""
    for _ in range(500):
        call = _Stream(stub, request)
        first = call.next()
        if not isinstance(first, grpc.RpcError):
            assert first.HasField("decision")
            return call
        assert first.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, first
        time.sleep(0.02)
    raise AssertionError("no slot freed")


class _LoopBlockingEngine:
    """The real engine, except that `check` (which the Plan handler runs on the service's event
    loop) blocks the loop for `delay_s`: a caller whose deadline is shorter has gone by the time
    its request is refused as past its deadline, as when a loaded machine answers late."""

    def __init__(self, engine: Engine, delay_s: float) -> None:
        self._engine = engine
        self.delay_s = delay_s

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def check(self, *args, **kwargs):
        time.sleep(self.delay_s)
        return self._engine.check(*args, **kwargs)


def test_an_answer_whose_caller_has_gone_is_one_line_and_its_repeats_are_counted(
    service, caplog, monkeypatch
):
    """gRPC fails to send a refusal (DeadlineError) to a caller whose deadline has passed
    (`ExecuteBatchError`; grpc.aio logged it as a ~30-line traceback, the demo's terminal at
    285 s): the service says so once, in one line with what it meant for play, counts the
    repeats (a line per `REPEATS_EVERY_S`) and keeps each traceback at DEBUG."""
    monkeypatch.setattr(_reports, "REPEATS_EVERY_S", 1.0)
    blocking = _LoopBlockingEngine(service.engine, 0.3)
    with caplog.at_level(logging.DEBUG), BackgroundService(blocking) as late:
        with grpc.insecure_channel(late.address) as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)
            for _ in range(3):
                code, _, _, responses = _call(stub, _request(SNAKE, k=2), timeout=0.05)
                assert (code, responses) == (grpc.StatusCode.DEADLINE_EXCEEDED, [])
                time.sleep(0.5)  # the loop is free again: the next call reaches the handler
            blocking.delay_s = 0.0
            assert stub.Health(pb.HealthRequest(), timeout=5).status == pb.HealthResponse.SERVING
        time.sleep(1.5)  # the repeats' line
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in said] == [
        "planner service: Plan: the caller had gone when its DEADLINE_EXCEEDED answer went out "
        "(DeadlineError: deadline already passed when the request arrived; sending it: "
        "ExecuteBatchError); the search missed its deadline: the session played its fallback "
        "(repeats counted: a line per 1 s at most)",
        "planner service: 2 more of Plan answers whose caller had gone (DeadlineError) in the "
        "last 1 s (3 in all)",
    ], [r.getMessage() for r in said]
    assert not any(r.exc_info or r.exc_text for r in said)  # one line each, no traceback
    tracebacks = [r for r in caplog.records if r.levelno == logging.DEBUG and r.exc_info]
    assert [type(r.exc_info[1]).__name__ for r in tracebacks] == ["ExecuteBatchError"] * 3


def test_cancelled_calls_free_their_slots(service):
    """A cancelled call that is not searching gives its slot back at once; one whose search
    runs keeps it until the search returns (its worker thread is still busy)."""
    held, stub = service.held, service.held_stub
    _hold(held)
    abandoned = _Stream(stub, _request(SNAKE, k=2, stream="c", rid=1))
    assert abandoned.next().HasField("decision")
    _wait_entered(held)
    # The newer request of the stream waits for the stream's search, holding the other slot.
    waiting = _Stream(stub, _request(SNAKE, k=2, stream="c", rid=2))
    assert abandoned.next().code() == grpc.StatusCode.ABORTED
    assert _error(stub, _request(HEX, k=2))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    waiting.call.cancel()
    # Its slot frees while the abandoned search is still held.
    probe = _admitted(stub, _request(SNAKE, k=2, stream="p"))
    _wait_entered(held)
    probe.call.cancel()
    # Both searches are held: both slots stay taken, cancelled or not.
    assert _error(stub, _request(HEX, k=2))[0] == grpc.StatusCode.RESOURCE_EXHAUSTED
    held.free.set()
    _wait_idle(stub)  # the abandoned and the cancelled searches returned their slots


def test_a_late_search_runs_beside_its_streams_next_request(service):
    """The service's default (two searches per stream): a session whose search outlasts its
    landing frame gets its next decision at once, beside the late search, instead of after
    it; a third request waits for the oldest (the bound), and the newest gets its action."""
    held = service.held
    overlap = BackgroundService(held, max_concurrent=4).start()  # compiled: no compile
    try:
        with grpc.insecure_channel(overlap.address) as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)
            _hold(held)
            late = _Stream(stub, _request(SNAKE, k=2, stream="o", rid=1))
            assert late.next().decision.request_id == 1
            _wait_entered(held)  # the late search holds its thread
            nxt = _Stream(stub, _request(SNAKE, k=2, stream="o", rid=2))
            assert late.next().code() == grpc.StatusCode.ABORTED
            assert nxt.next().decision.request_id == 2  # while the late search still runs
            _wait_entered(held)  # two searches of the stream run: the bound
            third = _Stream(stub, _request(SNAKE, k=2, stream="o", rid=3))
            assert nxt.next().code() == grpc.StatusCode.ABORTED
            held.free.set()
            assert third.next().decision.request_id == 3
            assert third.next().action.request_id == 3
            _wait_idle(stub)
    finally:
        held.free.set()
        overlap.stop()


def test_a_cancelled_request_whose_search_has_not_started_is_never_computed(service):
    """A caller that gives up while its request waits to search (here: the search is held at
    its start) never gets the search run: the engine drops it unstarted."""
    held, stub = service.held, service.held_stub
    _hold(held)
    before = service.engine.not_started
    gone = _Stream(stub, _request(SNAKE, k=2, stream="x", rid=1))
    assert gone.next().HasField("decision")
    _wait_entered(held)
    gone.call.cancel()
    time.sleep(0.1)  # the service sees the cancellation before the search may start
    held.free.set()
    _wait_idle(stub)
    assert service.engine.not_started == before + 1


def test_a_search_its_deadline_cannot_fit_is_never_computed(service):
    """Once a search of its kind has been timed, a request whose deadline leaves less than
    that is answered DEADLINE_EXCEEDED without searching (unbatched as batched)."""
    assert _call(service.stub, _request(SNAKE, k=2))[0] == grpc.StatusCode.OK  # timed
    before = service.engine.not_started
    service.engine._search_s[(SNAKE, OPTION, 2)] = 5.0  # as if a search took 5 s
    try:
        code, details, _, responses = _call(service.stub, _request(SNAKE, k=2), timeout=2.0)
    finally:
        service.engine._search_s[(SNAKE, OPTION, 2)] = 0.0
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED, details
    assert not any(r.HasField("action") for r in responses)
    assert service.engine.not_started == before + 1


def test_a_decision_goes_out_before_the_search_only_when_it_lands_later(service):
    """Snake k=2 lands a frame after its decision: the decision comes while the search is held.
    A Speed Hex move lands at once: its decision waits for the search (and takes its root value,
    `test_forced_k_plan_equals_the_in_process_option`), so nothing arrives until the search
    returns, then the decision and the action, in that order."""
    held, stub = service.held, service.held_stub
    _hold(held)
    early = _Stream(stub, _request(SNAKE, k=2, stream="early"))
    assert early.next().HasField("decision")
    _wait_entered(held)
    held.free.set()
    assert early.next().HasField("action")
    _hold(held)
    at_once = stub.Plan(_request(HEX, k=2, stream="at-once"), timeout=60)
    _wait_entered(held)
    got = []
    reader = threading.Thread(target=lambda: got.extend(at_once))
    reader.start()
    reader.join(1.0)
    assert reader.is_alive() and got == []  # held search: no decision yet
    held.free.set()
    reader.join(60)
    assert [r.WhichOneof("response") for r in got] == ["decision", "action"]
    assert got[0].decision.k == 2 and got[0].decision.landing_frame == int(_state(HEX).frame)
    _wait_idle(stub)


def test_serving_moves_the_compiled_heap_out_of_the_collector(tmp_path):
    """A full collection walks the compiled heap (100-200 ms on Tetris' service, measured in
    docs/results.md); a search it interrupts misses its frame. `serve` freezes what compiling
    left, so that collections walk only what the requests allocate."""
    cfg = CONFIGS[SNAKE]
    save_planner(
        planner_path(tmp_path, SNAKE), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0))
    )
    engine = Engine.from_dir(tmp_path, compiler_options=FAST_COMPILE)
    settings = PlannerServiceSettings(checkpoint_dir=tmp_path, port=0)

    async def serve_and_count() -> tuple[int, int]:
        before = gc.get_freeze_count()
        server, _ = await serve(settings, engine=engine)
        after = gc.get_freeze_count()
        await server.stop(None)
        return before, after

    gc.unfreeze()
    try:
        before, after = asyncio.run(serve_and_count())
    finally:
        gc.unfreeze()
    assert before == 0 and after > 10_000, (before, after)


def test_health_answers_while_searches_run(service):
    held, stub = service.held, service.held_stub
    _hold(held)
    running = _Stream(stub, _request(SNAKE, k=2))
    assert running.next().HasField("decision")
    _wait_entered(held)
    # Blocked behind the search, Health would wait until the release below: its timeout fires.
    during = stub.Health(pb.HealthRequest(), timeout=10)
    assert during.status == pb.HealthResponse.SERVING
    held.free.set()
    assert running.next().HasField("action")
    # Health counts the answered plans (a replica's load); the count follows the action's send.
    end = time.monotonic() + 10
    while stub.Health(pb.HealthRequest(), timeout=10).plans_answered == during.plans_answered:
        assert time.monotonic() < end, "plans_answered did not count the answer"
        time.sleep(0.01)
    assert stub.Health(pb.HealthRequest(), timeout=10).plans_answered == during.plans_answered + 1


# Fuzz: malformed requests of every kind get a proper status, fast -------------------------------

_FUZZ_SETTINGS = settings(
    deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True
)


def _fuzz(service, n: int, send, **strategies) -> None:
    """Sends `n` generated requests through `send`, then checks the service still serves.

    Each test counts its own calls and checks health itself, so the tests hold however a
    parallel runner spreads them over processes."""
    calls = []

    @settings(_FUZZ_SETTINGS, max_examples=n)
    @given(**strategies)
    def run(**drawn):
        send(**drawn)
        calls.append(1)

    run()
    assert len(calls) >= n // 2, (len(calls), n)  # the strategies really produced requests
    assert service.stub.Health(pb.HealthRequest(), timeout=5).status == pb.HealthResponse.SERVING
    code, _, _, responses = _call(service.stub, _request(HEX, k=2))
    assert code == grpc.StatusCode.OK and len(responses) == 2


def _fuzz_call(service, request_bytes: bytes, method: str = "Plan") -> None:
    """Sends raw bytes to a method; the answer must be a proper status within the timeout."""
    path = f"/rtplan.v1.Planner/{method}"
    if method == "Plan":
        call = service.channel.unary_stream(path)
        try:
            list(call(request_bytes, timeout=10))
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
    else:
        try:
            service.channel.unary_unary(path)(request_bytes, timeout=10)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
    assert code in PROPER, code
    assert code in declared("Planner", method), (method, code)  # declared in planner.proto


_tensors = st.builds(
    tensor_pb2.Tensor,
    dtype=st.integers(-3, 12),
    shape=st.lists(st.integers(-2, 130), max_size=4),
    data=st.binary(max_size=64),
)
_game_ids = st.sampled_from([SNAKE, HEX, "pacman-rt-v0", "", "snake-rt-v1", "\x00", "é" * 3])
_budgets = st.one_of(
    st.builds(pb.Budget),
    st.builds(pb.Budget, gate=st.booleans()),
    st.builds(pb.Budget, k=st.integers(-(2**31), 2**31 - 1)),
)


@st.composite
def _random_requests(draw):
    state = tensor_pb2.GameState(
        game_id=draw(_game_ids),
        paths=draw(st.lists(st.text(max_size=12), max_size=4)),
        leaves=draw(st.lists(_tensors, max_size=4)),
    )
    return pb.PlanRequest(
        game_id=draw(_game_ids),
        state=state if draw(st.booleans()) else None,
        budget=draw(_budgets),
        stream_id=draw(st.text(max_size=8)),
        request_id=draw(st.integers(0, 2**64 - 1)),
        seed=draw(st.integers(0, 2**64 - 1)),
    )


@st.composite
def _broken_states(draw):
    """A real state of a served game with one leaf broken: wrong dtype, shape, or payload."""
    game_id = draw(st.sampled_from([SNAKE, HEX]))
    request = _request(game_id, k=2, stream=draw(st.text(max_size=3)))
    request.request_id = draw(st.integers(0, 5))
    leaves = request.state.leaves
    i = draw(st.integers(0, len(leaves) - 1))
    how = draw(st.sampled_from(["dtype", "shape", "truncate", "extend", "drop", "dup", "path"]))
    if how == "dtype":
        leaves[i].dtype = draw(st.sampled_from([d for d in range(-1, 11) if d != leaves[i].dtype]))
    elif how == "shape":
        leaves[i].shape.append(draw(st.integers(0, 3)))
    elif how == "truncate":
        leaves[i].data = leaves[i].data[: draw(st.integers(0, len(leaves[i].data) - 1))]
    elif how == "extend":
        leaves[i].data += draw(st.binary(min_size=1, max_size=8))
    elif how == "drop":
        del leaves[i]
    elif how == "dup":
        leaves.append(leaves[i])
    else:
        request.state.paths[i] = draw(
            st.text(max_size=10).filter(lambda p: p != request.state.paths[i])
        )
    return request


def test_fuzz_random_requests(service):
    _fuzz(
        service,
        450,
        lambda request: _fuzz_call(service, request.SerializeToString()),
        request=_random_requests(),
    )


def test_fuzz_broken_states(service):
    def send(request):
        code, *_ = _call(service.stub, request, timeout=10)
        assert code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.ABORTED), code
        assert code in declared("Planner", "Plan"), code  # declared in planner.proto

    _fuzz(service, 350, send, request=_broken_states())


def test_fuzz_raw_bytes(service):
    _fuzz(
        service,
        300,
        lambda data, method: _fuzz_call(service, data, method),
        data=st.one_of(st.binary(max_size=256), st.just(b"")),
        method=st.sampled_from(["Plan", "Plan", "Health", "ListGames", "Version"]),
    )


# Settings, entry point, and compile discipline --------------------------------------------------


def test_settings_read_the_environment(monkeypatch):
    monkeypatch.setenv("RTPLAN_PLANNER_GAMES", "snake-rt-v0, speed-hex-v0")
    monkeypatch.setenv("RTPLAN_PLANNER_MAX_CONCURRENT", "3")
    s = PlannerServiceSettings(port=0)
    assert s.games == (SNAKE, HEX) and s.max_concurrent == 3 and s.port == 0


def test_main_fails_clearly_without_checkpoints_or_device(tmp_path, capsys):
    assert main(["--checkpoint-dir", str(tmp_path), "--port", "0"]) == 1
    assert "no planner.msgpack of a registered game" in capsys.readouterr().err
    assert main(["--checkpoint-dir", str(tmp_path), "--games", SNAKE, "--port", "0"]) == 1
    assert f"no planner checkpoint for {SNAKE}" in capsys.readouterr().err
    assert main(["--device", "cuda:0", "--checkpoint-dir", str(tmp_path), "--port", "0"]) == 1
    assert "device 'cuda:0' not available" in capsys.readouterr().err
    assert main(["--max-concurrent", "0"]) == 2


def test_main_refuses_a_port_in_use_in_one_line_before_loading_anything(tmp_path, capsys):
    """(It loaded every checkpoint, then died with gRPC's RuntimeError traceback.)"""
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        assert main(["--checkpoint-dir", str(tmp_path), "--port", str(port)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"planner service: cannot bind 127.0.0.1:{port} (Address already in use); pass --port N "
        "(0: any free) or set RTPLAN_PLANNER_PORT"
    ]


def test_device_specs():
    assert resolve_device("cpu") == jax.devices("cpu")[0]
    with pytest.raises(ValueError, match="not one of"):
        resolve_device("tpu:x")


def test_serving_never_retraced(service):
    """Requests run the executables compiled ahead of time: none traces (JAX reports every
    top-level trace to its monitoring listeners), and a traced option would be seen."""
    for reference in service.reference.values():
        reference.result(timeout=300)  # their traces are done
    requests = [_request(g, k=2, seed=s) for g in CONFIGS for s in (0, 1)]  # states traced
    traces = []

    def on_event(event: str, _duration: float, **kwargs) -> None:
        if event == JAXPR_TRACE_EVENT:
            traces.append(kwargs.get("fun_name"))

    jax.monitoring.register_event_duration_secs_listener(on_event)
    try:
        for request in requests:
            assert _call(service.stub, request)[0] == grpc.StatusCode.OK
        assert traces == []
        # The check can fail: an option served through `jax.jit` (not compiled ahead) traces.
        table = service.engine.loaded(HEX).options._executables
        key = Executable(OPTION, 2, 1)
        compiled = table[key]
        option = functools.partial(engine_option, service.engine.loaded(HEX).planner, k=2)
        table[key] = jax.jit(option, compiler_options=FAST_COMPILE)
        try:
            assert _call(service.stub, requests[-1], timeout=300)[0] == grpc.StatusCode.OK
        finally:
            table[key] = compiled
        assert traces == ["_option"]
    finally:
        jax.monitoring.unregister_event_duration_listener(on_event)
