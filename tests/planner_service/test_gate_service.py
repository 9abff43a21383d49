"""Gated MCTS in the services: the planner service's gate decision equals the in-process gate,
and the env server's planner agent plays it with the decision on the viewer websocket."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import shutil
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import grpc
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from fastapi.testclient import TestClient

from rtplan import wire
from rtplan.games import Kind
from rtplan.gate.committed.policy import load_gate
from rtplan.harness.checkpoint import gate_path, planner_path
from rtplan.planner import Planner
from rtplan.planner.store import save_planner
from rtplan.planner_service import BackgroundService, Engine, GateLoadError
from rtplan.planner_service.__main__ import main
from rtplan.server import Settings, create_app
from rtplan.server._agents import PlannerAgent, _Option
from rtplan.server._records import PlanDecision
from rtplan.server._runtime import state_digest
from rtplan.v1 import planner_pb2 as pb
from rtplan.v1 import planner_pb2_grpc
from support import tiny_config, write_gate

GAME = "snake-rt-v0"
# Two budgets: the gate has a real choice, and only two options compile.
CFG = dataclasses.replace(tiny_config(GAME), budgets=(1, 2), simulations=(2, 4))
#: A random-init gate whose argmax differs between the states below (checked by the tests).
GATE_SEED = 9
FAST_COMPILE = {"xla_backend_optimization_level": 0}


class _HeldEngine:
    """The real engine, except that `plan` waits while the test holds it."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.free = threading.Event()
        self.free.set()

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def plan(self, *args, **kwargs):
        assert self.free.wait(60), "test never released the search"
        return self._engine.plan(*args, **kwargs)


def _reference(root: Path):
    """The in-process deployed gate: `Gate.decide` jitted, key None, over the same files."""
    planner = Planner(CFG)
    gate, params, _ = load_gate(
        gate_path(root, GAME), planner, planner_file=planner_path(root, GAME)
    )
    planner_params = planner.init_params(jax.random.PRNGKey(0))  # what the fixture saved
    # Parameters as arguments, as the service passes them (baked in as constants, XLA folds
    # them into a program whose values differ in the 4th digit).
    decide = functools.partial(jax.jit(gate.decide), params, planner_params)
    decide(_batch(_states()[0]))  # compiled here, alongside the service's compile
    return decide


@pytest.fixture(scope="module")
def gated(serve, tmp_path_factory):
    root = tmp_path_factory.mktemp("gated")
    save_planner(planner_path(root, GAME), CFG, Planner(CFG).init_params(jax.random.PRNGKey(0)))
    write_gate(root, GAME, seed=GATE_SEED)
    engine = Engine.from_dir(root, compiler_options=FAST_COMPILE)
    held = _HeldEngine(engine)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reference = pool.submit(_reference, root)
        service = BackgroundService(held).start()
        decide = reference.result(timeout=600)
    channel = grpc.insecure_channel(service.address)
    client = serve(checkpoint_dir=root, services=(service,), viewer_queue=4096).client
    return SimpleNamespace(
        root=root,
        engine=engine,
        held=held,
        stub=planner_pb2_grpc.PlannerStub(channel),
        decide=decide,
        client=client,
    )
    held.free.set()
    channel.close()
    service.stop()


# Helpers ----------------------------------------------------------------------------------------


@functools.cache
def _game():
    return Planner(CFG).game


@functools.cache
def _step():
    return jax.jit(_game().step)


@functools.cache
def _states() -> tuple:
    """Unbatched host states: first states and a few frames into games of several seeds."""

    game = _game()  # built outside any trace

    def play(key, frames):
        state = game.init(key)
        for _ in range(frames):
            state = game.step(state, jnp.argmax(state.legal_action_mask))
        return state

    return tuple(
        jax.device_get(jax.jit(play, static_argnums=1)(jax.random.PRNGKey(seed), frames))
        for seed, frames in ((0, 0), (1, 2), (2, 3), (3, 1), (4, 4), (5, 2))
    )


def _batch(state):
    return jax.tree.map(lambda x: np.asarray(x)[None], state)


def _request(state, **budget) -> pb.PlanRequest:
    return pb.PlanRequest(
        game_id=GAME,
        state=wire.state_to_proto(_game(), state),
        budget=pb.Budget(**budget),
        request_id=1,
    )


def _plan(stub, request) -> tuple[pb.Decision, pb.PlannedAction]:
    responses = list(stub.Plan(request, timeout=60))
    assert [r.WhichOneof("response") for r in responses] == ["decision", "action"]
    return responses[0].decision, responses[1].action


# The planner service ----------------------------------------------------------------------------


def test_gate_decision_equals_the_in_process_gate_and_plays_that_option(gated):
    chosen = []
    for state in _states():
        want = jax.device_get(gated.decide(_batch(state)))
        decision, action = _plan(gated.stub, _request(state, gate=True))
        assert decision.k == want.k[0] and decision.k in CFG.budgets
        np.testing.assert_allclose(decision.gate_probabilities, want.probabilities[0], rtol=1e-5)
        np.testing.assert_allclose(decision.value, want.value[0], rtol=1e-5, atol=1e-6)
        assert decision.landing_frame == int(state.frame) + decision.k - 1
        # The action is the forced-k option's for the gate's k, field for field.
        forced_decision, forced = _plan(gated.stub, _request(state, k=decision.k))
        assert not forced_decision.gate_probabilities and forced_decision.k == decision.k
        np.testing.assert_allclose(forced_decision.value, decision.value, rtol=1e-5, atol=1e-6)
        forced.search_ms = action.search_ms = 0.0
        assert action == forced
        chosen.append(decision.k)
    # A gate that picks one k everywhere would not show that k is the gate's choice.
    assert set(chosen) == set(CFG.budgets), chosen


def test_forced_budgets_work_beside_the_gate(gated):
    state = _states()[1]
    for k in CFG.budgets:
        decision, action = _plan(gated.stub, _request(state, k=k))
        assert decision.k == k and len(action.frame_actions) == k
    code = None
    try:
        _plan(gated.stub, _request(state, k=3))
    except grpc.RpcError as e:
        code, details = e.code(), e.details()
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "budgets: 1, 2" in details


def test_a_gated_search_whose_landing_frame_is_past_is_never_computed(gated):
    """With the session's frame clock, the service knows when the gate's k lands: a search
    that cannot end by then is not started (its decision still goes out), whatever the call's
    own deadline; one whose landing frame is ahead runs."""
    state = _states()[1]
    late = _request(state, gate=True)
    late.frame_clock.decision_deadline_ms = -50.0  # its decision frame is already 50 ms past
    late.frame_clock.period_ms = 1.0
    before = gated.engine.not_started
    call = gated.stub.Plan(late, timeout=60)
    responses = []
    with pytest.raises(grpc.RpcError) as e:
        responses.extend(call)
    assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e.value.details()
    assert "not started" in e.value.details()
    assert [r.WhichOneof("response") for r in responses] == ["decision"]
    assert gated.engine.not_started == before + 1
    ahead = _request(state, gate=True)
    ahead.frame_clock.decision_deadline_ms, ahead.frame_clock.period_ms = 10_000.0, 1_000.0
    _plan(gated.stub, ahead)
    bad = _request(state, gate=True)
    bad.frame_clock.decision_deadline_ms = 5.0  # no period
    with pytest.raises(grpc.RpcError) as e:
        list(gated.stub.Plan(bad, timeout=60))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "frame_clock.period_ms must be > 0" in e.value.details()


def test_list_games_and_health_report_the_gate(gated):
    (listed,) = gated.stub.ListGames(pb.ListPlannerGamesRequest(), timeout=5).games
    assert listed.game_id == GAME and listed.gate and list(listed.budgets) == [1, 2]
    health = gated.stub.Health(pb.HealthRequest(), timeout=5)
    assert health.status == pb.HealthResponse.SERVING
    assert health.detail == "4 executables with 1 gate(s) compiled"
    assert gated.engine.gate_ids == (GAME,) and gated.engine.progress == (4, 4)
    assert gated.engine.loaded(GAME).gate_checkpoint == str(gate_path(gated.root, GAME))


def test_a_broken_or_mismatched_gate_file_is_a_startup_error(gated, tmp_path, capsys):
    def root_with(name: str, planner_cfg=CFG, planner_seed: int = 0) -> Path:
        root = tmp_path / name
        params = Planner(planner_cfg).init_params(jax.random.PRNGKey(planner_seed))
        save_planner(planner_path(root, GAME), planner_cfg, params)
        gate_path(root, GAME).write_bytes(gate_path(gated.root, GAME).read_bytes())
        return root

    corrupt = root_with("corrupt")
    gate_path(corrupt, GAME).write_bytes(b"not a checkpoint")
    with pytest.raises(GateLoadError, match=rf"gate checkpoint {corrupt}/{GAME}/gate.msgpack"):
        Engine.from_dir(corrupt)
    # Another planner's weights (same shape): the gate recorded its planner's sha256.
    retrained = root_with("retrained", planner_seed=1)
    with pytest.raises(GateLoadError, match="was trained over the planner with sha256"):
        Engine.from_dir(retrained)
    # A planner with a budget the gate's leave out (a gate over other budgets than its
    # planner's is one of train-gate --budgets: over the planner's and larger ones).
    more = dataclasses.replace(CFG, budgets=(1, 2, 3), simulations=(2, 4, 6))
    other_budgets = root_with("budgets", more)
    with pytest.raises(GateLoadError, match=r"picks among budgets \[1, 2\], which the planner"):
        Engine.from_dir(other_budgets)
    # A gate with memory (`--gate-memory`) is for rtplan eval and train-gate only, so far.
    remembers = root_with("memory")
    write_gate(remembers, GAME, channels=8, head_hidden=16, memory=True)
    with pytest.raises(GateLoadError, match=r"a gate with memory \(--gate-memory\) plays"):
        Engine.from_dir(remembers)
    # The service's entry point fails at start-up, naming the file.
    assert main(["--checkpoint-dir", str(corrupt), "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert f"gate checkpoint {corrupt}/{GAME}/gate.msgpack does not load for {GAME}" in err


def test_a_gate_tree_gate_plays_options_that_plan_against_its_own_future(tmp_path):
    """A gate trained with `--gate-tree gate`: a `gate` budget plays option k planned against
    the gate's future exactly as in process; a forced k still plays the always-k option."""
    save_planner(planner_path(tmp_path, GAME), CFG, Planner(CFG).init_params(jax.random.PRNGKey(0)))
    write_gate(tmp_path, GAME, seed=GATE_SEED, tree="gate")
    engine = Engine.from_dir(tmp_path, compiler_options=FAST_COMPILE)
    service = BackgroundService(engine).start()
    planner = Planner(dataclasses.replace(CFG, gumbel_scale=0.0))  # the service's search
    gate, gparams, _ = load_gate(
        gate_path(tmp_path, GAME), planner, planner_file=planner_path(tmp_path, GAME)
    )
    params = planner.init_params(jax.random.PRNGKey(0))

    @functools.partial(jax.jit, static_argnums=1)
    def option(states, k):
        keys = jnp.zeros((1, 2), jnp.uint32)
        return planner.option(params, keys, states, k, future=gate, future_params=gparams)

    try:
        stub = planner_pb2_grpc.PlannerStub(grpc.insecure_channel(service.address))
        health = stub.Health(pb.HealthRequest(), timeout=5)
        assert health.detail == "6 executables with 1 gate(s) compiled", health.detail
        differs = 0
        for state in _states():
            decision, action = _plan(stub, _request(state, gate=True))
            k = decision.k
            want = jax.device_get(option(_batch(state), k))
            assert list(action.frame_actions) == list(want.actions[0])
            assert list(action.visit_counts) == list(want.visit_counts[0])
            np.testing.assert_allclose(action.search_value, want.search_value[0], rtol=1e-5)
            # A forced k plays the always-k option (its equality to in-process play is
            # tested with the always-k gate above), which the gate's future changes.
            _, forced = _plan(stub, _request(state, k=k))
            differs += forced.search_value != action.search_value
        assert differs, "the gate's future changed no tree: the test shows nothing"
    finally:
        service.stop()


# The env server's planner agent -----------------------------------------------------------------


def _read_until_end(ws) -> list[dict]:
    out = []
    while True:
        msg = ws.receive_json()
        out.append(msg)
        if msg["type"] == "end":
            return out


def _replayed_states(seed: int, actions: list[int]) -> list:
    """The states s_0..s_n a recorded action sequence visits, in process."""
    state = jax.device_get(jax.jit(_game().init)(jax.random.PRNGKey(seed)))
    states = [state]
    for a in actions:
        state = jax.device_get(_step()(state, np.int32(a)))
        states.append(state)
    return states


def test_planner_agent_plays_the_gate_and_viewers_see_its_decisions(gated):
    client, seed, frames = gated.client, 11, 24
    gated.held.free.clear()  # the session waits at its first landing frame until we watch
    try:
        r = client.post(
            "/v1/sessions",
            json={
                "game": GAME,
                "agent": "planner",
                "clock": "simulated",
                "seed": seed,
                "record": True,
                "max_frames": frames,
            },
        )
        assert r.status_code == 201, r.text
        created = r.json()
        listed = client.get(f"/v1/sessions/{created['id']}").json()
        assert listed["ks"] == [] and listed["gated"] and listed["config"]["ks"] == []
        with client.websocket_connect(created["viewer_path"]) as ws:
            hello = ws.receive_json()
            gated.held.free.set()
            msgs = _read_until_end(ws)
    finally:
        gated.held.free.set()
    assert hello["config"]["ks"] == [] and hello["spec"]["budgets"] == [1, 2]
    info = client.get(f"/v1/sessions/{created['id']}").json()
    assert info["status"] == "finished" and info["reason"] == "max_frames", info
    header, *lines = [json.loads(x) for x in Path(info["replay"]).read_text().splitlines()]
    lines = [x for x in lines if x["type"] == "frame"]
    states = _replayed_states(seed, [x["action"] for x in lines])
    # The replayed states are the session's (the record's digest of each).
    assert [state_digest(x) for x in states] == [
        header["initial"],
        *(x["state"]["digest"] for x in lines),
    ]

    # The recorded options: k - 1 reflex frames, then the planned one; each k is what the
    # in-process gate decides at the option's first state.
    starts, f = {}, 0
    while f < len(lines):
        k = lines[f]["k"]
        want = jax.device_get(gated.decide(_batch(states[f])))
        assert k == want.k[0], f"frame {f}: played k={k}, the gate decides {want.k[0]}"
        starts[f] = want
        option = lines[f : f + k]
        assert [x["source"] for x in option] == (["reflex"] * (k - 1) + ["planned"])[: len(option)]
        assert {x["k"] for x in option} == {k}
        f += k
    assert {x["provenance"] for x in lines} == {"on_time"}
    stats = info["stats"]
    assert stats["decisions"] == len(starts) and stats["planner_errors"] == 0
    assert sum(stats["k_histogram"].values()) == len(starts)

    # Every frame the viewer saw names its option's decision: k, probabilities, value.
    reports = [m["previous"] for m in msgs if m["type"] == "frame" and m["previous"]]
    assert len(reports) >= frames - 2  # the viewer joined at the first landing frame
    seen = set()
    for rep in reports:
        d = rep["decision"]
        assert d is not None and d["gated"] and d["frame"] in starts, rep
        assert rep["frame"] - d["frame"] < d["k"] == rep["k"]
        want = starts[d["frame"]]
        assert d["k"] == want.k[0]
        np.testing.assert_allclose(d["probabilities"], want.probabilities[0], atol=2e-6)
        np.testing.assert_allclose(d["value"], want.value[0], rtol=1e-5, atol=2e-6)
        seen.add(d["frame"])
    assert len(seen) >= len(starts) - 1
    assert {starts[t].k[0] for t in seen} == set(CFG.budgets)  # the gate chose both budgets


def test_a_real_time_gated_session_plays_the_gates_choices(gated):
    """In real time too every option's k is the gate's; an option whose decision came after
    its first frame's deadline (a loaded machine) ended there as a miss, never an error."""
    seed = 5
    # 4 FPS: 250 ms per frame leaves the decisions room on a loaded machine (at 10 FPS one CI run
    # beside two training runs saw every decision miss its deadline).
    body = {"game": GAME, "agent": "planner", "seed": seed, "fps": 4.0, "max_frames": 20}
    r = gated.client.post("/v1/sessions", json={**body, "record": True})
    assert r.status_code == 201, r.text
    end = time.monotonic() + 120
    while (info := gated.client.get(f"/v1/sessions/{r.json()['id']}").json())["status"] in (
        "waiting",
        "running",
    ):
        assert time.monotonic() < end, info
        time.sleep(0.05)
    assert info["status"] == "finished" and info["stats"]["planner_errors"] == 0, info
    lines = [json.loads(x) for x in Path(info["replay"]).read_text().splitlines()]
    lines = [x for x in lines if x["type"] == "frame"]
    states = _replayed_states(seed, [x["action"] for x in lines])
    f = decided = 0
    while f < len(lines):
        k = lines[f]["k"]
        if k is None:  # no decision by this frame's deadline: the option ended here
            assert lines[f]["source"] == "planned" and lines[f]["provenance"] == "fallback"
            f += 1
            continue
        assert k == jax.device_get(gated.decide(_batch(states[f]))).k[0], f"frame {f}"
        assert [x["k"] for x in lines[f : f + k]] == [k] * len(lines[f : f + k])
        f, decided = f + k, decided + 1
    assert decided >= 1 and info["stats"]["decisions"] >= decided


def test_a_gated_session_needs_a_gate_on_the_planner_service(gated, tmp_path):
    root = tmp_path / "nogate"
    shutil.copytree(gated.root, root)
    gate_path(root, GAME).unlink()
    engine = Engine.from_dir(root)
    assert engine.gate_ids == ()
    service = BackgroundService(engine).start(compile=False)  # ListGames needs no compile
    settings = Settings(
        http_port=0, grpc_port=0, checkpoint_dir=root, planner_address=service.address
    )
    try:
        with TestClient(create_app(settings)) as client:
            r = client.post("/v1/sessions", json={"game": GAME, "agent": "planner"})
            assert r.status_code == 409, r.text
            detail = r.json()["detail"]
            # Its budgets never compiled here (compile=False): only what plays now is offered.
            assert f"has no gate for {GAME}; choose agent 'reflex'" in detail, detail
            assert service.address in detail
            r = client.post("/v1/sessions", json={"game": GAME, "agent": "planner", "k": []})
            assert r.status_code == 422 and "a list of budgets" in r.text and "got []" in r.text
    finally:
        service.stop()
    # No planner service answering: the creation says so instead of hanging.
    settings = Settings(
        http_port=0, grpc_port=0, checkpoint_dir=root, planner_address=service.address
    )
    with TestClient(create_app(settings)) as client:
        start = time.monotonic()
        r = client.post("/v1/sessions", json={"game": GAME, "agent": "planner"})
        assert r.status_code == 409 and "UNAVAILABLE" in r.json()["detail"], r.text
        assert time.monotonic() - start < 60


class _Host:
    """The `AgentHost` bits a gated decision reads and reports."""

    kind = Kind.COMMITTED

    def __init__(self) -> None:
        self.sent: list[int] = []

    def plan_sent(self, k: int) -> None:
        self.sent.append(k)


def test_the_agent_checks_each_gated_decision():
    agent, host = PlannerAgent(stub=None, plan_timeout_s=1.0), _Host()

    def option(closed=False):
        return _Option(
            7, decision_frame=10, k=None, landing=None, sent_at=0.0, gated=True, closed=closed
        )

    def decision(k, landing, probabilities=(0.25, 0.75)):
        return pb.Decision(k=k, landing_frame=landing, gate_probabilities=probabilities, value=1.5)

    opt = option()
    assert agent._decided(opt, decision(2, 11), host) is None
    assert (opt.k, opt.landing, host.sent) == (2, 11, [2]) and opt.decided.is_set()
    assert opt.decision == PlanDecision(10, 2, True, (0.25, 0.75), 1.5)
    assert "landing on frame 12, not 11" in agent._decided(option(), decision(2, 12), host)
    assert "k=0, not a budget" in agent._decided(option(), decision(0, 9), host)
    assert "without its probabilities" in agent._decided(option(), decision(1, 10, ()), host)
    # A decision for an option that already ended (its frame passed) changes nothing.
    late = option(closed=True)
    assert agent._decided(late, decision(1, 10), host) is None
    assert late.k is None and late.landing is None and host.sent == [2, 1]
    # With no decision by its decision frame's deadline, a gated option ends there, missed.
    pending = option()
    agent._option = pending
    host.info, host.published_at = SimpleNamespace(reflex=0), 0.0
    answer = agent.answer(10, host)
    assert answer.source == "planned" and answer.arrivals == () and answer.k is None
    assert pending.closed and answer.error is None  # counted as a miss, not an error
