"""Gated clock games live: the stateless planner service steps the clock gate from the state each
request carries, a game over gRPC equals `play_match` with the in-process gate ply for ply, and
the env server's planner agent and gated opponent play it with budgets and probabilities."""

from __future__ import annotations

import dataclasses
import functools
import json
import time
from pathlib import Path
from types import SimpleNamespace

import grpc
import jax
import numpy as np
import pytest

from rtplan import wire
from rtplan.games import Kind
from rtplan.gate.clock.gate import ClockGateCarry, clock_gate_player, load_clock_gate
from rtplan.harness.checkpoint import gate_path, planner_path
from rtplan.planner import Planner
from rtplan.planner.matches import (
    EVAL_OPENING_PLIES,
    _start_fn,
    game_id,
    option_player,
    play_match,
)
from rtplan.planner.store import save_planner
from rtplan.planner_service import BackgroundService, Engine
from rtplan.planner_service.engine import GATE, InvalidRequestError
from rtplan.server._config import SessionConfig, SessionError
from rtplan.server._planner_caps import Capabilities, ServedGame, check_session
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc
from support import tiny_config, write_clock_gate, write_gate

GAME = "speed-hex-v0"
#: A random-init clock gate that, at this T0, plays policy-only and both budgets, and returns
#: to a budget after a run of policy-only moves (its state matters).
GATE_SEED, T0, PLIES = 4, 30, 40
# Budgets 2 and 4 (2 and 4 simulations); sessions start with T0 ticks a side.
CFG = dataclasses.replace(tiny_config(GAME), game_params=(("initial_time", T0),))
FAST_COMPILE = {"xla_backend_optimization_level": 0}


@pytest.fixture(scope="module")
def served(serve, tmp_path_factory):
    root = tmp_path_factory.mktemp("clockgate")
    params = Planner(CFG).init_params(jax.random.PRNGKey(0))
    save_planner(planner_path(root, GAME), CFG, params)
    write_clock_gate(root, GAME, seed=GATE_SEED)
    engine = Engine.from_dir(root, compiler_options=FAST_COMPILE)
    service = BackgroundService(engine).start()
    channel = grpc.insecure_channel(service.address)
    planner = Planner(CFG)
    gate, gate_params, _ = load_clock_gate(
        gate_path(root, GAME), planner, planner_file=planner_path(root, GAME)
    )
    client = serve(checkpoint_dir=root, services=(service,), viewer_queue=4096).client
    yield SimpleNamespace(
        root=root,
        engine=engine,
        stub=planner_pb2_grpc.PlannerStub(channel),
        planner=planner,
        params=params,
        gate=gate,
        gate_params=gate_params,
        client=client,
    )
    channel.close()


def _plan(stub, state, *, gate_state=None, **budget) -> tuple[pb.Decision, pb.PlannedAction]:
    request = pb.PlanRequest(
        game_id=GAME,
        state=wire.state_to_proto(Planner(CFG).game, state),
        budget=pb.Budget(**budget),
        request_id=1,
        gate_state=gate_state,
    )
    responses = list(stub.Plan(request, timeout=60))
    assert [r.WhichOneof("response") for r in responses] == ["decision", "action"]
    return responses[0].decision, responses[1].action


def _error(stub, state, **kw) -> tuple[grpc.StatusCode, str]:
    try:
        _plan(stub, state, **kw)
    except grpc.RpcError as e:
        return e.code(), e.details()
    raise AssertionError("the request was served")


@functools.cache
def _jitted(gate):
    return jax.jit(gate.decide), jax.jit(Planner(CFG).game.step)


# The planner service ----------------------------------------------------------------------------


def test_a_game_over_grpc_equals_the_in_process_gate_ply_for_ply(served):
    """The gate (player A) against the planner at k=2, both colours: over gRPC (the gate's state
    carried by the client, the opponent's forced-k requests carrying none) and in process
    (`play_match` with `clock_gate_player`): the same options, moves and clocks."""
    planner, params = served.planner, served.params
    seeds = np.array([3])
    want = play_match(
        planner,
        params,
        clock_gate_player(served.gate, served.gate_params),
        option_player(planner, CFG.budgets[0]),
        seeds,
        initial_time=T0,
        max_plies=PLIES,
    )
    # The same openings as play_match: both colours of seed 3 (its own start function).
    states, _, a_ids, start_ids = _start_fn(planner, EVAL_OPENING_PLIES)(
        np.asarray(seeds, np.uint32), T0
    )
    decide, step = _jitted(served.gate)
    chosen = set()
    for g in range(2):
        state = jax.device_get(jax.tree.map(lambda x, g=g: x[g], states))
        a = int(a_ids[g])
        carry = served.gate.zero_carry(1)  # the in-process gate, stepped on A's plies only
        gate_state, ks, clocks, movers, actions = None, [], [], [], []
        for _ in range(PLIES):
            if bool(state.done):
                break
            mover = int(state.current_player)
            if mover == a:
                decision, action = _plan(served.stub, state, gate_state=gate_state, gate=True)
                ref = jax.device_get(
                    decide(
                        served.gate_params,
                        params,
                        carry,
                        jax.tree.map(lambda x: np.asarray(x)[None], state),
                    )
                )
                option = int(ref.option[0])
                assert decision.k == (0 if option == 0 else CFG.budgets[option - 1])
                np.testing.assert_allclose(
                    decision.gate_probabilities, ref.probabilities[0], atol=1e-5
                )
                np.testing.assert_allclose(decision.value, ref.value[0], atol=1e-5)
                h = wire.from_tensor(decision.gate_state.h, name="h")
                np.testing.assert_allclose(h, ref.carry.h[0], atol=1e-5)
                assert decision.gate_state.last == option
                assert decision.landing_frame == int(state.frame)
                carry, gate_state = ref.carry, decision.gate_state
                ks.append(decision.k)
                clocks.append(int(state.inner.clocks[a]))
                chosen.add(decision.k)
                if decision.k == 0:  # policy-only: the reflex, free, no search
                    assert action.cost == 0 and list(action.planned) == [False]
            else:
                decision, action = _plan(served.stub, state, k=CFG.budgets[0])
                assert not decision.HasField("gate_state")
            movers.append(mover)
            actions.append(action.action)
            state = jax.device_get(step(state, np.int32(action.action), np.int32(action.cost)))
        assert ks == want.ks[g].tolist(), f"game {g}: options differ"
        assert clocks == want.features["clock"][g].tolist(), f"game {g}: clocks differ"
        final = state.inner.clocks
        assert [int(final[a]), int(final[1 - a])] == want.clocks[g].tolist()
        assert len(movers) == want.frames[g] - int(states.frame[g])
        moves = game_id(np.asarray(start_ids[g]), np.array(movers), np.array(actions))
        assert moves == want.game_ids[g], f"game {g}: moves differ"
    assert chosen == {0, *CFG.budgets}, chosen  # policy-only and both budgets were played


def test_a_request_without_state_starts_a_fresh_game(served):
    state = jax.device_get(jax.jit(Planner(CFG).game.init)(jax.random.PRNGKey(1)))
    fresh, _ = _plan(served.stub, state, gate=True)
    zeros = pb.ClockGateState(h=wire.to_tensor(np.zeros(6, np.float32)), last=-1)
    explicit, _ = _plan(served.stub, state, gate=True, gate_state=zeros)
    assert fresh == explicit and len(fresh.gate_probabilities) == len(CFG.budgets) + 1
    # Another state changes the answer: the state is read, not ignored.
    moved = pb.ClockGateState(h=fresh.gate_state.h, last=fresh.gate_state.last)
    later, _ = _plan(served.stub, state, gate=True, gate_state=moved)
    assert later.gate_state != fresh.gate_state


def test_clock_gate_errors_are_specific(served, tmp_path):
    stub = served.stub
    state = jax.device_get(jax.jit(Planner(CFG).game.init)(jax.random.PRNGKey(1)))
    wrong = pb.ClockGateState(h=wire.to_tensor(np.zeros(5, np.float32)), last=-1)
    code, details = _error(stub, state, gate=True, gate_state=wrong)
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert details == f"gate_state.h is float32[5]; the clock gate of {GAME} keeps float32[6]"
    ints = pb.ClockGateState(h=wire.to_tensor(np.zeros(6, np.int32)), last=-1)
    assert "gate_state.h is int32[6]" in _error(stub, state, gate=True, gate_state=ints)[1]
    past = pb.ClockGateState(h=wire.to_tensor(np.zeros(6, np.float32)), last=3)
    assert (
        "gate_state.last is 3; the clock gate of speed-hex-v0 has options 0..2"
        in (_error(stub, state, gate=True, gate_state=past)[1])
    )
    no_h = pb.ClockGateState(last=0)
    assert "gate_state.h: unknown dtype" in _error(stub, state, gate=True, gate_state=no_h)[1]
    ok = pb.ClockGateState(h=wire.to_tensor(np.zeros(6, np.float32)), last=-1)
    code, details = _error(stub, state, k=2, gate_state=ok)
    assert (
        code == grpc.StatusCode.INVALID_ARGUMENT and "gate_state goes with budget.gate" in details
    )
    (listed,) = stub.ListGames(pb.ListPlannerGamesRequest(), timeout=5).games
    assert listed.gate and listed.clock_gate
    health = stub.Health(pb.HealthRequest(), timeout=5)
    assert health.detail == "4 executables with 1 gate(s) compiled", health.detail


def test_a_state_for_a_game_without_a_clock_gate_is_refused(tmp_path):
    """A committed game's gate keeps no state: a request that carries one is refused by name."""
    game = "snake-rt-v0"
    cfg = dataclasses.replace(tiny_config(game), budgets=(1, 2), simulations=(2, 4))
    save_planner(planner_path(tmp_path, game), cfg, Planner(cfg).init_params(jax.random.PRNGKey(0)))
    write_gate(tmp_path, game)
    engine = Engine.from_dir(tmp_path)  # the check comes before any compile
    assert not engine.loaded(game).clock_gate
    carry = ClockGateCarry(h=np.zeros(6, np.float32), last=-1)
    with pytest.raises(InvalidRequestError, match=f"and {game} has no clock gate"):
        engine.check(game, GATE, carry)


# The env server ---------------------------------------------------------------------------------


def _until_ended(client, session_id: str, timeout_s: float = 240.0) -> dict:
    end = time.monotonic() + timeout_s
    while (info := client.get(f"/v1/sessions/{session_id}").json())["status"] in (
        "waiting",
        "running",
    ):
        assert time.monotonic() < end, info
        time.sleep(0.05)
    return info


def _frames(info) -> tuple[dict, list[dict]]:
    header, *lines = [json.loads(x) for x in Path(info["replay"]).read_text().splitlines()]
    return header, [x for x in lines if x["type"] == "frame"]


def _check_gated_moves(served, header, lines, player: int, source: str) -> int:
    """Every move of `player` in a recorded game carries the gate's decision, equal to the
    in-process gate stepped over that side's own plies only (states replayed from the recorded
    moves and costs); returns how many moves it made."""
    decide, step = _jitted(served.gate)
    game = Planner(CFG).game
    state = jax.device_get(jax.jit(game.init)(jax.random.PRNGKey(header["seed"])))
    assert header["initial_time"] is None and int(state.inner.clocks[0]) == T0
    carry, moves = served.gate.zero_carry(1), 0
    for line in lines:
        if int(state.current_player) == player:
            batch = jax.tree.map(lambda x: np.asarray(x)[None], state)
            ref = jax.device_get(decide(served.gate_params, served.params, carry, batch))
            carry, option = ref.carry, int(ref.option[0])
            d = line["decision"]
            assert line["source"] == source and line["provenance"] == "on_time", line
            assert d["gated"] and d["frame"] == line["frame"], line
            assert line["k"] == d["k"] == (0 if option == 0 else CFG.budgets[option - 1]), line
            np.testing.assert_allclose(d["probabilities"], ref.probabilities[0], atol=1e-5)
            np.testing.assert_allclose(d["value"], ref.value[0], atol=1e-5)
            sims = 0 if option == 0 else CFG.simulations[option - 1]
            assert line["cost"] == min(sims, int(state.inner.clocks[player])), line
            moves += 1
        else:
            assert line["decision"] is None or not line["decision"]["gated"], line
        state = jax.device_get(step(state, np.int32(line["action"]), np.int32(line["cost"])))
    return moves


def _play(client, **body) -> tuple[dict, dict, list[dict]]:
    base = {"game": GAME, "clock": "simulated", "seed": 7, "record": True, "max_frames": 30}
    r = client.post("/v1/sessions", json={**base, **body})
    assert r.status_code == 201, r.text
    info = _until_ended(client, r.json()["id"])
    assert info["status"] == "finished" and info["stats"]["planner_errors"] == 0, info
    header, lines = _frames(info)
    return info, header, lines


def test_the_planner_agent_plays_a_clock_game_gated(served):
    """A gated planner session of Speed Hex (simulated clock, the reflex opponent): each of its
    moves is the in-process gate's choice from the state the server carried for its side, and
    the replay (as the viewers' reports) carries each move's budget and probabilities."""
    # Seed 3: player 0 moves first, and this gate plays policy-only and both budgets then.
    info, header, lines = _play(served.client, seed=3, agent="planner", opponent="reflex")
    assert info["gated"] and info["opponent"] == "reflex" and header["gated"]
    moves = _check_gated_moves(served, header, lines, player=0, source="planned")
    assert moves >= 10
    ks = [x["k"] for x in lines if x["decision"]]
    assert 0 in ks and set(ks) & set(CFG.budgets), ks  # policy-only and a budget
    assert info["stats"]["decisions"] == moves
    assert sum(info["stats"]["k_histogram"].values()) == moves


def test_the_gated_planner_opponent_keeps_its_own_state(served):
    """The lobby's "planner (gate)" opponent (player 1) against the planner at a fixed k: the
    gate steps on the opponent's plies only, from its own state."""
    info, header, lines = _play(served.client, seed=7, agent="planner", k=2, opponent="gate")
    assert info["opponent"] == "gate" and info["opponent_k"] is None and not info["gated"]
    moves = _check_gated_moves(served, header, lines, player=1, source="opponent")
    assert moves >= 10
    assert {x["k"] for x in lines if x["source"] == "planned"} == {2}
    ks = [x["k"] for x in lines if x["source"] == "opponent"]
    assert 0 in ks and set(ks) & set(CFG.budgets), ks


def test_the_lobby_offers_the_gated_opponent_when_a_clock_gate_is_served(served):
    client = served.client
    listed = {g["id"]: g for g in client.get("/v1/games").json()["games"]}
    planner = listed[GAME]["planner"]
    assert planner["available"] and planner["gate"] and planner["clock_gate"]
    assert not listed["snake-rt-v0"]["planner"]["clock_gate"]
    # A person against the gated planner, on a time control (real time): created, and listed
    # with the label's fields (web/api.js agentLabel: "you vs planner (gate)").
    body = {"game": GAME, "agent": "human", "opponent": "gate", "time_s": 60, "increment_s": 1}
    r = client.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    session = client.get(f"/v1/sessions/{r.json()['id']}").json()
    assert session["opponent"] == "gate" and session["opponent_k"] is None
    token = {"Authorization": f"Bearer {r.json()['token']}"}
    assert client.delete(f"/v1/sessions/{session['id']}", headers=token).status_code == 200
    r = client.post("/v1/sessions", json={**body, "opponent_k": 2})
    assert r.status_code == 422 and "the gate picks each budget" in r.text, r.text


def test_the_gated_opponent_needs_a_clock_gate():
    caps = Capabilities("here:1", {GAME: ServedGame((2, 4), gate=False)})
    cfg = SessionConfig(game_id=GAME, agent="human", opponent="gate")
    with pytest.raises(
        SessionError,
        match="the gated planner opponent cannot play: the planner "
        "service at here:1 has no gate for speed-hex-v0",
    ):
        check_session(cfg, caps, kind=Kind.CLOCK)
    assert caps.describe(GAME)["clock_gate"] is False
    served = Capabilities("here:1", {GAME: ServedGame((2, 4), gate=True, clock_gate=True)})
    check_session(cfg, served, kind=Kind.CLOCK)
    assert served.describe(GAME)["clock_gate"] is True
