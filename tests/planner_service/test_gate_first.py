"""A gated game plays gated before its forced budgets compile: its gate and the options it
plays compile first, and the service says so (ListGames `gate_ready` while `compiling`)."""

from __future__ import annotations

import threading

import grpc
import jax
import pytest

from rtplan.planner_service import BackgroundService, Engine
from rtplan.planner_service.engine import GATE, GatedOnlyError, NotReadyError
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc
from support import write_gate, write_planner

SNAKE = "snake-rt-v0"
FAST = {"xla_backend_optimization_level": 0}


def test_gated_requests_plan_while_the_forced_budgets_still_compile(tmp_path):
    root = write_planner(tmp_path, SNAKE, budgets=(2,), simulations=(2,))
    write_gate(root, SNAKE, tree="gate")  # its gated options are executables of their own
    engine = Engine.from_dir(root, compiler_options=FAST)
    game = engine.loaded(SNAKE).planner.game
    state = jax.device_get(game.init(jax.random.PRNGKey(0)))
    seen: dict = {}

    def gate_ready(game_id: str) -> None:
        # On the compile thread, between the two halves: the forced budgets wait for this.
        seen["games"] = (engine.gate_ready_games, engine.ready_games)
        seen["compiled"] = engine.progress[0]
        decision = engine.decision(SNAKE, state, GATE)
        seen["plan"] = engine.plan(SNAKE, state, decision.k, gated=True).action
        with pytest.raises(NotReadyError, match="still compiling"):
            engine.check(SNAKE, 2)
        with grpc.insecure_channel(service.address) as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)
            (listed,) = stub.ListGames(pb.ListPlannerGamesRequest(), timeout=10).games
        seen["listed"] = (listed.gate_ready, listed.compiling)

    service = BackgroundService(engine).start(compile=False)
    try:
        compiling = threading.Thread(target=engine.compile, kwargs={"on_gate_ready": gate_ready})
        compiling.start()
        compiling.join(600)
        assert engine.ready
        assert seen["games"] == ((SNAKE,), ())
        # The gate's decision and its one gated option; the value and option k=2 came after.
        assert (seen["compiled"], engine.progress[0]) == (2, 4)
        assert isinstance(seen["plan"], int)
        assert seen["listed"] == (True, True)
        engine.check(SNAKE, 2)  # every budget plans now
    finally:
        service.stop()


def test_a_game_without_a_gate_is_never_gate_ready(tmp_path):
    root = write_planner(tmp_path, SNAKE, budgets=(2,), simulations=(2,))
    engine = Engine.from_dir(root, compiler_options=FAST)
    called = []
    engine.compile(on_gate_ready=called.append)
    assert (called, engine.gate_ready_games, engine.ready_games) == ([], (), (SNAKE,))


def test_a_gated_only_service_never_compiles_the_forced_budgets(tmp_path):
    root = write_planner(tmp_path, SNAKE, budgets=(2,), simulations=(2,))
    write_gate(root, SNAKE, tree="gate")
    engine = Engine.from_dir(root, compiler_options=FAST, gated_only=True)
    game = engine.loaded(SNAKE).planner.game
    state = jax.device_get(game.init(jax.random.PRNGKey(0)))
    with BackgroundService(engine) as service:
        assert engine.ready and engine.progress == (2, 2)  # the gate and its one option
        decision = engine.decision(SNAKE, state, GATE)
        engine.plan(SNAKE, state, decision.k, gated=True)
        with pytest.raises(GatedOnlyError, match="gated only"):
            engine.check(SNAKE, 2)
        with grpc.insecure_channel(service.address) as channel:
            stub = planner_pb2_grpc.PlannerStub(channel)
            (listed,) = stub.ListGames(pb.ListPlannerGamesRequest(), timeout=10).games
    assert (listed.gated_only, listed.gate_ready, listed.compiling) == (True, True, False)
