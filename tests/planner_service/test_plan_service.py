"""The planner service under committed "plan": each answer's plan equals the in-process option's,
a request's plan is followed as in-process, a malformed plan is refused by name."""

from __future__ import annotations

import dataclasses

import grpc
import jax
import numpy as np
import pytest

from rtplan import wire
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.compiled import OPTION
from rtplan.planner.configs import with_rules
from rtplan.planner.store import load_planner, save_planner
from rtplan.planner_service import BackgroundService, Engine
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc
from support import tiny_config

SNAKE = "snake-rt-v0"
#: One budget keeps the compiles few; 8 simulations leave a plan below the chosen action.
CONFIG = dataclasses.replace(tiny_config(SNAKE), budgets=(3,), simulations=(8,))
RULES = {"committed": "plan", "tree_k": 1}
FAST_COMPILE = {"xla_backend_optimization_level": 0}
GAME = Planner(CONFIG).game


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("checkpoints")
    params = Planner(CONFIG).init_params(jax.random.PRNGKey(0))
    save_planner(planner_path(root, SNAKE), CONFIG, params, note="tiny test net")
    return root


@pytest.fixture(scope="module")
def service(checkpoints):
    engine = Engine.from_dir(checkpoints, compiler_options=FAST_COMPILE, rules=RULES)
    service = BackgroundService(engine).start()
    channel = grpc.insecure_channel(service.address)
    yield planner_pb2_grpc.PlannerStub(channel)
    channel.close()
    service.stop()


def _in_process(checkpoints):
    """(planner under RULES, params, jitted option with static k) of the checkpoint."""
    cfg, params, _ = load_planner(SNAKE, str(planner_path(checkpoints, SNAKE)))
    planner = Planner(dataclasses.replace(with_rules(cfg, **RULES), gumbel_scale=0.0))
    return planner, params, jax.jit(planner.option, static_argnums=3)


def _plan(stub, state, plan=(), seed=7):
    """The PlannedAction of a forced k=3 Plan call at `state` carrying `plan`."""
    request = pb.PlanRequest(
        game_id=SNAKE,
        state=wire.state_to_proto(GAME, state),
        budget=pb.Budget(k=3),
        seed=seed,
        plan=list(plan),
    )
    return [r.action for r in stub.Plan(request, timeout=60) if r.HasField("action")][0]


def test_served_plans_equal_the_in_process_options(service, checkpoints):
    planner, params, option = _in_process(checkpoints)
    state = jax.tree.map(lambda x: x[None], planner.game.init(jax.random.PRNGKey(3)))
    keys = np.array([[0, 7]], np.uint32)  # the service's key of seed 7
    plan, plan_len = planner.empty_plan(1)
    served_plan: list[int] = []
    for _ in range(3):  # the first option has no plan; the next two follow the last one's
        out = jax.device_get(option(params, keys, state, 3, plan=plan, plan_len=plan_len))
        served = _plan(service, jax.tree.map(lambda x: x[0], state), served_plan)
        assert list(served.frame_actions) == out.actions[0].tolist()
        assert list(served.plan) == out.plan[0, : out.plan_len[0]].tolist()
        served_plan = list(served.plan)
        state, plan, plan_len = out.next_state, out.plan, out.plan_len
    assert served_plan, "the search left no plan: the test follows nothing"


def test_list_games_reports_the_rules(service):
    (game,) = service.ListGames(pb.ListPlannerGamesRequest(), timeout=10).games
    assert (game.committed, game.tree_k) == ("plan", 1)
    assert game.plan_horizon == dataclasses.replace(CONFIG, **RULES).plan_horizon


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([0] * 10, "plan has 10 actions; a plan of snake-rt-v0 holds at most 9"),
        ([0, 4], "plan[1] is 4; the actions of snake-rt-v0 are 0..3"),
        ([-1], "plan[0] is -1; the actions of snake-rt-v0 are 0..3"),
    ],
)
def test_a_malformed_plan_is_refused_by_name(service, plan, message):
    state = GAME.init(jax.random.PRNGKey(0))
    with pytest.raises(grpc.RpcError) as e:
        _plan(service, jax.device_get(state), plan)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in e.value.details()


def test_a_plan_for_a_game_played_under_the_reflex_is_refused(checkpoints):
    engine = Engine.from_dir(checkpoints)  # the checkpoint's own rules: reflex (not compiled)
    with pytest.raises(Exception, match="plays snake-rt-v0 under committed reflex: leave plan"):
        engine.check(SNAKE, 3, plan=np.array([0], np.int32))


def test_plan_needs_a_tree(checkpoints):
    with pytest.raises(ValueError, match='snake-rt-v0: committed "plan" needs tree_k >= 1'):
        Engine.from_dir(checkpoints, rules={"committed": "plan", "tree_k": 0})


def test_a_batched_search_follows_each_requests_own_plan(checkpoints):
    """Two requests in one batched call (`max_batch` 2), one with no plan and one with the
    plan the first option left: each answer is its own in-process option's."""
    engine = Engine.from_dir(checkpoints, compiler_options=FAST_COMPILE, rules=RULES, max_batch=2)
    engine.compile()
    planner, params, option = _in_process(checkpoints)
    keys = np.array([[0, 7]], np.uint32)
    s0 = jax.tree.map(lambda x: x[None], planner.game.init(jax.random.PRNGKey(3)))
    first = jax.device_get(option(params, keys, s0, 3))
    plan = first.plan[0, : first.plan_len[0]]
    second = jax.device_get(
        option(params, keys, first.next_state, 3, plan=first.plan, plan_len=first.plan_len)
    )
    unbatched = [jax.tree.map(lambda x: np.asarray(x)[0], s) for s in (s0, first.next_state)]
    answers = engine._run_batch(
        (SNAKE, OPTION, 3), [(unbatched[0], 7, None), (unbatched[1], 7, plan)]
    )
    for answer, want in zip(answers, (first, second), strict=True):
        assert answer.frame_actions.tolist() == want.actions[0].tolist()
        assert answer.plan.tolist() == want.plan[0, : want.plan_len[0]].tolist()
