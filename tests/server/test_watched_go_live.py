"""Issue 55's done-when for Speed Go: a default planner session, through a real env server and
the real planner service on the shipped checkpoint and gate, lasts as long as docs/services.md
says a person can follow and plays to a scored end without a pass while the game is open, also
with both cores busy. Minutes a run: `pytest -m slow`."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from rtplan.games.go import PASS
from rtplan.server import ReplayFile
from rtplan.server._config import WATCHED
from rtplan.server.replay import Step, resimulate
from support import env_server, post_session, session_ended, start_planner

GAME = "speed-go-v0"
CHECKPOINTS = Path(__file__).resolve().parents[2] / "checkpoints"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    if not (CHECKPOINTS / GAME / "gate.msgpack").exists():
        pytest.skip(f"no shipped planner and gate under {CHECKPOINTS / GAME}")
    tmp = tmp_path_factory.mktemp("watched")
    planner = start_planner(CHECKPOINTS, (GAME,))
    try:
        with env_server(tmp, CHECKPOINTS, (GAME,), "--planner-address", planner.address) as url:
            yield url, tmp / "replays"
    finally:
        planner.stop()


@contextlib.contextmanager
def busy_cores(n: int):
    """`n` processes that spin a core each while the game plays."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


@pytest.mark.parametrize("busy", [0, 2], ids=["quiet", "both-cores-busy"])
def test_a_default_speed_go_planner_session_can_be_watched_to_a_scored_end(base, busy):
    url, replays = base
    with busy_cores(busy):
        start = time.monotonic()
        created = post_session(url, game=GAME, agent="planner", seed=1, record=True)
        config = created["session"]["config"]
        assert (config["fps"], config["time_s"], config["increment_s"]) == (1.0, 60.0, 1.0)
        info = session_ended(url, created["id"], timeout=900, poll_s=0.5)
        wall_s = time.monotonic() - start
    assert info["status"] == "finished", info
    frames = info["frame"]
    # Each ply shows for a frame period at least: a game of minutes, as the docs say.
    assert wall_s >= frames / WATCHED.fps - 1.0 and wall_s >= 60.0, (frames, wall_s)

    rf = ReplayFile.read(next(replays.glob(f"*{created['id']}*.jsonl")))
    fns, state, steps = resimulate(rf)
    served = jax.jit(fns.game.served_mask)
    passes = []
    for step in steps:
        if not isinstance(step, Step):
            continue
        if step.line.report.action == PASS:
            open_points = bool(np.asarray(served(state))[:PASS].any())
            passes.append((step.line.report.frame, open_points, step.info.done))
            # A pass ends the game (the second one, winning), or its mover had no sensible
            # point left: never a pass while the game goes on with moves to play.
            assert step.info.done or not open_points, (step.line.report, passes)
        state = step.state
    assert bool(state.terminated) and sorted(np.asarray(state.inner.rewards).tolist()) == [-1, 1]
    margin = float(fns.game.black_area_margin(state))
    print(
        f"\n{busy} busy cores: {frames} plies in {wall_s:.1f} s, agent's return "
        f"{info['episode_return']:+.0f}, black's area margin {margin:+.1f}, clocks "
        f"{info['clocks']}, passes {passes}, planner {info['stats']['k_histogram']}, "
        f"misses {info['stats']['planner_misses']}"
    )
