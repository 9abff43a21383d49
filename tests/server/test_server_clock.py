"""Clock games on the env server: the agent is player 0 against a built-in opponent; moves are
charged sims(k) ticks (simulated clock) or thinking time (real time, a chess clock)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from rtplan import wire
from rtplan.harness.checkpoint import planner_path
from rtplan.planner.store import load_planner
from rtplan.server import ReplayFile, replay
from rtplan.server._compiled import compiled
from rtplan.server._rules import wall_ticks
from rtplan.v1 import env_pb2
from support import AgentStream, planner_fns, session_ended, tiny_config

GAME = "speed-hex-v0"
T0 = dict(tiny_config(GAME).game_params)["initial_time"]


@pytest.fixture(scope="module")
def srv(serve):
    s = serve((GAME,), planner=True)
    return s.client, s.address, s.root


def play_in_process(root, *, seed: int, planner_player: int, k: int):
    """A clock game played in process as a simulated-clock session plays it: option k (search
    key PRNGKey(0)) for `planner_player`, the reflex for the other, with the jitted step and
    reflex the server compiled (to spare a compile). Returns (final state, actions, costs,
    movers), one entry per frame."""
    cfg, params, _ = load_planner(GAME, str(planner_path(root, GAME)))
    _, option = planner_fns(cfg)
    fns = compiled(GAME, tuple(sorted(cfg.game_params)), cfg)
    s = fns.init(jax.random.PRNGKey(seed))
    info0 = fns.info(params, s)
    actions, costs, movers = [], [], []
    while not bool(s.done):
        movers.append(int(s.current_player))
        if movers[-1] == planner_player:
            batch = jax.tree.map(lambda x: x[None], s)
            out = option(params, jax.random.split(jax.random.PRNGKey(0), 1), batch, k)
            a, c = int(out.actions[0, 0]), int(out.cost[0])
        else:
            a, c = int(info0.reflex), 0
        s, info0 = fns.frame(params, s, np.int32(a), np.int32(c), np.int32(0))
        actions.append(a)
        costs.append(c)
    return s, actions, costs, movers


def test_simulated_planner_agent_pays_sims_per_move_and_equals_in_process_play(srv):
    client, _, root = srv
    r = client.post(
        "/v1/sessions",
        json={"game": GAME, "agent": "planner", "k": 2, "clock": "simulated", "record": True},
    )
    assert r.status_code == 201, r.text
    assert r.json()["session"]["config"]["opponent"] == "reflex"  # the default with a checkpoint
    info = session_ended(client, r.json()["id"])
    assert info["status"] == "finished" and info["reason"] == "terminated"
    recorded = ReplayFile.read(info["replay"]).frames
    frames = [x.report for x in recorded]

    # The same game in process: the option for player 0, the reflex for player 1.
    s, actions, costs, movers = play_in_process(root, seed=0, planner_player=0, k=2)
    assert [x.action for x in frames] == actions
    assert [x.cost for x in frames] == costs
    assert info["episode_return"] == float(s.inner.rewards[0])
    # Player 0 pays 2 ticks a move until its clock is empty, then moves by reflex for free.
    mover_sources = {(m, x.source) for m, x in zip(movers, frames)}
    assert mover_sources <= {(0, "planned"), (1, "opponent")}
    agent_costs = [c for m, c in zip(movers, costs) if m == 0]
    assert agent_costs[: T0 // 2] == [2] * (T0 // 2) and set(agent_costs[T0 // 2 :]) <= {0}
    assert recorded[-1].state["clocks"][1] == T0
    assert replay(info["replay"]).frames == len(frames)


def test_grpc_agent_moves_only_on_its_turn(srv):
    _, address, _ = srv
    agent = AgentStream(address)
    agent.join(game_id=GAME, seed=5, clock=env_pb2.CLOCK_MODE_SIMULATED)
    hs, _ = agent.expect("handshake")
    assert hs.spec.num_players == 2 and hs.spec.num_actions == 122
    moves, refused, errors = 0, 0, []
    while moves < 4 or len(errors) < refused:
        msg = agent.next()
        if msg.WhichOneof("message") == "error":
            errors.append(msg.error.message)
            continue
        f = msg.frame
        assert list(f.clocks) and f.clocks[1] == T0  # the opponent's moves are free
        legal = np.flatnonzero(wire.from_tensor(f.legal_action_mask))
        if f.current_player == 0:
            agent.act(f.frame, int(legal[-1]))
            moves += 1
        elif refused < 2:
            agent.act(f.frame, int(legal[0]))  # not our move: refused, the opponent plays
            refused += 1
    agent.close()
    assert refused == 2 and all("is the opponent's move" in e for e in errors), errors


def test_real_time_chess_clock_charges_thinking_time(srv):
    _, address, _ = srv
    fps = 2.0  # one tick = 15.6 ms: the clock (12 ticks, 188 ms) outlasts a loaded box's reply
    agent = AgentStream(address)
    agent.join(game_id=GAME, seed=1, fps=fps)
    agent.expect("handshake")
    mine = []  # (frame, clocks when it was our move)
    reports = {}
    while len(mine) < 4:
        f, _ = agent.expect("frame")
        if f.HasField("previous"):
            reports[f.previous.frame] = f.previous
        if f.terminated or f.truncated:
            break
        if f.current_player == 0:
            mine.append((f.frame, tuple(f.clocks), f.deadline_ns - f.server_time_ns))
            if len(mine) == 1:  # answer the first move at once, then think forever
                legal = np.flatnonzero(wire.from_tensor(f.legal_action_mask))
                agent.act(f.frame, int(legal[0]))
    agent.close()
    (f1, c1, d1), (f2, c2, d2), (f3, c3, d3) = mine[:3]
    tick_s = 1 / fps / 32
    first = reports[f1]
    assert first.provenance == env_pb2.PROVENANCE_ON_TIME
    # The prompt move paid its thinking time in started ticks: from the frame's publication to
    # its arrival, which is the clock it had (T0 ticks) less the slack it left.
    thought_s = T0 * tick_s - first.slack_ms / 1e3
    assert T0 - c2[0] == wall_ticks(thought_s, tick_s) >= 1
    assert d1 == pytest.approx(T0 * tick_s * 1e9, abs=2)  # the deadline is the clock (ns)
    assert reports[f2].provenance == env_pb2.PROVENANCE_FALLBACK
    assert c3[0] == 0  # silence spent the whole clock
    assert d3 == pytest.approx(1e9 / fps, abs=2)  # an empty clock: one frame period
    assert c1[1] == c2[1] == c3[1] == T0


def test_planner_opponent_plays_the_planner_services_moves_and_pays_its_clock(srv):
    client, _, root = srv
    r = client.post(
        "/v1/sessions",
        json={
            "game": GAME,
            "agent": "reflex",
            "opponent": "planner",
            "opponent_k": 4,
            "clock": "simulated",
            "record": True,
            "seed": 3,
        },
    )
    assert r.status_code == 201, r.text
    created = r.json()["session"]
    assert (created["opponent"], created["opponent_k"]) == ("planner", 4)
    assert (created["config"]["opponent"], created["config"]["opponent_k"]) == ("planner", 4)
    info = session_ended(client, r.json()["id"])
    assert info["status"] == "finished" and info["reason"] == "terminated", info
    recorded = ReplayFile.read(info["replay"]).frames
    frames = [x.report for x in recorded]

    # The same game in process: the reflex for player 0, the option at k=4 for player 1.
    s, actions, costs, movers = play_in_process(root, seed=3, planner_player=1, k=4)
    assert [x.action for x in frames] == actions
    assert [x.cost for x in frames] == costs
    # The opponent's moves came from Plan calls at k=4, reported as the opponent's.
    opp = [x for m, x in zip(movers, frames) if m == 1]
    assert {(x.source, x.k, x.provenance.label) for x in opp} == {("opponent", 4, "on_time")}
    assert all(x.latency_ms > 0 for x in opp)
    assert {(x.source, x.k) for m, x in zip(movers, frames) if m == 0} == {("reflex", None)}
    stats = info["stats"]
    assert stats["decisions"] == len(opp) and stats["k_histogram"] == {"4": len(opp)}
    assert stats["planned"] == len(opp) and stats["planner_errors"] == 0
    # Player 1 pays sims(4) = 4 ticks a move until its clock is empty; player 0 moves for free.
    opp_costs = [c for m, c in zip(movers, costs) if m == 1]
    assert opp_costs[: T0 // 4] == [4] * (T0 // 4) and set(opp_costs[T0 // 4 :]) <= {0}
    assert recorded[-1].state["clocks"] == [T0, 0]


def test_real_time_planner_opponent_thinks_on_its_own_chess_clock(srv):
    client, address, _ = srv
    fps = 0.5  # one tick = 62.5 ms: the clock (12 ticks, 750 ms) outlasts a loaded box's search
    r = client.post(
        "/v1/sessions",
        json={"game": GAME, "agent": "grpc", "fps": fps, "opponent": "planner", "seed": 2},
    )
    assert r.status_code == 201, r.text
    created = r.json()
    assert created["session"]["config"]["opponent_k"] == 4  # the game's largest budget
    agent = AgentStream(address)
    agent.join(session_id=created["id"], token=created["token"])
    agent.expect("handshake")
    tick_s = 1 / fps / 32
    theirs, clocks, reports = [], {}, {}
    while len(theirs) < 3:
        f, _ = agent.expect("frame")
        clocks[f.frame] = tuple(f.clocks)
        if f.HasField("previous"):
            reports[f.previous.frame] = f.previous
        if f.terminated or f.truncated:
            break
        if f.current_player == 0:
            legal = np.flatnonzero(wire.from_tensor(f.legal_action_mask))
            agent.act(f.frame, int(legal[0]))
        else:
            theirs.append((f.frame, tuple(f.clocks), f.deadline_ns - f.server_time_ns))
    agent.close()
    assert len(theirs) >= 2, theirs
    for frame, (c0, c1), window_ns in theirs[:2]:
        # Its deadline is what is left on its clock; its answer came in time and paid the
        # started ticks of its thinking, which the agent's clock never pays.
        assert c1 > 0 and window_ns == pytest.approx(c1 * tick_s * 1e9, abs=2)
        assert reports[frame].provenance == env_pb2.PROVENANCE_ON_TIME
        after = clocks[frame + 1]
        thought_s = c1 * tick_s - reports[frame].slack_ms / 1e3
        assert c1 - after[1] == wall_ticks(thought_s, tick_s) >= 1
        assert after[0] == c0
    info = client.get(f"/v1/sessions/{created['id']}").json()
    assert info["stats"]["decisions"] >= 2 and set(info["stats"]["k_histogram"]) == {"4"}


def test_planner_opponent_refusals_say_why(srv, serve):
    client, _, _ = srv
    base = {"game": GAME, "agent": "reflex", "max_frames": 1}
    cases = [
        ({"opponent": "planner", "opponent_k": 3}, 422, "opponent_k 3 is not a budget of"),
        ({"opponent_k": 3}, 422, "choose from [2, 4]"),
        ({"opponent": "reflex", "opponent_k": 2}, 422, "for the planner opponent only"),
        ({"opponent": "planner", "opponent_k": 0}, 422, "opponent_k"),
        ({"game": "snake-rt-v0", "opponent_k": 2}, 422, "snake-rt-v0 has none"),
    ]
    for extra, status, says in cases:
        r = client.post("/v1/sessions", json={**base, **extra})
        assert r.status_code == status and says in r.json()["detail"], (extra, r.text)
    # A person plays the planner at the largest budget by default when the service plans it.
    r = client.post("/v1/sessions", json={"game": GAME, "agent": "human"})
    assert r.status_code == 201, r.text
    cfg = r.json()["session"]["config"]
    assert (cfg["opponent"], cfg["opponent_k"]) == ("planner", 4)
    bearer = {"Authorization": f"Bearer {r.json()['token']}"}
    assert client.delete(f"/v1/sessions/{r.json()['id']}", headers=bearer).status_code == 200

    # No planner service configured: refused, and a person's default is the reflex.
    alone = serve((GAME,)).client
    r = alone.post("/v1/sessions", json={**base, "opponent": "planner", "opponent_k": 2})
    assert r.status_code == 409 and "no planner_address" in r.json()["detail"], r.text
    r = alone.post("/v1/sessions", json={"game": GAME, "agent": "human"})
    assert r.status_code == 201 and r.json()["session"]["config"]["opponent"] == "reflex"
    # A planner service that does not answer: refused at creation, not at the first move.
    dead = serve((GAME,), planner_address="127.0.0.1:1").client
    r = dead.post("/v1/sessions", json={**base, "opponent": "planner"})
    assert r.status_code == 409 and "did not answer (UNAVAILABLE" in r.json()["detail"], r.text
    r = dead.post("/v1/sessions", json={"game": GAME, "agent": "human"})
    assert r.status_code == 201 and r.json()["session"]["config"]["opponent"] == "reflex"
