"""Clock games on the env server: the agent is player 0 against a built-in opponent; moves are
charged sims(k) ticks (simulated clock) or thinking time (real time, a chess clock)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from planner.store import load_planner, planner_path
from rtplan import wire
from rtplan.v1 import env_pb2
from server import replay
from server._rules import wall_ticks
from server._runtime import compiled
from support import AgentStream, planner_fns, tiny_config

GAME = "speed-hex-v0"
T0 = dict(tiny_config(GAME).game_params)["initial_time"]


@pytest.fixture(scope="module")
def srv(serve):
    s = serve((GAME,), planner=True)
    return s.client, s.address, s.root


def finished(client, sid: str, timeout: float = 120.0) -> dict:
    end = time.monotonic() + timeout
    while (info := client.get(f"/v1/sessions/{sid}").json())["status"] in ("waiting", "running"):
        assert time.monotonic() < end, info
        time.sleep(0.05)
    return info


def test_simulated_planner_agent_pays_sims_per_move_and_equals_in_process_play(srv):
    client, _, root = srv
    r = client.post(
        "/v1/sessions",
        json={"game": GAME, "agent": "planner", "k": 2, "clock": "simulated", "record": True},
    )
    assert r.status_code == 201, r.text
    assert r.json()["session"]["config"]["opponent"] == "reflex"  # the default with a checkpoint
    info = finished(client, r.json()["id"])
    assert info["status"] == "finished" and info["reason"] == "terminated"
    lines = [json.loads(x) for x in Path(info["replay"]).read_text().splitlines()]
    frames = [x for x in lines if x["type"] == "frame"]

    # The same game in process: the option for player 0, the reflex for player 1 (with the
    # jitted step and reflex the server compiled, to spare a compile).
    cfg, params, _ = load_planner(GAME, str(planner_path(root, GAME)))
    _, option = planner_fns(cfg)
    fns = compiled(GAME, tuple(sorted(cfg.game_params)), cfg)
    s = fns.init(jax.random.PRNGKey(0))
    info0 = fns.info(params, s)
    actions, costs, movers = [], [], []
    while not bool(s.done):
        movers.append(int(s.current_player))
        if movers[-1] == 0:
            batch = jax.tree.map(lambda x: x[None], s)
            out = option(params, jax.random.split(jax.random.PRNGKey(0), 1), batch, 2)
            a, c = int(out.actions[0, 0]), int(out.cost[0])
        else:
            a, c = int(info0.reflex), 0
        s, info0 = fns.frame(params, s, np.int32(a), np.int32(c))
        actions.append(a)
        costs.append(c)
    assert [x["action"] for x in frames] == actions
    assert [x["cost"] for x in frames] == costs
    assert info["episode_return"] == float(s.inner.rewards[0])
    # Player 0 pays 2 ticks a move until its clock is empty, then moves by reflex for free.
    mover_sources = {(m, x["source"]) for m, x in zip(movers, frames)}
    assert mover_sources <= {(0, "planned"), (1, "opponent")}
    agent_costs = [c for m, c in zip(movers, costs) if m == 0]
    assert agent_costs[: T0 // 2] == [2] * (T0 // 2) and set(agent_costs[T0 // 2 :]) <= {0}
    assert frames[-1]["state"]["clocks"][1] == T0
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
