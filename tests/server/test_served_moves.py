"""Speed Go on the env server with a network that always prefers pass (the shipped one passes on
the empty board): in real time every side plays the served moves (`Game.served_state`), so
nobody passes while the game is open, a side out of time included; the simulated clock plays
the network's masked argmax, as training and `rtplan eval` do."""

from __future__ import annotations

import dataclasses

import jax
import pytest

from rtplan.games.go import PASS
from rtplan.harness.checkpoint import planner_path
from rtplan.planner import Planner
from rtplan.server import ReplayFile
from rtplan.server.replay import Step, resimulate
from support import save_planner, session_ended, tiny_config

GAME = "speed-go-v0"


@pytest.fixture(scope="module")
def srv(serve, tmp_path_factory):
    root = tmp_path_factory.mktemp("passer")
    # Clocks of 0 ticks: every move of either side is made out of time (by reflex).
    cfg = dataclasses.replace(tiny_config(GAME), game_params=(("initial_time", 0),))
    params = Planner(cfg).init_params(jax.random.PRNGKey(0))
    bias = params["params"]["policy"]["bias"]
    params["params"]["policy"]["bias"] = bias.at[PASS].set(50.0)  # the pass always first
    save_planner(planner_path(root, GAME), cfg, params)
    return serve((GAME,), checkpoint_dir=root)


def _play(srv, **body) -> list[tuple]:
    """(frame, action, the mover's clock, sensible points left, done) of each recorded ply."""
    r = srv.client.post("/v1/sessions", json={"game": GAME, "record": True, **body})
    assert r.status_code == 201, r.text
    info = session_ended(srv.client, r.json()["id"], timeout=300)
    assert info["status"] == "finished", info
    rf = ReplayFile.read(info["replay"])
    fns, state, steps = resimulate(rf)
    served = jax.jit(fns.game.served_mask)
    plies = []
    for step in steps:
        if isinstance(step, Step):
            mover = int(state.current_player)
            sensible = bool(served(state)[:PASS].any())
            clock = int(state.inner.clocks[mover])
            plies.append((step.line.report.frame, step.line.report.action, clock, sensible))
            state = step.state
    assert bool(state.terminated)
    return plies


def test_real_time_never_passes_while_the_game_is_open_out_of_time(srv):
    plies = _play(srv, agent="reflex", fps=50.0)
    assert all(clock == 0 for _, _, clock, _ in plies)  # both sides out of time throughout
    assert len(plies) > 40
    for frame, action, _, sensible in plies[:-1]:
        # A pass only with no sensible point left (the last ply may end a won game).
        assert action != PASS or not sensible, (frame, plies)


def test_the_simulated_clock_plays_the_networks_argmax(srv):
    plies = _play(srv, agent="reflex", clock="simulated")
    assert [a for _, a, _, _ in plies] == [PASS, PASS]  # two passes: the game is over at once
