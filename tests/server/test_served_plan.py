"""Sessions under committed "plan": the planner agent follows the planner service's plans, and a
served game equals in-process `play` frame for frame (served == in-process); a session that asks
for a plan the service does not play is refused by name."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

import grpc
import jax
import numpy as np
import pytest

from rtplan import games
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.planner.batching import OptionRunner
from rtplan.planner.configs import with_rules
from rtplan.planner.episodes import always, play
from rtplan.planner.store import load_planner, save_planner
from rtplan.planner_service import BackgroundService, Engine
from rtplan.server._agents import PlannerAgent, _Option
from rtplan.server._config import SessionConfig, SessionError
from rtplan.server._planner_caps import Capabilities, ServedGame, check_session
from rtplan.via_services.sessions import played_frames
from support import session_ended, tiny_config

SNAKE = "snake-rt-v0"
#: One budget keeps the compiles few; 8 simulations leave a plan below the chosen action.
CONFIG = dataclasses.replace(tiny_config(SNAKE), budgets=(3,), simulations=(8,))
RULES = {"committed": "plan", "tree_k": 1}
FAST = {"xla_backend_optimization_level": 0}
SEED = 5


@pytest.fixture(scope="module")
def served(serve, tmp_path_factory):
    """(env server client, checkpoint folder): one Snake checkpoint that the env server and a
    real planner service (gRPC on port 0, under RULES) both load."""
    tmp = tmp_path_factory.mktemp("plan")
    root = tmp / "checkpoints"
    params = Planner(CONFIG).init_params(jax.random.PRNGKey(0))
    save_planner(planner_path(root, SNAKE), CONFIG, params, note="tiny test net")
    service = BackgroundService(Engine.from_dir(root, compiler_options=FAST, rules=RULES)).start()
    return serve(checkpoint_dir=root, services=(service,)).client, root


def _session(client, **body) -> list[dict]:
    """The frames a simulated-clock planner session at k=3 played to the game's end."""
    body = {"game": SNAKE, "agent": "planner", "k": 3, "seed": SEED, "record": True, **body}
    created = client.post("/v1/sessions", json={**body, "clock": "simulated"})
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    info = session_ended(client, sid, timeout=300)
    assert info["status"] == "finished", info
    replay = client.get(f"/v1/replays/{Path(info['replay']).name}")
    assert replay.status_code == 200, replay.text
    return played_frames(replay.json())


def _in_process(root: Path, committed: str):
    """In-process `play` of SEED at always-3 under `committed` (tree_k 1), actions recorded."""
    cfg, params, _ = load_planner(SNAKE, str(planner_path(root, SNAKE)))
    planner = Planner(with_rules(cfg, committed=committed, tree_k=1))
    return play(OptionRunner(planner), params, np.array([SEED]), always(3), record_actions=True)


def test_a_served_game_under_a_plan_equals_in_process_play(served):
    client, root = served
    frames = _session(client, committed="plan")
    want = _in_process(root, "plan")
    actions = [f["action"] for f in frames]
    assert actions == want.actions[0].tolist()
    assert sum(f["reward"] for f in frames) == pytest.approx(float(want.returns[0]))
    assert {f["k"] for f in frames} == {3}
    # Each option's two committed frames say what they played: the plan or, past it, the reflex.
    sources = [f["answer_source"] for f in frames if f["provenance"] == "on_time"]
    assert set(sources) <= {"plan", "reflex", "planned"} and "plan" in sources
    landings = [f for f in frames[2::3] if f["provenance"] == "on_time"]
    assert all(f["answer_source"] == "planned" for f in landings)
    # The plan changed the game: under the reflex the same seed plays other actions.
    assert want.actions[0].tolist() != _in_process(root, "reflex").actions[0].tolist()


def test_a_real_time_session_under_a_plan_plays_in_process_play_until_a_miss(served):
    """The real-time protocol under plan: frames tick at 5 FPS whatever the planner does, and
    while every planned action lands by its frame's deadline the game is in-process `play`'s,
    its committed frames following the service's plans."""
    client, root = served
    _session(client, committed="plan", max_frames=6)  # the service's searches compiled
    body = {"game": SNAKE, "agent": "planner", "k": 3, "seed": SEED, "record": True}
    created = client.post(
        "/v1/sessions", json={**body, "committed": "plan", "fps": 5, "max_frames": 24}
    )
    assert created.status_code == 201, created.text
    sid = created.json()["id"]
    info = session_ended(client, sid)
    assert info["status"] == "finished" and info["reason"] in ("max_frames", "terminal"), info
    stats = info["stats"]
    assert stats["planner_errors"] == 0 and stats["planner_misses"] <= 1, stats  # 400 ms each
    frames = played_frames(client.get(f"/v1/replays/{Path(info['replay']).name}").json())
    missed = [i for i, f in enumerate(frames) if f["provenance"] != "on_time"]
    upto = missed[0] if missed else len(frames)
    assert upto >= 12, (len(frames), missed)
    want = _in_process(root, "plan").actions[0][:upto].tolist()
    assert [f["action"] for f in frames[:upto]] == want
    assert "plan" in {f["answer_source"] for f in frames[:upto]}


def test_a_session_under_the_reflex_sends_no_plan_and_plays_the_reflex(served):
    client, root = served
    frames = _session(client, max_frames=30)  # committed "reflex", the default
    want = _in_process(root, "reflex")
    assert [f["action"] for f in frames] == want.actions[0][:30].tolist()
    assert "plan" not in {f["answer_source"] for f in frames}


def test_a_plan_for_another_agent_is_refused(served):
    client, _ = served
    listed = {g["id"]: g for g in client.get("/v1/games").json()["games"]}
    assert listed[SNAKE]["planner"]["committed"] == "plan"
    refused = client.post(
        "/v1/sessions", json={"game": SNAKE, "agent": "reflex", "committed": "plan"}
    )
    assert refused.status_code == 422
    assert "committed 'plan' is for the planner agent" in refused.text


def test_a_plan_the_service_does_not_play_is_refused():
    caps = Capabilities("127.0.0.1:1", {SNAKE: ServedGame((3,), False)})  # a reflex service
    cfg = SessionConfig(SNAKE, agent="planner", ks=(3,), committed="plan")
    with pytest.raises(SessionError) as e:
        check_session(cfg, caps, kind=games.Kind.COMMITTED)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "plays snake-rt-v0 under committed 'reflex'" in e.value.message
    check_session(dataclasses.replace(cfg, committed="reflex"), caps, kind=games.Kind.COMMITTED)


def test_the_committed_frames_follow_the_plan_while_each_action_is_legal():
    """`Planner._commit`'s rule, frame by frame: the plan's action while every one so far was
    legal and the plan reaches, else the reflex, and a plan once left is never taken up. Each
    committed frame names its source: "plan" when it followed the plan, else "reflex"."""
    agent = PlannerAgent(None, plan_timeout_s=1.0)
    legal = np.array([1, 1, 0, 1], bool)
    info = types.SimpleNamespace(legal=legal, reflex=0, reflex_for=lambda served: 0)
    config = types.SimpleNamespace(served=False)
    host = types.SimpleNamespace(info=info, published_at=0.0, config=config)

    def committed(plan, frames):
        agent._option = _Option(1, decision_frame=10, k=4, landing=13, sent_at=0.0, plan=plan)
        answers = [agent.answer(n, host) for n in frames]
        return [(a.arrivals[0].action, a.source) for a in answers]

    plan, reflex = "plan", "reflex"
    assert committed((3, 2, 1), [10, 11]) == [(3, plan), (0, reflex)]  # 2 is illegal at 11
    info.legal[:] = True
    opt = agent._option
    assert agent._committed(opt, 12, host) == 0 and not opt.following  # left once: stays left
    assert committed((3,), [10, 11, 12]) == [(3, plan), (0, reflex), (0, reflex)]  # its end
    assert committed((), [10, 11]) == [(0, reflex), (0, reflex)]  # no plan
